"""Launch bursts: the graph launches a process issues between two of its host blocks.

An overlap scheduler launches a step's work and blocks once per step: on the previous step's
output when healthy, on this step's when a readback broke overlap. With the whole step in one
CUDA graph a step is one launch. With piecewise CUDA graphs (vLLM's for mixed batches: a
graph per piece, attention run eagerly between them) it is one launch per piece, and only the
last piece is followed by the block that lets the GPU run dry. Counted per launch, a stall on
every step reads as 1/N of the launches (4 % at 24 pieces, under the verdict's 5 %): the
verdict counts bursts instead, and a burst stalls when one of its launches does.

A burst is a run of one process's launches with no block of that process (on any of its
threads) starting between them. Blocks on another thread can only split bursts, so where the
grouping is unsure it falls back to judging launches one by one, as before.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model import STALL_CLASSES, Bursts, Percentiles


def burst_numbers(launches: pd.DataFrame, blocks: pd.DataFrame) -> np.ndarray:
    """Per launch, how many blocks of its process started before its launch call: launches of
    one process with the same number form one burst."""
    out = np.zeros(len(launches), dtype=np.int64)
    procs = launches["proc"].to_numpy()
    starts = launches["api_start_ns"].to_numpy(dtype=np.int64)
    for proc, b in blocks.groupby("proc", sort=False):  # a few processes, not events
        rows = np.flatnonzero(procs == proc)
        block_starts = np.sort(b["start_ns"].to_numpy(dtype=np.int64))
        out[rows] = np.searchsorted(block_starts, starts[rows], side="left")
    return out


def steady_bursts(steady: pd.DataFrame) -> Bursts:
    """The bursts of the steady launches (``proc``, ``burst``, ``klass``, ``window_ns``):
    how many, how many stall, their median size, and the overlap window of each one's last
    launch (the time the host had before it blocked on the step's work)."""
    if steady.empty:
        return Bursts(0, 0, 0.0, Percentiles.of([]))
    keys = steady[["proc", "burst"]].to_numpy()
    order = np.lexsort((steady["api_start_ns"].to_numpy(), keys[:, 1], keys[:, 0]))
    k = keys[order]
    first = np.r_[True, (k[1:] != k[:-1]).any(axis=1)]
    starts = np.flatnonzero(first)
    sizes = np.diff(np.r_[starts, len(k)])
    stalled = steady["klass"].isin([str(c) for c in STALL_CLASSES]).to_numpy()[order]
    last = np.r_[starts[1:], len(k)] - 1
    window = steady["window_ns"].to_numpy(dtype=np.float64)[order][last]
    return Bursts(steady=len(starts), stalled=int(np.logical_or.reduceat(stalled, starts).sum()),
                  launches_p50=float(np.median(sizes)), window_us=Percentiles.of(window / 1e3))
