"""Launch bursts: the graph launches a process issues between two of its waits on graph work.

An overlap scheduler launches a step's work and waits once per step: on the previous step's
output when healthy, on this step's when a readback broke overlap. With the whole step in one
CUDA graph a step is one launch. With piecewise CUDA graphs (vLLM's for mixed batches: a
graph per piece, attention run eagerly between them) it is one launch per piece, and only the
last piece is followed by the wait that lets the GPU run dry. Counted per launch, a stall on
every step reads as 1/N of the launches (4 % at 24 pieces, under the verdict's 5 %): where a
burst is several launches the verdict counts bursts instead, and a burst stalls (or leaves the
GPU idle, launch-bound) when one of its launches does.

A burst is a run of one process's launches with no host block of a launching thread (a
thread of the process that launches graphs) starting between them. Blocks of other threads (an
output thread syncing on its copies, a watchdog) do not split bursts. Whether a block waited on
the graphs does not matter: a host that is behind the GPU finds the work done and returns at
once, and that wait still ends its step. An engine that blocks only every k-th step has k
steps in a burst: its bursts are its wait cycles; one whose launching thread never blocks is
one burst, and is judged per launch (:attr:`~nsysscope.model.Bursts.several`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model import Bursts, Percentiles


def count_before(procs: np.ndarray, times: np.ndarray, ref_procs: np.ndarray,
                 ref_times: np.ndarray, side: str = "left", missing: int = 0) -> np.ndarray:
    """Per (process, time): how many of that process's reference times come before it
    (``side`` as :func:`numpy.searchsorted`: ``right`` counts equal times too); ``missing``
    for a process with no reference times."""
    out = np.full(len(procs), missing, dtype=np.int64)
    for proc in np.unique(ref_procs):  # a few processes, not events
        rows = np.flatnonzero(procs == proc)
        refs = np.sort(ref_times[ref_procs == proc])
        out[rows] = np.searchsorted(refs, times[rows], side=side)  # type: ignore[call-overload]
    return out


def burst_numbers(launches: pd.DataFrame, blocks: pd.DataFrame) -> np.ndarray:
    """Per launch, how many blocks of its process's launching threads started before its
    launch call: launches of one process with the same number form one burst."""
    own = blocks[blocks["tid"].isin(launches["tid"].unique())]  # a tid holds its process
    return count_before(launches["proc"].to_numpy(), launches["api_start_ns"].to_numpy(),
                        own["proc"].to_numpy(), own["start_ns"].to_numpy())


def steady_bursts(steady: pd.DataFrame) -> Bursts:
    """The bursts of the steady launches (``proc``, ``burst``, ``api_start_ns``, ``stall``,
    ``klass``, ``window_ns``): how many, how many stall or end launch-bound, their median
    size, and the overlap window of each one's last launch (the time the host had before it
    blocked on the step's work)."""
    if steady.empty:
        return Bursts(steady=0, stalled=0, launches_p50=0.0, window_us=Percentiles.of([]))
    proc, burst = steady["proc"].to_numpy(), steady["burst"].to_numpy()
    order = np.lexsort((steady["api_start_ns"].to_numpy(), burst, proc))
    proc, burst = proc[order], burst[order]
    starts = np.flatnonzero(np.r_[True, (proc[1:] != proc[:-1]) | (burst[1:] != burst[:-1])])
    ends = np.r_[starts[1:], len(order)]
    sizes = ends - starts
    stalled = steady["stall"].to_numpy(dtype=bool)[order]
    gap = (steady["klass"] == "launch_bound").to_numpy(dtype=bool)[order]
    window = steady["window_ns"].to_numpy(dtype=np.float64)[order[ends - 1]]
    return Bursts(steady=len(starts), stalled=int(np.logical_or.reduceat(stalled, starts).sum()),
                  launch_bound=int(np.logical_or.reduceat(gap, starts).sum()),
                  launches_p50=float(np.median(sizes)), window_us=Percentiles.of(window / 1e3))
