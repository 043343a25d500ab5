"""The events a timeline draws (CUDA calls, NVTX ranges, GPU work), each table sorted by
start for window queries.

Where the analysed trace holds its events, they are sorted once and every timeline selects
from them. A long trace analysed in windows holds none
(:attr:`~nsysscope.analysis.Analysis.read_events`): each timeline reads the time it shows
from the export, so the two timelines of an HTML report of a 10^6-launch trace hold a few
steps' events, not the trace's (the whole trace's were 5.6 GB: bench/README.md). A read
reaches back to the calls of what shows (the launch of a replay drawn, the first try of a
polling loop), so a window draws the rows it would draw from the whole trace
(``tests/render/test_timeline_reads.py``). One difference is left: NVTX ranges that overlap
without nesting (start/end ranges, :func:`~nsysscope.analysis.nvtx.NvtxIndex.of`) take lanes
below the deepest nesting their read holds, which a whole read may place deeper (none of the
samples has such ranges).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from ...analysis import Analysis
from ...analysis.keys import join_first
from ...analysis.nvtx import NvtxIndex
from ...trace import TimeRange, Trace
from ...trace.windows import MARGIN_LAUNCHES

#: reads a timeline keeps, the latest first (a notebook draws the same steps again and again)
KEPT_READS = 4


def _fold_polls(api: pd.DataFrame, polls: pd.DataFrame) -> pd.DataFrame:
    """Each polling loop's first try stretched over the whole loop and named for it
    (``cudaEventQuery x2057``); the other tries inside the loop dropped."""
    if polls.empty:
        return api
    inside = np.zeros(len(api), dtype=bool)
    tids, starts = api["tid"].to_numpy(), api["start_ns"].to_numpy()
    for tid, p in polls.groupby("tid"):
        rows = np.flatnonzero(tids == tid)
        s, e = p["start_ns"].to_numpy(), p["end_ns"].to_numpy()
        i = np.searchsorted(s, starts[rows], side="right") - 1
        inside[rows] = (i >= 0) & (starts[rows] <= e[np.maximum(i, 0)])
    first = api["block"].isin(polls["block"]).to_numpy()
    keep = ~inside | first
    api = api[keep].copy()
    info = polls.set_index("block")
    loop = first[keep]
    ids = api.loc[loop, "block"]
    api.loc[loop, "end_ns"] = info.loc[ids, "end_ns"].to_numpy()
    api.loc[loop, "name"] = [f"{n.split(' ')[0]} x{k}" for n, k in
                             zip(info.loc[ids, "name"], info.loc[ids, "polls"], strict=True)]
    return api



def _slice(starts: np.ndarray, end_cummax: np.ndarray, t0: float, t1: float) -> slice:
    """Rows (sorted by start) that may overlap [t0, t1]: started before t1, and not all
    ended before t0 (``end_cummax`` is the running maximum of the end times)."""
    hi = int(np.searchsorted(starts, t1, side="left"))
    lo = int(np.searchsorted(end_cummax, t0, side="right"))
    return slice(lo, max(lo, hi))


@dataclass
class Sorted:
    """A table's rows in order of their start (rows without one left out), with the running
    maximum of their ends, for window queries. The table is not copied: a view of a long
    trace's launches keeps an order of its rows, not a sorted copy of them."""

    df: pd.DataFrame
    order: np.ndarray  # positions of the rows, by start
    start: np.ndarray  # their starts and ends, in that order
    end: np.ndarray
    end_max: np.ndarray

    @classmethod
    def of(cls, df: pd.DataFrame, start: str, end: str | np.ndarray) -> Sorted:
        """``df`` by its ``start`` column; ``end``: a column, or the end of each row."""
        s = df[start].to_numpy(dtype=np.float64)
        e = df[end].to_numpy(dtype=np.float64) if isinstance(end, str) else \
            np.asarray(end, dtype=np.float64)
        has = np.flatnonzero(~np.isnan(s))
        order = has[np.argsort(s[has], kind="stable")]
        s, e = s[order], e[order]
        return cls(df, order, s, e, np.maximum.accumulate(e) if len(e) else e)

    def window(self, t0: float, t1: float) -> pd.DataFrame:
        """The rows that overlap ``[t0, t1]``, by start."""
        rows = _slice(self.start, self.end_max, t0, t1)
        keep = (self.end[rows] > t0) & (self.start[rows] < t1)
        return self.df.iloc[self.order[rows][keep]]


@dataclass(frozen=True)
class Events:
    """What a timeline draws from: ``api_calls`` (the CUDA calls with the block each one is,
    a polling loop as one call from its first try to its last, and the class its wait
    shows), ``nvtx`` (with depth and cleaned name), ``gpu_ops``."""

    api_calls: Sorted
    nvtx: Sorted
    gpu_ops: Sorted

    @classmethod
    def of(cls, trace: Trace, nvtx: NvtxIndex, blocks: pd.DataFrame,
           block_class: pd.Series) -> Events:
        """The events of ``trace`` (``nvtx`` its NVTX index), ``blocks`` the analysis's
        blocks and ``block_class`` the class each one's colour shows."""
        api = trace.api.copy()
        api["name"] = api["name"].astype(str)
        api = join_first(api, blocks[["tid", "corr_id", "block"]], on=["tid", "corr_id"])
        api["block"] = api["block"].fillna(-1).astype(np.int64)
        api = _fold_polls(api, blocks[blocks["polls"] > 0])
        api["wait_class"] = api["block"].map(block_class).fillna("")
        api.loc[api["block"] < 0, "wait_class"] = ""
        nv = trace.nvtx.copy()
        nv["depth"] = nvtx.depth
        nv["text"] = pd.Series(nvtx.clean_text(), index=nv.index, dtype=object)
        return cls(Sorted.of(api, "start_ns", "end_ns"), Sorted.of(nv, "start_ns", "end_ns"),
                   Sorted.of(trace.gpu_ops, "start_ns", "end_ns"))


class EventSource:
    """The :class:`Events` a timeline of ``[t0, t1]`` of ``analysis`` draws from (the
    module's doc); ``launches`` gives the views' per-launch table (its ``proc`` and
    ``api_start_ns``), ``block_class`` the class each block's colour shows."""

    #: the columns of the blocks a timeline reads
    BLOCK_COLUMNS = ["block", "tid", "corr_id", "start_ns", "end_ns", "name", "polls"]

    def __init__(self, analysis: Analysis, launches: Callable[[], pd.DataFrame],
                 block_class: Callable[[], pd.Series]) -> None:
        self.analysis = analysis
        self._launches = launches
        self._block_class = block_class
        self._whole: Events | None = None
        self._reads: list[tuple[float, float, Events]] = []

    @cached_property
    def blocks(self) -> pd.DataFrame:
        """The blocks' :data:`BLOCK_COLUMNS` (a long trace's are on disk: read once)."""
        return self.analysis.block_table.frame(self.BLOCK_COLUMNS)

    def __call__(self, t0: float, t1: float, replays: pd.DataFrame) -> Events:
        """The events to draw ``[t0, t1]`` from; ``replays``: the launches whose replay shows
        (their calls are read too)."""
        a = self.analysis
        if a.holds_events:
            if self._whole is None:
                self._whole = Events.of(a.trace, a.nvtx, self.blocks, self._block_class())
            return self._whole
        if a.read_events is None:
            raise ValueError("this analysis holds none of the trace's events (a long trace "
                             "analysed in windows) and cannot read them again: analyse it "
                             "with analyze_file(path, events='shown') to draw its timelines")
        start, end = self._reach(t0, t1, replays)
        for s, e, events in self._reads:
            if s <= start and end <= e:
                return events
        trace = a.read_events(TimeRange(*(None if math.isinf(t) else math.floor(t)
                                          for t in (start, end))))
        b = self.blocks
        events = Events.of(trace, NvtxIndex.of(trace.nvtx),
                           b[(b["start_ns"] < end) & (b["end_ns"] > start)], self._block_class())
        self._reads = [(start, end, events), *self._reads[:KEPT_READS - 1]]
        return events

    def _reach(self, t0: float, t1: float, replays: pd.DataFrame) -> tuple[float, float]:
        """What to read for ``[t0, t1]`` (ns; -inf, inf: from the trace's start, to its end).

        From the earliest of ``t0``, the calls of the replays shown, the blocks (polling
        loops) that show and the call of each process's
        :data:`~nsysscope.trace.windows.MARGIN_LAUNCHES`-th launch before ``t0`` (an eager
        kernel or copy queued behind replays runs well after its call: as a window of the
        analysis reads its margins); from the start where no process launched before
        ``t0`` (warm-up work queued before the first launch). To each process's first launch
        after ``t1`` (before any launch: to every process's first), or the end where none
        launches after it: a read takes in the GPU work
        of the calls it reads by their correlation ids, and a kernel launched eagerly
        (``cudaLaunchKernel``, a call the loader does not keep) falls between those of the
        calls it keeps. A process that launches only after ``t0`` (or only before ``t1``)
        reaches no further: it would take in the trace up to its first (from its last)
        launch."""
        b = self.blocks
        shown = b.loc[(b["start_ns"] < t1) & (b["end_ns"] > t0), "start_ns"]
        start = min(t0, float(replays["api_start_ns"].min()) if len(replays) else t0,
                    float(shown.min()) if len(shown) else t0)
        end, before, after = float(t1), False, False
        calls = self._launch_calls
        warmup = all(c[0] >= t1 for c in calls)  # no launch yet: every process's own warm-up
        for c in calls:
            at, past = np.searchsorted(c, [t0, t1])
            before |= bool(at > 0)
            after |= bool(past < len(c))
            if 0 < at < len(c):
                start = min(start, float(c[max(at - MARGIN_LAUNCHES, 0)]))
            if (past > 0 or warmup) and past < len(c):
                end = max(end, float(c[past]))
        return (start if before else -math.inf), (end + 1 if after else math.inf)

    @cached_property
    def _launch_calls(self) -> list[np.ndarray]:
        """Each process's graph launch calls' start times, sorted."""
        L = self._launches()
        return [np.sort(g.to_numpy()) for _, g in L.groupby("proc")["api_start_ns"]]
