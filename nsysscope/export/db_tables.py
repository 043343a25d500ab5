"""An analysis as the tables of the per-launch database (:mod:`.db`): ``{name: (columns,
rows)}``, every row carrying the trace's label and its id (:func:`trace_id`)."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import typing
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from ..analysis import Analysis
from ..model import StallSite
from ..model.schema import to_plain
from ..util.text import displayable
from ..util.version import __version__
from .per_launch import kinds_named, os_ids, per_launch_parts

#: rows handed to the writer at a time
BATCH = 2000


def trace_id(path: str, span: Any) -> str:
    """What the database knows a trace by, in every table: 16 hex digits of a hash of its
    absolute path and the time range read (``TraceInfo.time_range_ns``). The same file, by
    any name, and range is the same trace; the path itself is not stored (it names the
    user's folders)."""
    key = os.fsencode(os.path.abspath(path)) + b"|" + (time_range(span) or "").encode()
    return hashlib.blake2b(key, digest_size=8).hexdigest()


def time_range(span: Any) -> str | None:
    """A time range read (``TraceInfo.time_range_ns``) as the database keeps it: JSON, or
    None for the whole trace."""
    return json.dumps(list(span)) if span else None



Table = tuple[dict[str, type], Iterator[dict[str, Any]]]


def trace_tables(a: Analysis, label: str, rank: int | None) -> Iterator[tuple[str, Table]]:
    """The tables of ``a`` as trace ``label`` (the name it was given), each row with the
    trace's :func:`trace_id` after its label."""
    s = a.summary
    t = s.trace
    key = {"trace": label, "trace_id": trace_id(t.path, t.time_range_ns)}
    yield "launches", _frames(per_launch_parts(a), key)
    yield "blocks", _frames((kinds_named(_with_pids(b))
                             for b in a.block_table.chunks(a.block_table.columns)), key)
    yield "sites", _records([{**key, "rank": i + 1,
                              **{k: _plain(v) for k, v in to_plain(site).items()}}
                             for i, site in enumerate(s.sites)], _SITE_TYPES)
    yield "summary", _records([{**key, **_summary_row(a, rank)}], _KEY_TYPES | {"rank": int})
    yield "processes", _frames(iter([a.processes]), key)
    yield "meta", _records([{
        **key, "path": displayable(t.path), "time_range": time_range(t.time_range_ns),
        "rank": rank, "nsys_version": t.nsys_version, "schema_version": t.schema_version,
        "gpus": json.dumps(list(t.gpus)), "graph_trace": t.graph_trace,
        "nsysscope_version": __version__, "config": json.dumps(a.config.to_dict()),
        "launches": s.launches}],
        _KEY_TYPES | {"path": str, "time_range": str, "rank": int, "nsys_version": str,
                      "schema_version": str, "gpus": str, "graph_trace": str,
                      "nsysscope_version": str, "config": str, "launches": int})


#: the columns every table starts with
_KEY_TYPES: dict[str, type] = {"trace": str, "trace_id": str}


def _summary_row(a: Analysis, rank: int | None) -> dict[str, Any]:
    d = a.summary.to_dict(with_distributions=False)
    row: dict[str, Any] = {"rank": rank}
    for k, v in d.items():
        if k in ("trace", "distributions", "sites"):
            continue
        row[k] = json.dumps(v) if isinstance(v, (dict, list, tuple)) else v
    row["sites"] = len(a.summary.sites)
    return row


def _with_pids(df: pd.DataFrame) -> pd.DataFrame:
    if "tid" in df.columns and "pid" not in df.columns:
        pid, os_tid = os_ids(df["tid"])
        df = df.assign(pid=pid, os_tid=os_tid)
    return df


def _frames(parts: Iterator[pd.DataFrame], key: dict[str, str]) -> Table:
    """The ``parts`` of a table (a long trace's time windows, read one at a time; their
    ``_``-prefixed helper columns left out) as typed columns and rows, the columns typed by
    the first part, ``key`` (the trace's label and id) first."""
    first = next(parts, None)
    if first is None:
        return dict(_KEY_TYPES), iter([])
    first = first[[c for c in first.columns if not str(c).startswith("_")]]
    columns: dict[str, type] = dict(_KEY_TYPES)
    columns.update({str(c): _sql_type(first[c]) for c in first.columns})

    def rows() -> Iterator[dict[str, Any]]:
        for df in itertools.chain([first], parts):
            df = df[list(first.columns)]
            for start in range(0, len(df), BATCH):
                chunk = df.iloc[start:start + BATCH]
                plain = chunk.astype(object).where(chunk.notna(), None)
                for rec in plain.to_dict("records"):
                    yield {**key, **{str(k): _plain(v) for k, v in rec.items()}}

    return columns, rows()


def _records(rows: list[dict[str, Any]], types: dict[str, type] | None = None) -> Table:
    """Rows of plain values; ``types`` fixes the types (and the columns of an empty table)."""
    columns: dict[str, type] = dict(types or {})
    for r in rows:
        for k, v in r.items():
            if k not in columns and v is not None:
                columns[k] = _value_type(v)
    return columns, iter(rows)


def _site_types() -> dict[str, type]:
    """The sites table's columns, from :class:`StallSite`'s fields (a nested one as JSON
    text), so that a trace without stalls, or whose sites leave a value out, still makes
    each column with its type (a first site without a projected gain made
    ``speedup_if_fixed`` a TEXT column, and later traces' numbers text)."""
    hints = typing.get_type_hints(StallSite)
    types: dict[str, type] = {**_KEY_TYPES, "rank": int}
    for f in dataclasses.fields(StallSite):
        if f.name == "extra":
            continue
        kind = next((t for t in typing.get_args(hints[f.name]) if t is not type(None)),
                    hints[f.name])
        types[f.name] = kind if kind in (int, float, str) else str
    return types


_SITE_TYPES = _site_types()


def _value_type(v: Any) -> type:
    if isinstance(v, bool | int):
        return int
    if isinstance(v, float):
        return float
    return str


def _sql_type(s: pd.Series) -> type:
    if pd.api.types.is_bool_dtype(s.dtype) or pd.api.types.is_integer_dtype(s.dtype):
        return int
    if pd.api.types.is_float_dtype(s.dtype):
        return float
    kind = pd.api.types.infer_dtype(s, skipna=True)
    if kind in ("integer", "boolean"):
        return int
    if kind in ("floating", "mixed-integer-float", "decimal"):
        return float
    return str


def _plain(v: Any) -> Any:
    """A cell as SQLite stores it: numpy scalars to Python, containers to JSON."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, default=str)
    return v
