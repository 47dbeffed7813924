"""One source for the evidence format: schemas/evidence-v1.schema.json. The Spark record (``schemas``), the type
explanations (``validate``) and the generator's Parquet types (``generate``) are derived from it through
``layout``; evidence.py's tables are checked against it in tests/unit/plugins/module_utils/test_evidence.py."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import sysconfig

import pytest
from pyspark.sql import types as T

from ansible_collections.continuity.artemis.plugins.module_utils import evidence as ev
from continuity_pipeline import generate, layout, package, reader, validate
from continuity_pipeline import schemas as sc

SCHEMA = ev.load_schema()


def drift(schema: dict, record: T.StructType) -> list[str]:
    """Where the Spark record ``record`` differs from the one the JSON Schema ``schema`` defines: [] = none."""
    expected = {f.name: f.dataType for f in sc.record_schema(layout.derive(schema)).fields}
    actual = {f.name: f.dataType for f in record.fields}
    problems = [f"{n}: in the JSON Schema, not in the Spark schema" for n in expected if n not in actual]
    problems += [f"{n}: in the Spark schema, not in the JSON Schema" for n in actual if n not in expected]
    problems += [f"{n}: {actual[n].simpleString()} in the Spark schema, {expected[n].simpleString()} in the JSON "
                 "Schema" for n in expected if n in actual and actual[n] != expected[n]]
    return problems


def test_the_spark_record_is_the_json_schema():
    assert drift(SCHEMA, sc.RECORD) == []
    assert sc.SCHEMA_ID == ev.SCHEMA_ID and sc.KINDS == ev.KINDS
    # every field of every kind (and the common ones) is a column, in the schema's order
    names = [f.name for f in sc.RECORD.fields]
    assert names[:4] == list(SCHEMA["properties"])
    for kind in sc.KINDS:
        assert set(SCHEMA["$defs"][kind]["properties"]) <= set(names), kind
    assert sc.NULLABLE_REQUIRED == {("sent", "confirm_ts"), ("received", "ack_ts"), ("canary", "seen_ts"),
                                    ("canary", "latency_seconds"), ("phase", "end_ts")}


def test_the_drift_check_reports_a_field_added_removed_or_retyped():
    changed = copy.deepcopy(SCHEMA)
    changed["$defs"]["sent"]["properties"]["priority"] = {"type": "integer"}
    assert drift(changed, sc.RECORD) == ["priority: in the JSON Schema, not in the Spark schema"]
    del changed["$defs"]["incident"]["properties"]["last_known"]
    changed["$defs"]["ledger_end"]["properties"]["records"] = {"type": "number"}
    changed["$defs"]["received"]["properties"]["seq"] = {"type": ["number", "null"]}
    changed["$defs"]["sent"]["properties"]["seq"] = {"type": "number"}
    assert sorted(drift(changed, sc.RECORD)) == [
        "last_known: in the Spark schema, not in the JSON Schema",
        "priority: in the JSON Schema, not in the Spark schema",
        "records: bigint in the Spark schema, double in the JSON Schema",
        "seq: bigint in the Spark schema, double in the JSON Schema"]
    # derived, the Spark record follows the changed schema
    assert drift(changed, sc.record_schema(layout.derive(changed))) == []


@pytest.mark.parametrize("change, needle", [
    (lambda s: s["$defs"]["canary"]["properties"].update(site={"type": "integer"}), "'site' is string in sent"),
    (lambda s: s["$defs"]["run"]["properties"].update(weight={"type": ["integer", "string"]}), "run.weight"),
    (lambda s: s["$defs"]["run"]["properties"].update(blob={"$ref": "other.json#/x"}), r"local \$defs"),
])
def test_a_schema_the_flat_record_cannot_hold_fails_loudly(change, needle):
    changed = copy.deepcopy(SCHEMA)
    change(changed)
    with pytest.raises(layout.LayoutError, match=needle):
        layout.derive(changed)


def _wrong_value(ftype: layout.FieldType):
    return {"long": 1.5, "double": "x", "boolean": 1, "string_map": {"a": 1}, "string_list": [1], "struct": [1]}.get(
        ftype.name)


def test_the_explanation_covers_every_typed_field():
    """validate.explain names any field of a non-string type given a value Spark cannot parse into it."""
    typed = [(n, t) for n, t in layout.LAYOUT.fields if t.name not in ("string", "json")]
    assert {t.name for _n, t in typed} == {"long", "double", "boolean", "string_map", "string_list", "struct"}
    for name, ftype in typed:
        assert validate.explain(json.dumps({name: _wrong_value(ftype)})).startswith(f"{name} must be"), name
    targets = dict(layout.LAYOUT.fields)["targets"]
    for sub, stype in targets.fields:
        assert validate.explain(json.dumps({"targets": {sub: _wrong_value(stype)}})).startswith(f"targets.{sub}")


def test_the_generator_parquet_types_are_the_readers():
    for name, ftype in layout.LAYOUT.fields:
        assert reader._arrow_compatible(generate.arrow_type(ftype), sc.FIELD_TYPES[name]), name


def test_the_spark_submit_zip_carries_the_schema(tmp_path):
    """On a cluster the pipeline comes from the --py-files zip only: the schema must be in it."""
    zip_path = package.build_zip(str(tmp_path / "p.zip"))
    code = ("import continuity_pipeline.schemas as sc; from ansible_collections.continuity.artemis.plugins."
            "module_utils import evidence; assert '.zip' in evidence.__file__ and '.zip' in sc.__file__; "
            "print(sc.RECORD.json())")
    # -S: no .pth files, so neither the collection nor pipeline/ is importable except from the zip
    env = {"PYTHONPATH": f"{zip_path}:{sysconfig.get_paths()['purelib']}"}
    out = subprocess.run([sys.executable, "-S", "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert T.StructType.fromJson(json.loads(out.stdout)) == sc.RECORD
