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

from collections.abc import Iterator

import numpy as np
import pandas as pd

from ..model import Bursts, Percentiles
from .stored import RowStore, as_rows, steady_parts


def count_before(procs: np.ndarray, times: np.ndarray, ref_procs: np.ndarray,
                 ref_times: np.ndarray, side: str = "left") -> np.ndarray:
    """Per (process, time): how many of that process's reference times come before it
    (``side`` as :func:`numpy.searchsorted`: ``right`` counts equal times too); 0 for a
    process with no reference times."""
    out = np.zeros(len(procs), dtype=np.int64)
    for proc in np.unique(ref_procs):  # a few processes, not events
        rows = np.flatnonzero(procs == proc)
        refs = np.sort(ref_times[ref_procs == proc])
        out[rows] = np.searchsorted(refs, times[rows], side=side)  # type: ignore[call-overload]
    return out


def burst_numbers(launches: pd.DataFrame, blocks: pd.DataFrame,
                  launching: np.ndarray | None = None) -> np.ndarray:
    """Per launch, how many blocks of its process's launching threads (``launching``: the
    threads that launch graphs anywhere in the trace; default: ``launches``'s) started before
    its launch call: launches of one process with the same number form one burst."""
    tids = launches["tid"].unique() if launching is None else launching
    own = blocks[blocks["tid"].isin(tids)]  # a tid holds its process
    return count_before(launches["proc"].to_numpy(), launches["api_start_ns"].to_numpy(),
                        own["proc"].to_numpy(), own["start_ns"].to_numpy())


def bursts_by_part(launches: RowStore, blocks: RowStore) -> Iterator[dict[str, np.ndarray]]:
    """Per part of ``launches`` (:meth:`~.stored.RowStore.update_parts`), its launches'
    :func:`burst_numbers`. The parts of the launches and of the blocks are the same time
    windows (a block's part is the window it starts in), so the blocks before a part's
    launches are those of the parts before, counted as they go by, and its own."""
    launching = np.unique(np.concatenate([part["tid"].to_numpy()
                                          for part in launches.chunks(["tid"])]))
    earlier: dict[int, int] = {}
    for part, own in zip(launches.chunks(["proc", "tid", "api_start_ns"]),
                         blocks.chunks(["proc", "tid", "start_ns"]), strict=True):
        burst = burst_numbers(part, own, launching)
        proc = part["proc"].to_numpy()
        for p, n in earlier.items():
            burst[proc == p] += n
        counted = own.loc[own["tid"].isin(launching), "proc"].value_counts()
        for p, n in counted.items():
            earlier[int(p)] = earlier.get(int(p), 0) + int(n)
        yield {"burst": burst}


def steady_bursts(launches: pd.DataFrame | RowStore, proc: int | None = None) -> Bursts:
    """The bursts of the steady launches (of process ``proc``; ``proc``, ``burst``,
    ``api_start_ns``, ``stall``, ``klass``, ``window_ns``): how many, how many stall or end
    launch-bound, their median size, and the overlap window of each one's last launch (the
    time the host had before it blocked on the step's work).

    Read a part of the launches at a time: a burst's launches are consecutive in a process's
    calls, so only a part's last burst of each process can go on in the next part. Of a burst
    done, only its size (counted: how many bursts of each size) and its window are kept."""
    done = _Done()
    going: list[pd.DataFrame] = []
    for steady in steady_parts(as_rows(launches), _READ, proc):
        if steady.empty:
            continue
        bursts = _joined(pd.concat([*going, _bursts(steady)]))
        last = bursts.groupby("proc")["burst"].transform("max") == bursts["burst"]
        done.add(bursts[~last])
        going = [bursts[last]]
    for bursts in going:
        done.add(bursts)
    if not done.n:
        return Bursts(steady=0, stalled=0, launches_p50=0.0, window_us=Percentiles.of([]))
    return Bursts(steady=done.n, stalled=done.stalled, launch_bound=done.launch_bound,
                  launches_p50=done.median_size(),
                  window_us=Percentiles.of(np.concatenate(done.windows) / 1e3))


class _Done:
    """The bursts done: how many, stalled and launch-bound, how many of each size, and each
    one's overlap window (exact percentiles need every value; the sizes, small whole numbers,
    are exact as counts)."""

    def __init__(self) -> None:
        self.n = self.stalled = self.launch_bound = 0
        self.sizes = np.zeros(0, dtype=np.int64)  # bursts of each size
        self.windows: list[np.ndarray] = []

    def add(self, bursts: pd.DataFrame) -> None:
        self.n += len(bursts)
        self.stalled += int(bursts["stalled"].sum())
        self.launch_bound += int(bursts["launch_bound"].sum())
        counts = np.bincount(bursts["size"].to_numpy(dtype=np.int64))
        if len(counts) > len(self.sizes):
            self.sizes = np.pad(self.sizes, (0, len(counts) - len(self.sizes)))
        self.sizes[:len(counts)] += counts
        self.windows.append(bursts["window_ns"].to_numpy(dtype=np.float64))

    def median_size(self) -> float:
        """``np.median`` of the sizes, from their counts: the middle one, or the mean of the
        middle two."""
        upto = np.cumsum(self.sizes)
        low, high = (int(np.searchsorted(upto, k, side="right")) for k in
                     ((self.n - 1) // 2, self.n // 2))
        return (low + high) / 2


#: the launch table's columns bursts are made of
_READ = ["proc", "burst", "api_start_ns", "steady", "stall", "klass", "window_ns"]


def _bursts(steady: pd.DataFrame) -> pd.DataFrame:
    """One row per burst of ``steady``: ``proc``, ``burst``, ``size``, whether one of its
    launches stalled or left the GPU idle, launch-bound, and its last launch's call start and
    overlap window."""
    proc, burst = steady["proc"].to_numpy(), steady["burst"].to_numpy()
    order = np.lexsort((steady["api_start_ns"].to_numpy(), burst, proc))
    proc, burst = proc[order], burst[order]
    starts = np.flatnonzero(np.r_[True, (proc[1:] != proc[:-1]) | (burst[1:] != burst[:-1])])
    ends = np.r_[starts[1:], len(order)]
    stalled = steady["stall"].to_numpy(dtype=bool)[order]
    gap = (steady["klass"] == "launch_bound").to_numpy(dtype=bool)[order]
    last = order[ends - 1]
    return pd.DataFrame({
        "proc": proc[starts], "burst": burst[starts], "size": ends - starts,
        "stalled": np.logical_or.reduceat(stalled, starts),
        "launch_bound": np.logical_or.reduceat(gap, starts),
        "last_start_ns": steady["api_start_ns"].to_numpy()[last],
        "window_ns": steady["window_ns"].to_numpy(dtype=np.float64)[last]})


def _joined(bursts: pd.DataFrame) -> pd.DataFrame:
    """Bursts seen in two parts as one: sizes added, stalled or launch-bound if either part
    was, the last launch the later one (a tie: the later part's)."""
    if not bursts.duplicated(["proc", "burst"]).any():
        return bursts
    keys = ["proc", "burst"]
    bursts = bursts.sort_values([*keys, "last_start_ns"], kind="stable")
    grouped = bursts.groupby(keys, sort=False)
    out = bursts.drop_duplicates(keys, keep="last").set_index(keys)
    out["size"] = grouped["size"].sum()
    out["stalled"] = grouped["stalled"].max()
    out["launch_bound"] = grouped["launch_bound"].max()
    return out.reset_index()
