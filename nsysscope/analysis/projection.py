"""How much would a fix buy? The launch rate with a stall site fixed, projected from the trace.

Per steady launch the trace gives its step (from this launch to the next one on the stream):

* ``period``: the host's cadence, next launch call minus this one;
* ``gpu_work``: what the GPU itself did for the step, the replay plus any other GPU work
  before the next replay (for a tensor-parallel rank this includes time spinning in a
  collective for a slower peer, ``collective_wait_ns``);
* ``blocked``: the time the launching thread spent blocked in host waits during the step;
  the host's own work is ``period - blocked``;
* ``q``: how closely the GPU runs two replays when the next is already queued (the median
  idle gap of the process's healthy launches, else its launch latency: the next replay's
  start minus its launch call's start, p10 over the stalled steps).

Fixing a stall removes its wait: the host no longer waits for the in-flight launch, so the
step takes as long as the slower of the GPU (``gpu_work + q``) and the host's own work
(``period - stall block``), and never longer than it did; and the run as a whole takes at
least the GPU's work (the steps that followed a stall were short only because the host was
catching up with an idle GPU). A rank that waited in collectives
for the fixed process loses that wait from its GPU work; its own stalls, unless fixed too, keep
their steps as they were. Launches not touched by the fix keep
their period. Ranks of one tensor-parallel group move in lockstep, so a group's projected
rate is its slowest rank's. The projected launch rate is the measured one scaled by the sum
of the periods over the sum of the projected ones.

It is a model, not a promise: it assumes the freed host time is not spent on new work and
the GPU work per step does not change. On the engine's own H200 captures it lands within a
few percent of the rate the healthy capture of the same session measured (README, "How much
will the fix buy?").

What one stall cost, apart from the host running slower than usual after it (a GC pause, a
hiccup every capture has): :func:`stall_costs` (the timelines draw the stall that cost most).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .launches import busy_until

#: launches whose blocked time is measured at once
_CHUNK = 1 << 17
#: the columns :func:`step_costs` adds to the launch table, and those of it that it reads
STEP_COLUMNS = ["period_ns", "gpu_work_ns", "host_blocked_ns"]
STEP_READS = ["tid", "api_start_ns", "next_api_start_ns", "gpu_start_ns", "gpu_end_ns",
              "gpu_gap_ns", "gpu_idle_ns"]


def step_costs(launches: pd.DataFrame, blocks: pd.DataFrame) -> pd.DataFrame:
    """``period_ns``, ``gpu_work_ns`` and ``host_blocked_ns`` for every launch."""
    df = launches.copy(deep=False)  # new columns only: the caller's table is not changed
    df["period_ns"] = df["next_api_start_ns"] - df["api_start_ns"]
    df["gpu_work_ns"] = (df["gpu_end_ns"] - df["gpu_start_ns"]) + \
        (df["gpu_gap_ns"] - df["gpu_idle_ns"])
    blocked = np.zeros(len(df))
    a = df["api_start_ns"].to_numpy(dtype=np.float64)
    b = df["next_api_start_ns"].to_numpy(dtype=np.float64)
    tids = df["tid"].to_numpy()
    block_start = blocks["start_ns"].to_numpy(dtype=np.float64)
    block_end = blocks["end_ns"].to_numpy(dtype=np.float64)
    # each thread's blocks by position, not as a copy of its rows (at 10^6 launches the one
    # launching thread's copy is every block, 120 MB)
    for tid, own in blocks.groupby("tid").indices.items():
        rows = np.flatnonzero(tids == tid)
        if not len(rows):
            continue
        starts, ends = _disjoint(block_start[own], block_end[own])
        cum = np.concatenate([[0.0], np.cumsum(ends - starts)])
        for at in range(0, len(rows), _CHUNK):  # bounded temporaries (busy_until's: ~6 arrays)
            part = rows[at:at + _CHUNK]
            blocked[part] = busy_until(b[part], starts, ends, cum) - \
                busy_until(a[part], starts, ends, cum)
    df["host_blocked_ns"] = np.where(np.isnan(b), np.nan, blocked)
    return df


def _disjoint(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as sorted disjoint intervals (a thread's waits do not overlap,
    but a polling loop and a call inside it would)."""
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], np.maximum.accumulate(ends[order])
    new = np.r_[True, s[1:] > e[:-1]]
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


@dataclass(frozen=True)
class Projection:
    """The projected launch rate of each process with some stalls fixed, and the speed-up of
    the whole trace (its launch rates added, as the summary's are)."""

    launches_per_s: dict[int, float]  # proc -> projected launches/s
    total_launches_per_s: float
    speedup: float


def queue_gap_ns(launches: pd.DataFrame, rows: np.ndarray) -> float:
    """How closely the GPU runs two queued replays of the process whose steady launches are
    ``rows`` (positions in ``launches``; see the module doc)."""
    healthy = rows[(launches["klass"] == "healthy").to_numpy()[rows]]
    idle = _at(launches, "gpu_idle_ns", healthy)
    idle = idle[~np.isnan(idle)]
    if len(idle) >= 10:
        return float(np.median(idle))
    stalled = rows[launches["stall"].to_numpy(dtype=bool)[rows]]
    latency = _at(launches, "next_gpu_start_ns", stalled) - \
        _at(launches, "next_api_start_ns", stalled)
    latency = latency[~np.isnan(latency)]
    return float(np.percentile(np.clip(latency, 0, None), 10)) if len(latency) else 0.0


def project(launches: pd.DataFrame, rates: dict[int, float], fixed: pd.Series,
            groups: list[set[int]]) -> Projection:
    """The projection with the steady launches where ``fixed`` is True relieved of their
    stall. ``rates``: each process's measured launches/s; ``groups``: sets of processes that
    wait for each other in collectives (tensor-parallel groups).

    Each process's values are taken from ``launches`` by position, one column at a time, not
    as a copy of its steady rows (at 10^6 launches that copy was 100 MB, made again for every
    site's projection)."""
    steady = launches["steady"].to_numpy(dtype=bool) & launches["period_ns"].notna().to_numpy()
    relieved_all = steady & fixed.reindex(launches.index, fill_value=False).to_numpy(dtype=bool)
    procs = launches["proc"].to_numpy()
    fixed_procs = set(pd.unique(procs[relieved_all]).tolist())
    out: dict[int, float] = {}
    positions = np.flatnonzero(steady)
    by_proc = pd.DataFrame({"proc": procs[positions]}).groupby("proc").indices
    for proc in sorted(by_proc):
        rows = positions[by_proc[proc]]
        period = _at(launches, "period_ns", rows)
        work = _at(launches, "gpu_work_ns", rows)
        blocked = _at(launches, "host_blocked_ns", rows)
        host = period - np.where(np.isnan(blocked), 0, blocked)
        stall_block = _at(launches, "block_end_ns", rows) - _at(launches, "block_start_ns", rows)
        stall_block[np.isnan(stall_block)] = 0
        relieved = relieved_all[rows]
        # a peer that waited for a fixed process in collectives no longer waits
        peer = np.isin(launches["waited_for"].to_numpy()[rows], list(fixed_procs)) \
            if fixed_procs else np.zeros(len(rows), dtype=bool)
        work = work - np.where(peer, _at(launches, "collective_wait_ns", rows), 0)
        # the host's own work per step: a relieved stall's block goes; a stall not fixed keeps
        # the whole step (its block is a cause); other waits follow the GPU, and go with it
        stalled = launches["stall"].to_numpy(dtype=bool)[rows]
        own_host = np.where(relieved, period - stall_block, np.where(stalled, period, host))
        touched = relieved | peer
        rate = rates.get(int(proc), 0.0)
        if not touched.any():
            out[int(proc)] = rate
            continue
        q = queue_gap_ns(launches, rows)
        new = np.where(touched, np.minimum(period, np.maximum(work + q, own_host)), period)
        # the steps right after a stall were short while the host caught up with an idle GPU;
        # fixed, the GPU bounds every step: the whole run takes at least its GPU work
        total = max(float(np.nansum(new)), float(np.nansum(work + q)))
        out[int(proc)] = rate * min(float(np.nansum(period)) / total, np.inf) if total else rate
    for group in groups:  # lockstep: the group goes as fast as its slowest rank
        ranks = [p for p in group if p in out]  # (a part of a trace may hold none)
        for p in ranks:
            out[p] = min(out[q] for q in ranks)
    total = sum(out.values())
    measured = sum(rates.get(p, 0.0) for p in out)
    return Projection(out, round(total, 2), round(total / measured, 3) if measured else 1.0)


def _at(launches: pd.DataFrame, column: str, rows: np.ndarray) -> np.ndarray:
    """``column`` of the launches at positions ``rows``, as floats (a new array)."""
    values: np.ndarray = launches[column].to_numpy(dtype=np.float64)[rows]
    return values


def coupled_groups(launches: pd.DataFrame) -> list[set[int]]:
    """Processes that waited for each other in collectives, as groups (connected pairs)."""
    pairs = launches.loc[launches["waited_for"] >= 0, ["proc", "waited_for"]].drop_duplicates()
    groups: list[set[int]] = []
    for a, b in pairs.itertuples(index=False):
        hit = [g for g in groups if a in g or b in g]
        merged = set().union(*hit) | {int(a), int(b)}
        groups = [g for g in groups if g not in hit] + [merged]
    return groups


def stall_costs(launches: pd.DataFrame) -> pd.DataFrame:
    """For each launch: the host's work between the end of the wait on it and the next launch
    call (``host_after_ns``), what that takes on a usual stall of its class in the steady state
    (``usual_after_ns``), the excess (``slow_host_ns``: the host running slower than usual, a
    GC pause or a hiccup every capture has), and ``stall_cost_ns``: the GPU idle gap without
    that excess, what the stall itself cost."""
    L = launches
    after = (L["next_api_start_ns"] - L["block_end_ns"]).astype(float)
    usual = pd.Series(np.nan, index=L.index)
    steady_stalls = L["steady"] & L["stall"] & after.notna()
    for klass, idx in L[steady_stalls].groupby(L["klass"].astype(str)).groups.items():
        usual[(L["klass"].astype(str) == klass) & L["stall"]] = float(np.median(after[idx]))
    slow = (after - usual).clip(lower=0).fillna(0.0).where(L["stall"], 0.0)
    idle = L["gpu_idle_ns"].astype(float)
    cost = (idle - slow).clip(lower=0).where(idle.notna())
    return pd.DataFrame({"host_after_ns": after, "usual_after_ns": usual, "slow_host_ns": slow,
                         "stall_cost_ns": cost}, index=L.index)
