"""Which NVTX ranges enclose a moment on a thread: the loop phase, the step, the aten op.

NVTX push/pop ranges nest, so on one thread the ranges at one nesting depth never overlap.
Each depth is searched with one ``searchsorted``; the stack of names at a moment, outermost
first, is the range path.

The path is read three ways: ``step`` is the number of a range named like ``step 12``;
``op`` is the innermost ``aten::`` range (from ``nsys --pytorch=autograd-nvtx``, whose
``, seq = ..`` suffix is dropped); ``phase`` is the innermost range that is neither.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd

#: a range naming a decode step: ``step 12``, ``iter 3``, ``decode step 7``
STEP_PATTERN = re.compile(r"^\s*(?:step|iter(?:ation)?|decode step)[\s_#:=-]*(\d+)\s*$", re.I)


def nesting_depth(nvtx: pd.DataFrame) -> np.ndarray:
    """Depth of each range among the ranges of its thread (0 = outermost)."""
    depth = np.zeros(len(nvtx), dtype=np.int64)
    for _, idx in nvtx.groupby("tid").indices.items():
        starts = nvtx["start_ns"].to_numpy()[idx]
        ends = nvtx["end_ns"].to_numpy()[idx]
        order = np.lexsort((-ends, starts))  # outer ranges first when starts tie
        s, e = starts[order], ends[order]
        # ranges open at s[k]: started at or before it and not yet ended, minus itself
        ends_sorted = np.sort(e)
        started = np.arange(1, len(s) + 1)
        ended = np.searchsorted(ends_sorted, s, side="right")
        depth[idx[order]] = started - ended - 1
    return np.maximum(depth, 0)


def enclosing(nvtx: pd.DataFrame, tids: np.ndarray, times: np.ndarray) -> pd.DataFrame:
    """For each (thread, time): ``nvtx_path`` (outer > inner), ``phase``, ``step``, ``op``."""
    n = len(times)
    levels: list[np.ndarray] = []
    if len(nvtx) and n:
        depth = nesting_depth(nvtx)
        for d in range(int(depth.max()) + 1):
            level = np.full(n, None, dtype=object)
            at = nvtx[depth == d]
            for tid, idx in at.groupby("tid").indices.items():
                q = np.flatnonzero(tids == tid)
                if not len(q):
                    continue
                starts = at["start_ns"].to_numpy()[idx]
                order = np.argsort(starts, kind="stable")
                starts, ends = starts[order], at["end_ns"].to_numpy()[idx][order]
                texts = at["text"].to_numpy()[idx][order]
                i = np.searchsorted(starts, times[q], side="right") - 1
                ok = (i >= 0) & (ends[np.maximum(i, 0)] > times[q])
                level[q[ok]] = texts[i[ok]]
            levels.append(level)
    names = pd.DataFrame({f"d{k}": lv for k, lv in enumerate(levels)}) if levels else \
        pd.DataFrame(index=range(n))
    clean = names.apply(lambda col: col.str.split(", seq = ").str[0].str.split(", op_id").str[0])
    path = pd.Series([""] * n, dtype=object)
    for col in clean.columns:
        s = clean[col]
        path = path.where(s.isna(), (path + " > ").where(path != "", "") + s.fillna(""))
    return pd.DataFrame({
        "nvtx_path": path.to_numpy() if n else np.array([], dtype=object),
        "step": _innermost(clean, _is_step, extract_step=True),
        "op": _innermost(clean, lambda s: s.str.startswith("aten::")),
        "phase": _innermost(clean, lambda s: ~s.str.startswith("aten::") & ~_is_step(s)
                            & ~s.str.match(r"^\w+, op_id")),
    })


def _is_step(s: pd.Series) -> pd.Series:
    return s.str.match(STEP_PATTERN).fillna(False).astype(bool)


def _innermost(levels: pd.DataFrame, pick: Callable[[pd.Series], pd.Series],
               extract_step: bool = False) -> np.ndarray:
    """The innermost level whose name ``pick`` accepts, per row (None when none)."""
    out = pd.Series([None] * len(levels), dtype=object)
    for col in levels.columns:  # outer to inner: later levels overwrite
        s = levels[col]
        ok = s.notna() & pick(s.fillna("")).fillna(False).astype(bool)
        vals = s.str.extract(STEP_PATTERN)[0].astype("float").astype("Int64") if extract_step else s
        out = out.where(~ok, vals)
    return np.asarray(out.to_numpy())
