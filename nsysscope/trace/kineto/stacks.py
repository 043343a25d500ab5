"""Python stacks from ``python_function`` ranges: one pseudo-sample per CUDA call."""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterator

import numpy as np
import pandas as pd

from ..names import names_of
from ..python_samples import NO_STACKS, OK, PythonSamples
from .events import Collector, to_ns

_PY_NAME = re.compile(r"^(.*)\((\d+)\): (.*)$", re.S)


def python_stacks(c: Collector, api: pd.DataFrame, origin: float) -> PythonSamples:
    """One pseudo-sample per CUDA call of ``api``: the stack of ``python_function`` ranges
    around it, innermost first (see the module docstring)."""
    py = c.py
    if not len(py):
        return PythonSamples.none(NO_STACKS)
    mine = np.isin(py["gtid"], api["tid"].unique())  # threads that made the calls
    start, end = to_ns(py["ts"][mine], py["dur"][mine], origin)
    code, gtid = py["name"][mine], py["gtid"][mine]
    parsed = [_py_frame(str(n)) for n in c.py_names]
    builtin = np.array([p is None for p in parsed], dtype=bool)
    t = api["start_ns"].to_numpy() + (api["end_ns"].to_numpy() - api["start_ns"].to_numpy()) // 2
    tids = api["tid"].to_numpy()
    s_sample, s_tid, s_time = [], [], []
    f_sample, f_depth, f_code = [], [], []
    for sid, stack in enumerate(enclosing_stacks(start, end, gtid, t, tids)):
        s_sample.append(sid)
        s_tid.append(int(tids[sid]))
        s_time.append(int(t[sid]))
        depth = 0
        for j in stack:
            if not builtin[code[j]]:
                f_sample.append(sid)
                f_depth.append(depth)
                f_code.append(code[j])
                depth += 1
    samples = pd.DataFrame({"sample": np.asarray(s_sample, dtype=np.int64),
                            "tid": np.asarray(s_tid, dtype=np.int64),
                            "time_ns": np.asarray(s_time, dtype=np.int64),
                            "state": pd.Series([None] * len(s_sample), dtype=object)})
    samples = samples.sort_values(["tid", "time_ns"], kind="stable").reset_index(drop=True)
    fc = np.asarray(f_code, dtype=np.int64)
    files = names_of(p[0] if p else "" for p in parsed)
    lines = np.array([p[1] if p else -1 for p in parsed], dtype=np.int64)
    funcs = names_of(p[2] if p else "" for p in parsed)
    frames = pd.DataFrame({
        "sample": np.asarray(f_sample, dtype=np.int64),
        "depth": np.asarray(f_depth, dtype=np.int64),
        "file": pd.Categorical(np.asarray(files, dtype=object)[fc] if len(fc) else []),
        "line": lines[fc] if len(fc) else np.zeros(0, dtype=np.int64),
        "function": pd.Categorical(np.asarray(funcs, dtype=object)[fc] if len(fc) else [])})
    return PythonSamples(OK, samples, frames, marks=len(samples))


def enclosing_stacks(start: np.ndarray, end: np.ndarray, gtid: np.ndarray, times: np.ndarray,
                     tids: np.ndarray) -> Iterator[list[int]]:
    """For each (thread ``tids[k]``, time ``times[k]``): the indices of the ranges
    (``start``, ``end``, ``gtid``: python_function ranges in any order) that enclose it on
    that thread, innermost first (empty where none does)."""
    order = np.lexsort((-end, start, gtid))  # per thread, by start; enclosing range first
    start, end, gtid = start[order], end[order], gtid[order]
    parent = _parents(start, end, gtid)
    for tid, when in zip(tids.tolist(), times.tolist(), strict=True):
        lo = int(np.searchsorted(gtid, tid, side="left"))
        hi = int(np.searchsorted(gtid, tid, side="right"))
        stack: list[int] = []
        if lo < hi:
            j = lo + int(np.searchsorted(start[lo:hi], when, side="right")) - 1
            while j >= lo and end[j] < when:
                j = int(parent[j])
            while j >= 0:
                stack.append(int(order[j]))
                j = int(parent[j])
        yield stack


def _py_frame(name: str) -> tuple[str, int, str] | None:
    """``file.py(12): f`` -> (file, 12, f); None for C functions (``<built-in ...>``)."""
    if name.startswith("<built-in"):
        return None
    m = _PY_NAME.match(name)
    if not m:
        return (name, -1, name)
    return m.group(1), int(m.group(2)), m.group(3)


def _parents(start: np.ndarray, end: np.ndarray, gtid: np.ndarray) -> np.ndarray:
    """The index of each range's innermost enclosing range on its thread (-1: none), for
    ranges sorted by thread, start, and longest first. Ranges that overlap without nesting
    (clock jitter at their edges) are treated as siblings. One pass with a stack; the columns
    are read as typed arrays (a list of Python ints would take ~100 bytes an event)."""
    n = len(start)
    parent = array("q", bytes(8 * n))
    s, e, g = (array("q", np.ascontiguousarray(x, dtype=np.int64).tobytes())
               for x in (start, end, gtid))
    stack: list[int] = []
    prev_tid = None
    for i in range(n):
        if g[i] != prev_tid:
            stack.clear()
            prev_tid = g[i]
        ei = e[i]
        while stack and e[stack[-1]] < ei:
            stack.pop()
        parent[i] = stack[-1] if stack else -1
        stack.append(i)
    return np.frombuffer(parent, dtype=np.int64) if n else np.zeros(0, dtype=np.int64)
