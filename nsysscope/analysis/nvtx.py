"""Which NVTX ranges enclose a moment on a thread: the loop phase, the step, the aten op.

NVTX push/pop ranges nest, so on one thread the ranges at one nesting depth never overlap
(start/end ranges, which need not nest, are given depths where they do not either). Each
depth is searched with one ``searchsorted``; the stack of names at a moment, outermost
first, is the range path.

The path is read three ways: ``step`` is the number of a range named like ``step 12``, or of
any family of numbered ranges that opens each number about once per thread
(``worker iter 60``, ``ProfilerStep#12``: :func:`step_of_names`);
``op`` is the innermost ``aten::`` range (from ``nsys --pytorch=autograd-nvtx``, whose
``, seq = ..`` suffix is dropped); ``phase`` is the innermost range that is neither.

A trace repeats a few names (``schedule``, ``aten::mm``) over hundreds of thousands of
ranges, so :class:`NvtxIndex` cleans and classifies each distinct name once, and sorts the
ranges per thread and depth once; an analysis then asks it where many moments are.
"""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

#: a range naming a decode step: ``step 12``, ``iter 3``, ``decode step 7``
STEP_PATTERN = re.compile(r"^\s*(?:step|iter(?:ation)?|decode step)[\s_#:=-]*(\d+)\s*$", re.I)
#: a range name ending in a number, and what comes before it: ``worker iter 60``,
#: ``ProfilerStep#12``, ``decode_step_7``
NUMBERED = re.compile(r"^(?P<prefix>.*?\D)[\s_#:=.-]*(?P<n>\d+)\s*$")
#: a family of numbered names (one prefix) names steps when a thread opens at least this many
#: of its numbers (the samples' step ranges: 40 to 5000 per thread)...
MIN_STEP_NUMBERS = 3
#: ...and, over its threads, each number at most this many times on average: a step's range
#: opens once per step (1.0 on every sample, nsys and torch.profiler, one rank or two), while
#: a per-layer range (``layer 3``) opens once per step, as many times as there are steps
MAX_OPENINGS = 1.5


def nesting_depth(nvtx: pd.DataFrame) -> np.ndarray:
    """Depth of each range among the ranges of its thread (0 = outermost), such that ranges
    at one depth of a thread never overlap (:func:`_depths`)."""
    return _depths(nvtx)[0]


def _depths(nvtx: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Each range's depth, and the ranges' order by thread, depth and start.

    Push/pop ranges nest: a range's depth is the number of ranges open when it starts. Ranges
    of ``nvtxRangeStart/End`` need not nest: the ones that overlap an earlier range at that
    depth get lanes of their own below the thread's push/pop depths (:func:`_relaned`)."""
    depth = _pushed_depth(nvtx)
    order = _by_depth(nvtx, depth)
    moved = _not_nesting(nvtx, depth, order)
    if not moved.any():
        return depth, order
    depth = _relaned(nvtx, depth, moved)
    return depth, _by_depth(nvtx, depth)


def _pushed_depth(nvtx: pd.DataFrame) -> np.ndarray:
    """Each range's depth were the ranges push/pop ranges: those open at its start."""
    depth = np.zeros(len(nvtx), dtype=np.int64)
    for _, idx in nvtx.groupby("tid").indices.items():
        starts = nvtx["start_ns"].to_numpy()[idx]
        ends = nvtx["end_ns"].to_numpy()[idx]
        # outer ranges first when starts tie (the table comes sorted by start, so without
        # ties the order is the table's)
        order = np.lexsort((-ends, starts)) if (np.diff(starts) <= 0).any() else \
            np.arange(len(starts))
        s, e = starts[order], ends[order]
        # ranges open at s[k]: started at or before it and not yet ended, minus itself.
        # (Ends come nearly sorted: timsort, numpy's stable sort of integers, runs through
        # them ten times faster than its default quicksort.)
        ends_sorted = np.sort(e, kind="stable")
        started = np.arange(1, len(s) + 1)
        ended = np.searchsorted(ends_sorted, s, side="right")
        # minus itself, unless it ended already: a zero-length range (a mark) at its parent's
        # start is inside the parent, not beside it at the parent's depth
        depth[idx[order]] = started - ended - 1 + (e <= s)
    return np.maximum(depth, 0)


def _not_nesting(nvtx: pd.DataFrame, depth: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Per range, whether it overlaps an earlier range of its thread at its depth (none do
    when every range nests, seen by comparing neighbours in ``order``, :func:`_by_depth`)."""
    tid, d = nvtx["tid"].to_numpy()[order], depth[order]
    start, end = nvtx["start_ns"].to_numpy()[order], nvtx["end_ns"].to_numpy()[order]
    same = (tid[1:] == tid[:-1]) & (d[1:] == d[:-1])
    out = np.zeros(len(order), dtype=bool)
    if not (same & (start[1:] < end[:-1])).any():  # an overlap shows in a pair of neighbours
        return out
    group = np.cumsum(np.r_[True, ~same])
    reach = pd.Series(end).groupby(group).cummax().to_numpy()  # the latest end so far
    out[order] = np.r_[False, same & (start[1:] < reach[:-1])]
    return out


def _relaned(nvtx: pd.DataFrame, depth: np.ndarray, moved: np.ndarray) -> np.ndarray:
    """``depth`` with the ``moved`` ranges in lanes below each thread's other ranges: each
    takes the lowest lane free at its start (the fewest lanes; the others keep theirs, and no
    longer overlap at their depth once these are out). One step per moved range: only the
    ranges that do not nest are walked, never the push/pop ones."""
    tid, start = nvtx["tid"].to_numpy(), nvtx["start_ns"].to_numpy()
    end = nvtx["end_ns"].to_numpy()
    kept = pd.Series(np.where(moved, -1, depth)).groupby(tid).max()
    rows = np.flatnonzero(moved)
    rows = rows[np.lexsort((start[rows], tid[rows]))]
    lanes = np.empty(len(rows), dtype=np.int64)
    busy: list[tuple[int, int]] = []  # (end, lane) of the lanes in use: a heap
    free: list[int] = []  # lanes free again: a heap
    thread, used = None, 0
    for k, (t, s, e) in enumerate(zip(tid[rows].tolist(), start[rows].tolist(),
                                      end[rows].tolist(), strict=True)):
        if t != thread:
            thread, busy, free, used = t, [], [], 0
        while busy and busy[0][0] <= s:
            heapq.heappush(free, heapq.heappop(busy)[1])
        lane = heapq.heappop(free) if free else used
        used = max(used, lane + 1)
        heapq.heappush(busy, (e, lane))
        lanes[k] = lane
    out = depth.copy()
    out[rows] = kept.reindex(tid[rows]).to_numpy() + 1 + lanes
    return out


def _by_depth(nvtx: pd.DataFrame, depth: np.ndarray) -> np.ndarray:
    """The ranges' order by thread, depth and start."""
    return np.lexsort((nvtx["start_ns"].to_numpy(), depth, nvtx["tid"].to_numpy()))


def step_of_names(names: np.ndarray, codes: np.ndarray, tids: np.ndarray) -> np.ndarray:
    """The step number of each distinct range name of ``names`` (NaN: not a step), given the
    ranges' name codes (``codes``, -1: none) and threads. A name like ``step 12`` or
    ``iter 3`` (:data:`STEP_PATTERN`) is a step wherever it is; another name ending in a
    number is one where its family (the names with its prefix) opens at least
    :data:`MIN_STEP_NUMBERS` numbers on a thread, each about once (:data:`MAX_OPENINGS`):
    ``worker iter 60`` made one phase per step, and split every stall site by step. Aten ops
    (``op_id`` and ``seq`` numbers are cleaned off first) are never steps."""
    s = pd.Series(names, dtype=object)
    step: np.ndarray = s.str.extract(STEP_PATTERN)[0].astype(float).to_numpy(copy=True)
    found = s.str.extract(NUMBERED)
    numbered = (found["n"].notna() & np.isnan(step) & ~s.str.startswith("aten::")).to_numpy()
    if not numbered.any():
        return step
    ok = codes >= 0
    ok[ok] = numbered[codes[ok]]
    prefix = found["prefix"].str.rstrip(" _#:=.-").str.lower().to_numpy(dtype=object)
    per = pd.DataFrame({"prefix": prefix[codes[ok]], "tid": tids[ok], "code": codes[ok]})
    per = per.groupby(["prefix", "tid"]).agg(n=("code", "size"), d=("code", "nunique"))
    family = per.groupby(level="prefix").agg(n=("n", "sum"), d=("d", "sum"), most=("d", "max"))
    steps = family.index[(family["most"] >= MIN_STEP_NUMBERS) &
                         (family["n"] <= MAX_OPENINGS * family["d"])]
    is_step = numbered & np.isin(prefix, np.asarray(steps, dtype=object))
    step[is_step] = found["n"].to_numpy(dtype=object)[is_step].astype(float)
    return step


#: the columns of :func:`step_ranges`
STEP_COLUMNS = ["tid", "step", "start_ns", "end_ns"]


def step_ranges(nvtx: pd.DataFrame) -> pd.DataFrame:
    """The NVTX ranges of ``nvtx`` (``tid, text, start_ns, end_ns``) that name a step, with
    its number (:func:`step_of_names`): :data:`STEP_COLUMNS`, in the table's order."""
    text = nvtx["text"]
    text = text if isinstance(text.dtype, pd.CategoricalDtype) else text.astype("category")
    # each distinct text cleaned once (per row, the light 10^5 replica's 1.1 M ranges took
    # 7 s on two cores)
    clean, names = pd.factorize(clean_names(pd.Series(text.cat.categories, dtype=object)))
    codes = np.append(clean, -1)[text.cat.codes.to_numpy()]  # no text (-1) keeps no name
    per_name = step_of_names(np.asarray(names, dtype=object), codes, nvtx["tid"].to_numpy())
    num = np.append(per_name, np.nan)[codes]  # code -1 (no text) takes the NaN appended last
    ok = ~np.isnan(num)
    return pd.DataFrame({"tid": nvtx["tid"].to_numpy()[ok],
                         "step": num[ok].astype(np.int64),
                         "start_ns": nvtx["start_ns"].to_numpy()[ok],
                         "end_ns": nvtx["end_ns"].to_numpy()[ok]})


def clean_names(text: pd.Series) -> pd.Series:
    """Range names without the ``, seq = ..`` and ``, op_id ..`` suffixes that
    ``nsys --pytorch=autograd-nvtx`` appends."""
    return text.str.split(", seq = ").str[0].str.split(", op_id").str[0]


class _Ranges(NamedTuple):
    """The ranges of one thread at one depth, by start; ``names``: codes of their names."""

    starts: np.ndarray
    ends: np.ndarray
    names: np.ndarray


@dataclass(frozen=True)
class NvtxIndex:
    """The NVTX ranges of one trace, indexed once for every :meth:`enclosing` question.

    ``names`` are the distinct cleaned range names; per name, ``step`` is its step number
    (NaN: not a step), ``is_op`` whether it is an aten op and ``is_phase`` whether it can be
    a phase. Per range (a row of the NVTX table), ``depth`` is its nesting depth and ``name``
    the code of its name in ``names`` (-1: none).
    """

    depth: np.ndarray
    name: np.ndarray
    names: np.ndarray
    step: np.ndarray
    is_op: np.ndarray
    is_phase: np.ndarray
    #: thread -> depth -> its ranges
    threads: dict[int, dict[int, _Ranges]]

    @classmethod
    def of(cls, nvtx: pd.DataFrame) -> NvtxIndex:
        """The index of an NVTX table (``start_ns, end_ns, tid, text``)."""
        depth, order = _depths(nvtx)
        raw, texts = pd.factorize(nvtx["text"])
        clean, names = pd.factorize(clean_names(pd.Series(texts, dtype=object)))
        name = np.append(clean, -1)[raw]  # a missing text (-1) keeps no name
        names = np.asarray(names, dtype=object)
        step = step_of_names(names, name, nvtx["tid"].to_numpy())
        is_op = pd.Series(names, dtype=object).str.startswith("aten::").to_numpy(dtype=bool)
        is_phase = ~is_op & np.isnan(step)
        return cls(depth, name, names, step, is_op, is_phase,
                   _by_thread(nvtx, depth, name, order))

    @property
    def depths(self) -> int:
        """How many nesting depths there are (0 without ranges)."""
        return int(self.depth.max()) + 1 if len(self.depth) else 0

    def clean_text(self) -> np.ndarray:
        """Per range, its cleaned name (NaN: no text, as pandas' string methods leave it)."""
        return np.take(np.append(self.names, np.array([np.nan], dtype=object)), self.name)

    def enclosing(self, tids: np.ndarray, times: np.ndarray) -> pd.DataFrame:
        """For each (thread, time): ``nvtx_path`` (outer > inner), ``phase``, ``step``,
        ``op``. Objects: a caller takes the columns out as arrays (as text, pandas would
        copy every row's name into a string array and back)."""
        at = self._stacks(np.asarray(tids), np.asarray(times))
        return pd.DataFrame({
            "nvtx_path": self._paths(at),
            "step": self._steps(at),
            "op": self._named[self._innermost(at, self.is_op)],
            "phase": self._named[self._innermost(at, self.is_phase)],
        }, dtype=object)

    @property
    def _named(self) -> np.ndarray:
        """``names`` with None appended last, for code -1 to take."""
        return np.append(self.names, np.array([None]))

    def _stacks(self, tids: np.ndarray, times: np.ndarray) -> np.ndarray:
        """The name codes of the ranges enclosing each (thread, time), outermost first, one
        row per depth (-1: none; after the ranges found)."""
        at = np.full((self.depths, len(times)), -1, dtype=np.int64)
        began = np.full(at.shape, np.inf)
        order = np.argsort(tids, kind="stable")
        by_tid = tids[order]
        for tid, levels in self.threads.items():
            q = order[np.searchsorted(by_tid, tid, side="left"):
                      np.searchsorted(by_tid, tid, side="right")]
            if not len(q):
                continue
            t = times[q]
            for d, r in levels.items():
                i = np.searchsorted(r.starts, t, side="right") - 1
                ok = (i >= 0) & (r.ends[np.maximum(i, 0)] > t)
                at[d, q[ok]] = r.names[i[ok]]
                began[d, q[ok]] = r.starts[i[ok]]
        # outer first: by start (depth order for ranges that nest; ranges that do not can
        # sit at any depth), a tie in depth order
        return np.take_along_axis(at, np.argsort(began, axis=0, kind="stable"), axis=0)

    def _paths(self, at: np.ndarray) -> np.ndarray:
        """``outer > inner`` per column of ``at``, each distinct path built once."""
        path = np.zeros(at.shape[1], dtype=np.int64)  # index into `paths`
        paths = np.array([""], dtype=object)
        width = max(len(self.names), 1)
        for level in at:  # outer to inner: each path is its parent's, then this name
            has = level >= 0
            code, keys = pd.factorize(path[has] * width + level[has])
            parent, name = paths[keys // width], self.names[keys % width]
            path[has] = len(paths) + code
            paths = np.concatenate([paths, np.where(parent != "", parent + " > ", "") + name])
        return paths[path]

    def _steps(self, at: np.ndarray) -> np.ndarray:
        """Per column of ``at``, the number of its innermost step range (None: none): an int
        where every column has a step range at that depth, else a float, as the per-launch
        table has always had them (pandas' casting of a partly missing integer column)."""
        number = np.append(self.step, np.nan)  # code -1 takes the NaN appended last
        out = np.full(at.shape[1], None, dtype=object)
        for level in at:  # outer to inner: later levels overwrite
            ok = ~np.isnan(number[level])
            found = number[level[ok]]
            out[ok] = found.astype(np.int64).astype(object) if ok.all() else found.astype(object)
        return out

    @staticmethod
    def _innermost(at: np.ndarray, accept: np.ndarray) -> np.ndarray:
        """Per column of ``at``, the code of its innermost name that ``accept`` takes
        (-1: none)."""
        ok = np.append(accept, False)  # code -1 takes the False appended last
        out = np.full(at.shape[1], -1, dtype=np.int64)
        for level in at:  # outer to inner: later levels overwrite
            out = np.where(ok[level], level, out)
        return out


def _by_thread(nvtx: pd.DataFrame, depth: np.ndarray, name: np.ndarray,
               order: np.ndarray) -> dict[int, dict[int, _Ranges]]:
    """Each thread's ranges per depth, by start (ties in table order); ``order``: the ranges
    by thread, depth and start (:func:`_by_depth`)."""
    tid = nvtx["tid"].to_numpy()
    start, end = nvtx["start_ns"].to_numpy(), nvtx["end_ns"].to_numpy()
    tid, depth = tid[order], depth[order]
    cut = np.flatnonzero((np.diff(tid) != 0) | (np.diff(depth) != 0)) + 1
    out: dict[int, dict[int, _Ranges]] = {}
    for a, z in zip(np.r_[0, cut], np.r_[cut, len(order)], strict=True):
        if a == z:
            continue
        rows = order[a:z]
        out.setdefault(int(tid[a]), {})[int(depth[a])] = _Ranges(start[rows], end[rows],
                                                                  name[rows])
    return out
