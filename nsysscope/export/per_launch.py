"""The per-launch table as ``--per-launch FILE.csv|FILE.parquet`` writes it.

The analysis table (:attr:`nsysscope.Analysis.launches`) made readable for a file: internal
columns (``_*``) dropped, the process id and the operating system's thread id beside nsys's
global thread id, and copy and memory kinds as names instead of nsys's enum codes. Every column
is described in ``docs/per-launch.md`` (the tests check that the two agree).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..trace.apis import COPY_KINDS, MEMORY_KINDS

#: columns that hold whole numbers besides the ``*_ns`` times
_WHOLE = ("cause_bytes", "cause_tid", "src_line")


def os_ids(global_tid: Any) -> tuple[np.ndarray, np.ndarray]:
    """(pid, OS tid) of nsys global thread ids: ``globalTid = vm << 56 | pid << 24 | tid``."""
    g = pd.to_numeric(pd.Series(global_tid), errors="coerce").fillna(-1).to_numpy(np.int64)
    ok = g >= 0
    return (np.where(ok, (g >> 24) & 0xFFFFFF, -1), np.where(ok, g & 0xFFFFFF, -1))


def _names(values: pd.Series, names: dict[int, str]) -> pd.Series:
    """nsys enum codes as names (``kind N`` for a code nsys added since), blank for none."""
    codes = pd.to_numeric(values, errors="coerce")
    known = codes[codes >= 0].astype(np.int64)
    named = known.map(names)
    named = named.where(named.notna(), "kind " + known.astype(str))
    return named.reindex(values.index, fill_value="").astype(object)


def kinds_named(df: pd.DataFrame, prefix: str = "") -> pd.DataFrame:
    """``df`` with its ``{prefix}copy_kind``, ``src_kind`` and ``dst_kind`` columns as names
    (``HtoD``, ``pageable``) instead of nsys's enum codes; blank where there is no copy."""
    names = {f"{prefix}copy_kind": COPY_KINDS, f"{prefix}src_kind": MEMORY_KINDS,
             f"{prefix}dst_kind": MEMORY_KINDS}
    return df.assign(**{c: _names(df[c], kinds) for c, kinds in names.items() if c in df})


def per_launch_table(result: Any) -> pd.DataFrame:
    """The per-launch table of an Analysis (or an OpenTrace), as ``--per-launch`` writes it."""
    analysis = getattr(result, "analysis", result)
    df = analysis.launches
    out = df.drop(columns=[c for c in df.columns if c.startswith("_")]).copy()
    if "tid" in out.columns:
        pid, tid = os_ids(out["tid"])
        at = out.columns.get_loc("tid") + 1
        out.insert(at, "pid", pid)
        out.insert(at + 1, "os_tid", tid)
    if "step" in out.columns:  # numbers, or none: an integer column however the trace starts
        out["step"] = pd.to_numeric(out["step"], errors="coerce").astype("Int64")
    # times, byte counts and thread ids that some launch lacks are floats in the analysis
    # (NaN): whole numbers here, blank where missing (a CSV said 131666051.0, and a cause_tid
    # written so matched no tid)
    for col in [c for c in out.columns if c.endswith("_ns") or c in _WHOLE]:
        if out[col].dtype.kind == "f":
            out[col] = out[col].astype("Int64")
    out = kinds_named(out, "cause_")
    return out
