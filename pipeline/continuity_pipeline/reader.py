"""Evidence input: find files, parse them with the explicit schema, and report every bad record.

Nothing is dropped silently. A record that cannot be used becomes a row of the ``bad`` DataFrame with its file
and 1-based line (JSON lines) or row (Parquet); a file that cannot be read at all becomes a row with a null line.

Line numbers are computed without a sort of the data: Spark's text source exposes the byte offset of each file
split (``_metadata.file_block_start``) and rows of one split are consecutive in ``monotonically_increasing_id``
order, so line = lines of the earlier splits of the file + position inside the split. Only a small per-split
aggregate reaches the driver.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlparse

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from continuity_pipeline import schemas as sc
from continuity_pipeline import validate
from continuity_pipeline.spark import local_frame

# Plain ``.json`` files in a directory are not evidence by convention (reports, manifests); name them explicitly
# on the command line to read them as JSON lines.
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".jsonl.gz", ".ndjson.gz")
PARQUET_SUFFIXES = (".parquet", ".parq")


@dataclass
class InputFiles:
    jsonl: list[str] = field(default_factory=list)
    parquet: list[str] = field(default_factory=list)
    problems: list[dict] = field(default_factory=list)  # file-level bad records (BAD_RECORD rows)
    sizes: dict[str, int] = field(default_factory=dict)


@dataclass
class Evidence:
    records: DataFrame  # valid records: schemas.RECORD columns + _file
    bad: DataFrame  # schemas.BAD_RECORD
    files: InputFiles
    file_stats: list[dict]  # per file: file, format, records, bad
    extra_rows: list[dict] = field(default_factory=list)  # the piggy-backed aggregate of ``statistics``


@dataclass
class Prepared:
    """Parsed evidence before any Spark action: every line/row with its validation, and the valid records."""

    files: InputFiles
    parsed: DataFrame | None  # None: no readable file
    records: DataFrame


@dataclass
class PiggyBack:
    """An aggregate computed in the same pass as the file statistics (one scan instead of two).

    ``keys`` must be null for the rows the aggregate does not cover (those rows then only count for the file
    statistics); ``aggs`` are aggregate expressions, and rows with a non-null first key come back with a
    ``records`` count summed over files and splits. Aggregates are combined with min/max/sum only.
    """

    keys: dict[str, Column]
    aggs: dict[str, tuple[str, Column]]  # name -> (how to combine across files: min|max|sum, expression)


def _is_local(path: str) -> bool:
    scheme = urlparse(path).scheme
    return scheme in ("", "file") or (len(scheme) == 1)  # "C:" style never happens here, but be safe


def _local(path: str) -> str:
    return path[len("file:"):] if path.startswith("file:") else path


def _kind_of(name: str, explicit: bool) -> str | None:
    low = name.lower()
    if low.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if low.endswith(JSONL_SUFFIXES):
        return "jsonl"
    return "jsonl" if explicit else None


def _hidden(name: str) -> bool:
    # Spark/Hadoop conventions: _SUCCESS, _metadata, .crc files are bookkeeping, not evidence.
    return name.startswith((".", "_"))


# A record takes 10-70x fewer bytes in the evidence's Parquet (zstd, columnar) than as a JSON line (70x for the
# generator's 10 M events: 58 MB); sizes are compared in JSON-line bytes with the high end, so that a Parquet input
# is never taken for smaller than it is (a wrong guess only costs speed).
PARQUET_EXPANSION = 64


def weighted_size(sizes: dict[str, int]) -> int:
    """Input size in JSON-line bytes (Parquet files count ``PARQUET_EXPANSION`` times their size)."""
    return sum(n * (PARQUET_EXPANSION if p.lower().endswith(PARQUET_SUFFIXES) else 1) for p, n in sizes.items())


def local_size(paths: Sequence[str]) -> int | None:
    """``weighted_size`` of the files under ``paths`` when every one is local (before Spark starts), else None."""
    sizes: dict[str, int] = {}
    for raw in paths:
        if not _is_local(raw):
            return None
        path = os.path.abspath(_local(raw))
        if os.path.isdir(path):
            for root, _dirs, names in os.walk(path):
                for n in names:
                    if os.path.isfile(os.path.join(root, n)):
                        sizes[os.path.join(root, n)] = os.path.getsize(os.path.join(root, n))
        elif os.path.isfile(path):
            sizes[path] = os.path.getsize(path)
    return weighted_size(sizes)


def discover(spark: SparkSession, paths: Sequence[str]) -> InputFiles:
    """Expand files and directory trees into evidence files. Explicitly named files are always read."""
    found = InputFiles()
    for raw in paths:
        if _is_local(raw):
            path = os.path.abspath(_local(raw))
            if os.path.isdir(path):
                for root, dirs, names in os.walk(path):
                    dirs[:] = sorted(d for d in dirs if not _hidden(d))
                    for name in sorted(names):
                        if _hidden(name):
                            continue
                        _add_local(found, os.path.join(root, name), explicit=False)
            elif os.path.exists(path):
                _add_local(found, path, explicit=True)
            else:
                found.problems.append(_file_problem(path, "no such file or directory"))
        else:
            _discover_hadoop(spark, raw, found)
    found.jsonl.sort()
    found.parquet.sort()
    return found


def _add_local(found: InputFiles, path: str, explicit: bool) -> None:
    kind = _kind_of(path, explicit)
    if kind is None:
        return
    if not os.access(path, os.R_OK):
        found.problems.append(_file_problem(path, "file is not readable (permission denied)"))
        return
    size = os.path.getsize(path)
    found.sizes[path] = size
    if size == 0:
        found.problems.append(_file_problem(path, "empty file", severity="warning"))
        return
    if kind == "parquet":
        problem = parquet_footer_problem(path)
        if problem:
            found.problems.append(_file_problem(path, problem))
            return
    (found.parquet if kind == "parquet" else found.jsonl).append(path)


def _discover_hadoop(spark: SparkSession, raw: str, found: InputFiles) -> None:
    """List a cluster path (hdfs://, s3a://, ...) with Hadoop's FileSystem through the JVM."""
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
    hpath = jvm.org.apache.hadoop.fs.Path(raw)
    fs = hpath.getFileSystem(conf)
    if not fs.exists(hpath):
        found.problems.append(_file_problem(raw, "no such file or directory"))
        return
    status = fs.getFileStatus(hpath)
    if status.isFile():
        kind = _kind_of(raw, True) or "jsonl"
        (found.parquet if kind == "parquet" else found.jsonl).append(raw)
        return
    it = fs.listFiles(hpath, True)
    while it.hasNext():
        st = it.next()
        p = st.getPath()
        rel = str(p)[len(str(hpath)):]
        if any(_hidden(part) for part in rel.split("/") if part):
            continue
        kind = _kind_of(p.getName(), False)
        if kind is None:
            continue
        if st.getLen() == 0:
            found.problems.append(_file_problem(str(p), "empty file", severity="warning"))
            continue
        found.sizes[str(p)] = int(st.getLen())
        (found.parquet if kind == "parquet" else found.jsonl).append(str(p))


def _file_problem(path: str, reason: str, severity: str = "error") -> dict:
    return {"file": path, "line": None, "severity": severity, "reason": reason, "kind": None, "run_id": None,
            "excerpt": None}


def parquet_footer_problem(path: str) -> str | None:
    """Why a local Parquet file cannot be read with the evidence schema, or None.

    Checked on the driver from the footer only (a few KiB per file) because Spark would fail the whole job on
    a column of the wrong type instead of naming the file.
    """
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except Exception as exc:  # any footer error means the file is unusable; report its message
        return f"unreadable Parquet file: {exc}"
    wrong = []
    for name in schema.names:
        expected = sc.FIELD_TYPES.get(name)
        if expected is None:
            continue
        if not _arrow_compatible(schema.field(name).type, expected):
            wrong.append(f"{name} is {schema.field(name).type}, expected {expected.simpleString()}")
    if "schema" not in schema.names:
        return "Parquet file has no 'schema' column (not evidence v1)"
    return ("Parquet column types do not match evidence v1: " + "; ".join(wrong)) if wrong else None


def _arrow_compatible(atype, expected: T.DataType) -> bool:
    import pyarrow as pa

    if isinstance(expected, T.StringType):
        return pa.types.is_string(atype) or pa.types.is_large_string(atype) or pa.types.is_null(atype)
    if isinstance(expected, T.LongType):
        return pa.types.is_int64(atype) or pa.types.is_null(atype)
    if isinstance(expected, T.DoubleType):
        return pa.types.is_float64(atype) or pa.types.is_null(atype)
    if isinstance(expected, T.BooleanType):
        return pa.types.is_boolean(atype) or pa.types.is_null(atype)
    if isinstance(expected, T.MapType):
        return pa.types.is_map(atype) or pa.types.is_null(atype)
    if isinstance(expected, T.StructType):
        return pa.types.is_struct(atype) or pa.types.is_null(atype)
    if isinstance(expected, T.ArrayType):
        return pa.types.is_list(atype) or pa.types.is_large_list(atype) or pa.types.is_null(atype)
    return False


# --- validation expressions ----------------------------------------------------------------------------------

def _quoted(c: Column) -> Column:
    return F.concat(F.lit("'"), F.substring(c, 1, 60), F.lit("'"))


def _required_by_field() -> dict[str, list[str]]:
    by_field: dict[str, list[str]] = {}
    for k, fields in sc.REQUIRED.items():
        for f in fields:
            if (k, f) not in sc.NULLABLE_REQUIRED:
                by_field.setdefault(f, []).append(k)
    return dict(sorted(by_field.items()))


def valid_expr() -> Column:
    """Spark expression: true exactly when ``problem_expr()`` is null.

    Plain comparisons only, one ``CASE kind`` so each record runs only its own kind's checks, all compiled into
    the scan's generated code. ``problem_expr()`` builds strings with array functions whose lambdas Spark
    interprets row by row, so it runs only for the rows this rejects (measured: validating every row with it, or
    with one ``kind IN (...)`` test per field, was most of the pipeline's time).
    """
    kind = F.col("kind")
    per_kind = None
    for k in sc.KINDS:
        checks = [F.col(f).isNotNull() for f in sc.REQUIRED.get(k, ()) if (k, f) not in sc.NULLABLE_REQUIRED]
        # an enum field that is null is not an enum problem (as in problem_expr)
        checks += [F.coalesce(F.col(fname).isin(*allowed), F.lit(True))
                   for (ek, fname), allowed in sorted(sc.ENUMS.items()) if ek == k]
        ok = F.lit(True)
        for c in checks:
            ok = ok & c
        per_kind = F.when(kind == k, ok) if per_kind is None else per_kind.when(kind == k, ok)
    assert per_kind is not None
    return (F.coalesce(F.col("schema") == F.lit(sc.SCHEMA_ID), F.lit(False))
            & F.col("run_id").isNotNull() & F.col("ts").isNotNull()
            & (F.col("ts") >= 0) & F.length("run_id").between(1, 128)
            & per_kind.otherwise(F.lit(False)))


def problem_expr() -> Column:
    """Spark expression: the first reason a parsed record is unusable, or null when it is valid.

    Kept compact on purpose (one clause per field, not per kind and field): the optimizer copies this
    expression into every filter and projection that uses it. Evaluate it behind ``valid_expr()``.
    """
    kind = F.col("kind")
    common = F.concat_ws(", ", F.array_compact(F.array(*[F.when(F.col(c).isNull(), F.lit(c))
                                                          for c in ("kind", "run_id", "ts")])))
    missing = F.concat_ws(", ", F.array_compact(F.array(*[
        F.when(F.col(f).isNull() & kind.isin(*ks), F.lit(f)) for f, ks in _required_by_field().items()])))
    enum_checks = [
        F.when((kind == k) & ~F.col(fname).isin(*allowed),
               F.concat(F.lit(f"{k}: {fname} is "), _quoted(F.col(fname)),
                        F.lit(", expected one of " + ", ".join(allowed))))
        for (k, fname), allowed in sorted(sc.ENUMS.items())]
    return F.coalesce(
        F.when(F.col("schema").isNull(), F.lit("missing field 'schema'")),
        F.when(F.col("schema") != F.lit(sc.SCHEMA_ID),
               F.concat(F.lit("schema is "), _quoted(F.col("schema")),
                        F.lit(f", expected '{sc.SCHEMA_ID}' (version not supported)"))),
        F.when(common != "", F.concat(F.lit("missing field(s): "), common)),
        F.when(~kind.isin(*sc.KINDS), F.concat(F.lit("unknown kind "), _quoted(kind))),
        F.when(missing != "", F.concat(kind, F.lit(": missing field(s): "), missing)),
        *enum_checks,
        F.when(F.col("ts") < 0, F.lit("ts must be >= 0")),
        F.when((F.length("run_id") == 0) | (F.length("run_id") > 128), F.lit("run_id must have 1-128 characters")),
    )


# --- reading -------------------------------------------------------------------------------------------------

_explain_udf = F.udf(validate.explain, T.StringType(), useArrow=False)


def _parse_jsonl(spark: SparkSession, files: list[str]) -> DataFrame:
    raw = (spark.read.text(files)
           .select(F.col("value").alias("_value"),
                   F.col("_metadata.file_path").alias("_file"),
                   F.col("_metadata.file_block_start").alias("_block"),
                   F.monotonically_increasing_id().alias("_mid")))
    # inline(array(from_json(...))) instead of selecting fields of a from_json column: a Generate is an
    # optimizer barrier, so the JSON is parsed ONCE per line. Selecting "_r.field" lets the optimizer copy the
    # whole from_json into every field reference (one parse per field: ~100x slower, measured).
    parsed = raw.select("*", F.inline(F.array(F.from_json(
        "_value", T.StructType([*sc.RECORD_WITH_CORRUPT.fields, T.StructField("_null", T.BooleanType())]),
        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": sc.CORRUPT_COL}))))
    cols = [F.col(f.name) for f in sc.RECORD.fields]
    blank = F.trim(F.col("_value")) == ""
    unparsed = (F.col(sc.CORRUPT_COL).isNotNull() | (F.col("schema").isNull() & F.col("kind").isNull()
                                                     & F.col("run_id").isNull() & ~blank
                                                     & ~F.trim("_value").startswith("{"))).alias("_unparsed")
    return (parsed.select(*cols, "_file", "_block", "_mid", "_value", F.lit(None).cast("long").alias("_line"),
                          unparsed, blank.alias("_blank"))
            .withColumn("_bad", ~F.col("_blank") & (F.col("_unparsed") | ~valid_expr())))


def _parse_parquet(spark: SparkSession, files: list[str]) -> DataFrame:
    df = (spark.read.schema(sc.RECORD).parquet(*files)
          .select(*[F.col(f.name) for f in sc.RECORD.fields],
                  F.col("_metadata.file_path").alias("_file"),
                  (F.col("_metadata.row_index") + 1).alias("_line")))
    return (df.withColumn("_block", F.lit(None).cast("long"))
            .withColumn("_mid", F.lit(None).cast("long"))
            .withColumn("_unparsed", F.lit(False))
            .withColumn("_blank", F.lit(False))
            .withColumn("_bad", ~valid_expr())
            # The excerpt of a bad Parquet row is its JSON form; built only for rows that are reported.
            .withColumn("_value", F.when(F.col("_bad"),
                                         F.to_json(F.struct(*[F.col(f.name) for f in sc.RECORD.fields])))))


def _reason() -> Column:
    """Why a ``_bad`` row is bad. Only ever evaluated on the bad rows: keeping ``problem_expr`` out of the
    scans of good data keeps their generated code small enough for the JIT (measured: ~2x faster scans)."""
    return F.when(F.col("_unparsed"), F.lit("__explain__")).otherwise(problem_expr())


def _strip_scheme(c: Column) -> Column:
    return F.regexp_replace(c, r"^file:", "")


def prepare(spark: SparkSession, paths: Sequence[str]) -> Prepared:
    """Find and parse every evidence file under ``paths`` (lazy: no Spark action)."""
    files = discover(spark, paths)
    parts: list[DataFrame] = []
    if files.jsonl:
        parts.append(_parse_jsonl(spark, files.jsonl))
    if files.parquet:
        parts.append(_parse_parquet(spark, files.parquet))
    if not parts:
        empty = local_frame(spark, [], sc.RECORD)
        return Prepared(files, None, empty.withColumn("_file", F.lit(None).cast("string")))
    parsed = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    parsed = parsed.withColumn("_file", _strip_scheme(F.col("_file")))
    records = parsed.filter(~F.col("_bad") & ~F.col("_blank")).select(
        *[F.col(f.name) for f in sc.RECORD.fields], "_file")
    return Prepared(files, parsed, records)


def read(spark: SparkSession, paths: Sequence[str], progress=None) -> Evidence:
    """Parse every evidence file under ``paths`` and count records and bad records per file."""
    return statistics(spark, prepare(spark, paths), progress)


def _combine(rows: list, piggy: PiggyBack) -> list[dict]:
    first = next(iter(piggy.keys))
    out: dict[tuple, dict] = {}
    for row in rows:
        if row[first] is None:
            continue
        key = tuple(row[k] for k in piggy.keys)
        acc = out.get(key)
        if acc is None:
            out[key] = {**{k: row[k] for k in piggy.keys}, "records": int(row["lines"]),
                        **{a: row[a] for a in piggy.aggs}}
            continue
        acc["records"] += int(row["lines"])
        for a, (how, _expr) in piggy.aggs.items():
            v = row[a]
            if v is None:
                continue
            if acc[a] is None:
                acc[a] = v
            else:
                acc[a] = min(acc[a], v) if how == "min" else max(acc[a], v) if how == "max" else acc[a] + v
    return list(out.values())


def statistics(spark: SparkSession, prep: Prepared, progress=None, piggy: PiggyBack | None = None) -> Evidence:
    """The one pass over every file: per file (and per split for JSON lines) records, blank and bad counts, plus
    ``piggy``'s aggregate. A second action collects the bad rows' line positions only when there are bad rows."""
    files, parsed = prep.files, prep.parsed
    if parsed is None:
        bad = local_frame(spark, [_bad_tuple(p) for p in files.problems], sc.BAD_RECORD)
        return Evidence(prep.records, bad, files, [])

    # Per-file (and per-split for JSON lines) statistics: small, one row per split (and piggy-back key).
    keys = [F.col("_file"), F.col("_block"), *[c.alias(n) for n, c in (piggy.keys.items() if piggy else ())]]
    aggs = [c.alias(n) for n, (_how, c) in (piggy.aggs.items() if piggy else ())]
    rows = (parsed.groupBy(*keys)
            .agg(F.count(F.lit(1)).alias("lines"), F.min("_mid").alias("min_mid"),
                 F.sum(F.when(F.col("_blank"), 1).otherwise(0)).alias("blank"),
                 F.sum(F.when(F.col("_bad"), 1).otherwise(0)).alias("bad"), *aggs)
            .collect())
    extra_rows = _combine(rows, piggy) if piggy else []
    per_split: dict[tuple, dict] = {}
    for row in rows:
        acc = per_split.setdefault((row["_file"], row["_block"]), {
            "_file": row["_file"], "_block": row["_block"], "lines": 0, "min_mid": None, "blank": 0, "bad": 0})
        acc["lines"] += int(row["lines"])
        acc["blank"] += int(row["blank"])
        acc["bad"] += int(row["bad"])
        if row["min_mid"] is not None and (acc["min_mid"] is None or row["min_mid"] < acc["min_mid"]):
            acc["min_mid"] = row["min_mid"]
    stats = list(per_split.values())
    per_file: dict[str, dict] = {}
    block_rows: list[tuple[str, int, int, int]] = []
    for row in sorted(stats, key=lambda r: (r["_file"], r["_block"] if r["_block"] is not None else -1)):
        entry = per_file.setdefault(row["_file"], {"file": row["_file"], "lines": 0, "records": 0, "bad": 0})
        if row["_block"] is not None:
            block_rows.append((row["_file"], int(row["_block"]), int(row["min_mid"]), entry["lines"]))
        entry["lines"] += int(row["lines"])
        entry["records"] += int(row["lines"]) - int(row["blank"]) - int(row["bad"])
        entry["bad"] += int(row["bad"])
    for path in files.jsonl + files.parquet:
        local = _local(path)
        if local not in per_file:
            files.problems.append(_file_problem(local, "no record could be read (corrupt or unreadable file)"))
    file_stats = []
    for path in sorted(per_file):
        entry = per_file[path]
        entry["format"] = "parquet" if path.lower().endswith(PARQUET_SUFFIXES) else "jsonl"
        file_stats.append(entry)

    bad_rows = parsed.filter(F.col("_bad")).withColumn("_reason", _reason())
    if block_rows:
        blocks = local_frame(spark, block_rows, "_file string, _block long, _min_mid long, _prior long")
        bad_rows = (bad_rows.join(F.broadcast(blocks), ["_file", "_block"], "left")
                    .withColumn("_line", F.coalesce(F.col("_line"),
                                                    F.col("_prior") + F.col("_mid") - F.col("_min_mid") + 1)))
    total_lines = {p: e["lines"] for p, e in per_file.items()}
    totals = local_frame(spark, sorted(total_lines.items()) or [("", 0)], "_file string, _total long")
    reason = F.when(F.col("_reason") == "__explain__", _explain_udf(F.col("_value"))).otherwise(F.col("_reason"))
    # A JSON line cut in the middle at the very end of a file is what a writer killed with -9 leaves behind:
    # reported as a warning, not an error (docs/evidence.md: the ledger is then reported as truncated).
    torn = ((F.col("_reason") == "__explain__") & F.col("_value").isNotNull() & (F.col("_line") == F.col("_total"))
            & F.trim(F.col("_value")).startswith("{") & ~F.trim(F.col("_value")).endswith("}"))
    bad = (bad_rows.join(F.broadcast(totals), "_file", "left")
           .select(F.col("_file").alias("file"), F.col("_line").alias("line"),
                   F.when(torn, "warning").otherwise("error").alias("severity"),
                   F.when(torn, F.concat(F.lit("torn last line (writer stopped mid-record): "), reason))
                   .otherwise(reason).alias("reason"),
                   F.col("kind"), F.col("run_id"),
                   F.substring("_value", 1, 160).alias("excerpt")))
    if files.problems:
        bad = bad.unionByName(local_frame(spark, [_bad_tuple(p) for p in files.problems], sc.BAD_RECORD))
    if progress:
        progress(f"read {len(file_stats)} file(s): {sum(e['records'] for e in file_stats):,} records, "
                 f"{sum(e['bad'] for e in file_stats):,} bad records, {len(files.problems)} file problem(s)")
    records = prep.records
    if not any(e["bad"] for e in file_stats):
        # Validity is a function of the record alone: when this pass found no bad record, every later pass can
        # skip the check (and read only the columns it uses) and still see exactly the valid records.
        records = parsed.filter(~F.col("_blank")).select(*[F.col(f.name) for f in sc.RECORD.fields], "_file")
    return Evidence(records, bad, files, file_stats, extra_rows)


def _bad_tuple(p: dict) -> tuple:
    return (p["file"], p["line"], p["severity"], p["reason"], p["kind"], p["run_id"], p["excerpt"])


def kinds(records: DataFrame, names: Iterable[str]) -> DataFrame:
    return records.filter(F.col("kind").isin(*names))
