"""Idle: a server with nothing to run, told apart from a stall and from a slow host.

Between bursts of requests and at the end, a server's scheduler sleeps or polls its request
queue: the GPU has nothing to do and the host makes no CUDA call for tens to thousands of
milliseconds. The launch before such a period is waited on like any other (a server drains
its last step before it idles), so its host block ends long before the next launch: read as
a launch it is a stall, charged to whatever copy preceded the wait, and the idle time is
charged to it as GPU idle. It is neither a stall nor a slow host: nothing follows it for long.

An **idle period** is a quiet gap of a process between two of its launches (no CUDA call of
it that the loader reads, no GPU work of it, :func:`quiet_columns`; what follows its last
launch, a final idle or the teardown, is outside its launches and counted nowhere) that
starts after its last launch was waited on (the
launch's host block ended before the gap: nothing in flight, nothing owed) and lasts at least
:data:`IDLE_STEPS` steps, a step being the median time between the starts of the process's
steps (launch bursts, :mod:`.bursts`; start-up left out). The launch before it is judged as
nothing follows it (class ``last``, never steady), and the period is left out of the steady
span: GPU busy and the launch rate are over serving time (:mod:`.processes`).

A pause with a launch still in flight is not idle: the host went away mid-step (a garbage
collection, the OS), and the next wait comes after the pause. The 114 ms pause of the 5000-step
healthy sample (35 steps) is such a one, and stays a launch-bound gap.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..trace.load import Trace
from .stored import RowStore

#: a quiet gap is idle from this many steps (the median step period of its process). On the
#: H100 server captures (sample_traces/server/) the idle periods are 130-220 steps long
#: (300-500 ms of idle, 2.3-3.9 ms steps), and the longest quiet gap after a drained launch
#: that is not idle is 8.3 steps (a start-up check replay's); on the other samples no quiet
#: gap after a drained launch lasts 10 ms between two launches (the 114 ms pause of the
#: 5000-step sample comes with a launch in flight). 20 leaves a factor of 2.4 on the short
#: side and 6.5 on the long one.
IDLE_STEPS = 20.0

#: the launch table's columns idle periods are found from
READ = ["proc", "burst", "api_start_ns", "startup", "waited", "block_end_ns", "quiet_start_ns",
        "quiet_ns"]


def quiet_columns(trace: Trace, launches: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per launch of one read: the longest quiet gap of its process (no CUDA call the loader
    reads, no GPU work: graph replays and eager ops) between the end of its call and the next
    launch call of the process, ``quiet_start_ns`` and ``quiet_ns`` (NaN: none, and for the
    process's last launch)."""
    start_out = np.full(len(launches), np.nan)
    length_out = np.full(len(launches), np.nan)
    api, ops, work = trace.api, trace.gpu_ops, trace.graph_work
    proc = launches["proc"].to_numpy()
    for p in np.unique(proc):  # a few processes
        rows = np.flatnonzero(proc == p)
        calls = api[api["proc"] == p]
        own_ops = ops[ops["proc"] == p]
        own_work = work[work["proc"] == p].dropna(subset=["gpu_start_ns", "gpu_end_ns"])
        begin = np.concatenate([calls["start_ns"].to_numpy(np.float64),
                                own_ops["start_ns"].to_numpy(np.float64),
                                own_work["gpu_start_ns"].to_numpy(np.float64)])
        end = np.concatenate([calls["end_ns"].to_numpy(np.float64),
                              own_ops["end_ns"].to_numpy(np.float64),
                              own_work["gpu_end_ns"].to_numpy(np.float64)])
        if len(begin) < 2:
            continue
        order = np.argsort(begin, kind="stable")
        begin, end = begin[order], np.maximum.accumulate(end[order])
        gap_start, gap_end = end[:-1], begin[1:]
        gap = gap_end - gap_start
        keep = gap > 0
        gap_start, gap = gap_start[keep], gap[keep]
        # the launch each gap follows: the last launch call of the process ending before it
        launch_end = launches["api_end_ns"].to_numpy(np.float64)[rows]
        by_end = np.argsort(launch_end, kind="stable")
        at = np.searchsorted(launch_end[by_end], gap_start, side="right") - 1
        inside = at >= 0
        if not inside.any():
            continue
        owner = rows[by_end[at[inside]]]
        # only between two launches: after the process's last launch (a final idle,
        # teardown) the trace has no steady state left to keep it out of
        starts = np.sort(launches["api_start_ns"].to_numpy(np.float64)[rows])
        later = np.searchsorted(starts, gap_start[inside], side="right") < len(starts)
        owner = owner[later]
        g = pd.DataFrame({"owner": owner, "start": gap_start[inside][later],
                          "gap": gap[inside][later]})
        longest = g.loc[g.groupby("owner")["gap"].idxmax()]
        start_out[longest["owner"].to_numpy()] = longest["start"].to_numpy()
        length_out[longest["owner"].to_numpy()] = longest["gap"].to_numpy()
    return {"quiet_start_ns": start_out, "quiet_ns": length_out}


@dataclass(frozen=True)
class StepPeriod:
    """A process's step period: the time between the starts of consecutive steps (launch
    bursts), p10/p50/p90 in ns, over its launches after start-up."""

    p10: float
    p50: float
    p90: float

    @property
    def idle_from_ns(self) -> float:
        return IDLE_STEPS * self.p50


def step_periods(launches: RowStore) -> dict[int, StepPeriod]:
    """Each process's :class:`StepPeriod` (none for a process of fewer than three steps)."""
    firsts = []
    for part in launches.chunks(["proc", "burst", "api_start_ns", "startup"]):
        own = part[~part["startup"].to_numpy(dtype=bool)]
        firsts.append(own.groupby(["proc", "burst"])["api_start_ns"].min())
    if not firsts:
        return {}
    starts = pd.concat(firsts)
    starts = starts.groupby(level=[0, 1]).min().sort_index()
    out = {}
    for p, s in starts.groupby(level=0):
        d = np.diff(np.sort(s.to_numpy(np.float64)))
        if len(d) >= 2:
            p10, p50, p90 = np.percentile(d, [10, 50, 90])
            out[int(p)] = StepPeriod(float(p10), float(p50), float(p90))
    return out


def idle_by_part(launches: RowStore,
                 periods: dict[int, StepPeriod]) -> Iterator[dict[str, np.ndarray]]:
    """Per part of ``launches``: ``idle_ns`` (the idle period after the launch, NaN: none),
    and its class and stall where it has one (``last``, not a stall: nothing follows it for
    long)."""
    for part in launches.chunks([*READ, "klass", "stall"]):
        proc = part["proc"].to_numpy()
        limit = np.array([periods[int(p)].idle_from_ns if int(p) in periods else np.inf
                          for p in proc], dtype=np.float64)
        quiet = part["quiet_ns"].to_numpy(np.float64)
        drained = part["waited"].to_numpy(dtype=bool) & \
            (part["block_end_ns"].to_numpy(np.float64) <= part["quiet_start_ns"].to_numpy(
                np.float64))
        idle = drained & (quiet >= limit) & ~part["startup"].to_numpy(dtype=bool)
        klass = part["klass"].copy()
        klass.iloc[np.flatnonzero(idle)] = "last"
        yield {"idle_ns": np.where(idle, quiet, np.nan), "klass": klass,
               "stall": part["stall"].to_numpy(dtype=bool) & ~idle}
