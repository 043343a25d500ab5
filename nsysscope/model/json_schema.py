"""JSON Schemas made from the result types themselves: each field's JSON type from its type
hint, the fields without a default required, nested records as ``$defs``, keys a newer minor
version adds allowed. ``docs/gate.schema.json`` and ``docs/batch.schema.json`` are these
(tests check that the files are what this module makes)."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from .batch import BATCH_SCHEMA, Aggregate, TraceResult
from .gate import GATE_SCHEMA, GateResult
from .summary import Summary

_DRAFT = "https://json-schema.org/draft/2020-12/schema"
_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean",
            type(None): "null"}


def _fields(cls: type) -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(cls) if f.name != "extra"]


def _required(cls: type) -> set[str]:
    """The keys every record of ``cls`` has: its sentences, its fields without a default."""
    return {*_said(cls), *(f.name for f in _fields(cls) if f.default is dataclasses.MISSING
                           and f.default_factory is dataclasses.MISSING)}


def _said(cls: type) -> dict[str, Any]:
    """The sentences ``cls`` writes (:attr:`~.schema.Record.said`), each with its type: what
    its property returns."""
    said: dict[str, str] = getattr(cls, "said", {})
    return {key: typing.get_type_hints(getattr(cls, key).fget)["return"] for key in said}


def _of(hint: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """The schema of one field's type hint; a record goes to ``defs`` once, by name."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        parts = [_of(a, defs) for a in typing.get_args(hint)]
        kinds = [p["type"] for p in parts if set(p) == {"type"}]
        return {"type": kinds} if len(kinds) == len(parts) else {"anyOf": parts}
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if origin in (list, tuple):
        args = [a for a in typing.get_args(hint) if a is not Ellipsis]
        if len(args) == 1:
            return {"type": "array", "items": _of(args[0], defs)}
        return {"type": "array", "prefixItems": [_of(a, defs) for a in args]}
    if origin is dict:
        item = typing.get_args(hint)[1] if typing.get_args(hint) else Any
        return {"type": "object"} if item is Any else \
            {"type": "object", "additionalProperties": _of(item, defs)}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        name = hint.__name__
        if name not in defs:
            defs[name] = {}  # (a record that holds itself)
            defs[name] = record_schema(hint, defs)
        return {"$ref": f"#/$defs/{name}"}
    return {}  # Any


def record_schema(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    """The schema of the record ``cls``: an object of its fields (``extra`` keys allowed)."""
    hints = typing.get_type_hints(cls)
    before = {field: key for key, field in getattr(cls, "said", {}).items()}
    said = _said(cls)
    properties = {}
    for f in _fields(cls):  # as :func:`~.schema.to_plain` writes them
        if f.name in before:
            properties[before[f.name]] = _of(said[before[f.name]], defs)
        properties[f.name] = _of(hints[f.name], defs)
    doc = (cls.__doc__ or "").strip().split("\n\n")[0]
    return {"type": "object", "description": " ".join(doc.split()),
            "required": [k for k in properties if k in _required(cls)],
            "properties": properties}


def _document(cls: type, schema_id: str, title: str) -> dict[str, Any]:
    defs: dict[str, Any] = {}
    top = record_schema(cls, defs)
    kind, version = schema_id.split("/")
    top["properties"]["schema"] = {
        "type": "string", "pattern": f"^{kind.replace('.', '[.]')}/{version.split('.')[0]}"
        r"([.]\d+)?$", "description": f"this version: {schema_id}"}
    top["required"] = ["schema", *top["required"]]
    return {"$schema": _DRAFT, "title": title, **top, "$defs": dict(sorted(defs.items()))}


def gate_schema() -> dict[str, Any]:
    """The gate result's JSON (``nsysscope gate --format json``), with the exit code it
    writes beside its fields."""
    doc = _document(GateResult, GATE_SCHEMA, "nsysscope gate result")
    doc["properties"]["exit_code"] = {"enum": [0, 1], "description": "0 passed, 1 failed"}
    doc["required"].append("exit_code")
    return doc


def batch_schema() -> dict[str, Any]:
    """The many-trace result's JSON (``nsysscope report DIR --format json``): each trace's
    :meth:`TraceResult.to_dict` (its summary without the per-launch distributions), and the
    :class:`Aggregate`."""
    defs: dict[str, Any] = {}
    summary = {"$ref": "#/$defs/Summary"}
    _of(Summary, defs)
    aggregate = record_schema(Aggregate, defs)
    aggregate["properties"]["worst"] = {"type": ["object", "null"], "properties": {
        "path": {"type": "string"}, "rank": {"type": ["integer", "null"]},
        "stall_share": {"type": "number"}, "lost_us": {"type": "number"}}}
    trace = {"type": "object", "description": " ".join(
        (TraceResult.__doc__ or "").split()), "required": ["path", "rank", "seconds"],
        "properties": {"path": {"type": "string"}, "rank": {"type": ["integer", "null"]},
                       "seconds": {"type": ["number", "null"]},
                       "stall_share": {"type": "number"}, "lost_us": {"type": "number"},
                       "summary": summary, "error": {"type": ["string", "null"]},
                       "exit_code": {"type": "integer"}}}
    kind, version = BATCH_SCHEMA.split("/")
    return {"$schema": _DRAFT, "title": "nsysscope many-trace result", "type": "object",
            "required": ["schema", "traces", "aggregate"],
            "properties": {
                "schema": {"type": "string", "pattern": f"^{kind.replace('.', '[.]')}/"
                           f"{version.split('.')[0]}" r"([.]\d+)?$",
                           "description": f"this version: {BATCH_SCHEMA}"},
                "traces": {"type": "array", "items": trace},
                "aggregate": aggregate},
            "$defs": dict(sorted(defs.items()))}
