"""The flat evidence record, derived from the JSON Schema (schemas/evidence-v1.schema.json) when imported.

The pipeline parses every line with ONE flat record: the union of the fields of all kinds, in the schema's order
(common fields, then each kind's). Pure (no Spark, no Arrow): ``schemas`` maps it to Spark types, ``validate``
explains type errors with it and ``generate`` types its Parquet evidence with it, so a field added to, removed
from or retyped in the JSON Schema reaches all three without an edit. A schema this module cannot map (a new JSON
type, one field name with two types in two kinds) raises :class:`LayoutError` at import: drift fails loudly.

JSON Schema type -> flat type: string/enum/const ``string``; integer ``long``; number ``double``; boolean
``boolean``; object with ``properties`` ``struct``; object of strings (``additionalProperties`` a string schema)
``string_map``; array of strings ``string_list``; any other object or array ``json`` (kept as its JSON text, so
a writer adding keys inside it never breaks parsing). ``null`` in a type list only makes the field nullable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ansible_collections.continuity.artemis.plugins.module_utils import evidence as ev


class LayoutError(ValueError):
    """The JSON Schema has a construct the flat record cannot represent."""


@dataclass(frozen=True)
class FieldType:
    """``name`` is one of ``SCALARS`` or ``struct`` (then ``fields`` holds its members)."""

    name: str
    fields: tuple[tuple[str, FieldType], ...] = ()


SCALARS = ("string", "long", "double", "boolean", "json", "string_map", "string_list")
_JSON_SCALARS = {"string": "string", "integer": "long", "number": "double", "boolean": "boolean"}


@dataclass(frozen=True)
class Layout:
    schema_id: str
    kinds: tuple[str, ...]
    fields: tuple[tuple[str, FieldType], ...]  # the flat record: every field of every kind, once
    kind_fields: dict[str, tuple[str, ...]]  # each kind's own fields (common ones excluded), in schema order
    required: dict[str, tuple[str, ...]]
    enums: dict[tuple[str, str], tuple[str, ...]]  # (kind, field) -> allowed values
    nullable_required: frozenset[tuple[str, str]]  # required, but null allowed: "missing" = "null" after parsing

    @property
    def types(self) -> dict[str, FieldType]:
        return dict(self.fields)


def _resolve(schema: dict, prop: dict) -> dict:
    ref = prop.get("$ref")
    if ref is None:
        return prop
    if not ref.startswith("#/$defs/"):
        raise LayoutError(f"only local $defs references are supported, not {ref!r}")
    return _resolve(schema, schema["$defs"][ref[len("#/$defs/"):]])


def _json_types(prop: dict) -> list[str]:
    types = prop.get("type")
    if types is None:
        values = prop["enum"] if "enum" in prop else [prop["const"]] if "const" in prop else None
        if values is None:
            raise LayoutError(f"no type, enum or const in {prop}")
        if not all(isinstance(v, str) or v is None for v in values):
            raise LayoutError(f"only string enums are supported: {values}")
        types = ["string"] + (["null"] if None in values else [])
    return [types] if isinstance(types, str) else list(types)


def allows_null(schema: dict, prop: dict) -> bool:
    prop = _resolve(schema, prop)
    return "null" in _json_types(prop) or ("enum" in prop and None in prop["enum"])


def field_type(schema: dict, prop: dict, where: str = "") -> FieldType:
    """The flat type of one JSON Schema property (see the module docstring)."""
    prop = _resolve(schema, prop)
    types = [t for t in _json_types(prop) if t != "null"]
    if len(types) != 1:
        raise LayoutError(f"{where}: one JSON type (besides null) is needed, not {types}")
    jtype = types[0]
    if jtype in _JSON_SCALARS:
        return FieldType(_JSON_SCALARS[jtype])
    if jtype == "object":
        if "properties" in prop:
            return FieldType("struct", tuple((name, field_type(schema, sub, f"{where}.{name}"))
                                             for name, sub in prop["properties"].items()))
        values = prop.get("additionalProperties")
        if isinstance(values, dict) and field_type(schema, values, where) == FieldType("string"):
            return FieldType("string_map")
        return FieldType("json")
    if jtype == "array":
        items = prop.get("items")
        if isinstance(items, dict) and field_type(schema, items, where) == FieldType("string"):
            return FieldType("string_list")
        return FieldType("json")
    raise LayoutError(f"{where}: JSON type {jtype!r} has no flat type")


def derive(schema: dict) -> Layout:
    """The flat layout of an evidence JSON Schema (any version shaped like v1: one ``$defs`` entry per kind,
    selected by the ``kind`` enum)."""
    kinds = tuple(schema["properties"]["kind"]["enum"])
    fields: dict[str, FieldType] = {}
    owner: dict[str, str] = {}

    def add(kind: str, name: str, ftype: FieldType) -> None:
        if name in fields and fields[name] != ftype:
            raise LayoutError(f"field {name!r} is {fields[name].name} in {owner[name]} but {ftype.name} in {kind}:"
                              " a field name must have one type in every kind (the record is flat)")
        fields.setdefault(name, ftype)
        owner.setdefault(name, kind)

    for name, prop in schema["properties"].items():
        add("every record", name, field_type(schema, prop, name))
    kind_fields, required, enums, nullable_required = {}, {}, {}, set()
    for kind in kinds:
        spec = schema["$defs"][kind]
        props = spec.get("properties", {})
        kind_fields[kind] = tuple(props)
        required[kind] = tuple(spec.get("required", ()))
        for name, prop in props.items():
            add(kind, name, field_type(schema, prop, f"{kind}.{name}"))
            resolved = _resolve(schema, prop)
            if "enum" in resolved:
                enums[(kind, name)] = tuple(resolved["enum"])
        nullable_required |= {(kind, f) for f in required[kind] if f in props and allows_null(schema, props[f])}
    return Layout(schema_id=schema["properties"]["schema"]["const"], kinds=kinds, fields=tuple(fields.items()),
                  kind_fields=kind_fields, required=required, enums=enums,
                  nullable_required=frozenset(nullable_required))


def load(path: str | None = None) -> Layout:
    """The layout of the schema file evidence.py finds (``$CONTINUITY_EVIDENCE_SCHEMA``, the collection's
    ``schemas/``, or the same place inside the ``--py-files`` zip)."""
    schema: dict[str, Any] = ev.load_schema(path)
    return derive(schema)


LAYOUT: Layout = load()
