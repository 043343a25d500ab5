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
catching up with an idle GPU). Relieving a launch-bound gap (no stall: the host came late)
means a host that keeps ahead of the GPU: the step is the GPU's, an upper bound, since how far
the host's own work can shrink is not in the trace. A rank that waited in collectives for the
fixed process loses that wait from its GPU work; its own stalls, unless fixed too, keep their
steps as they were. Launches not touched by the fix keep their period. Ranks of one
tensor-parallel group move in lockstep, so a group's projected rate is its slowest rank's. The
projected launch rate is the measured one scaled by the sum of the periods over the sum of the
projected ones.

It is a model, not a promise: it assumes the freed host time is not spent on new work and
the GPU work per step does not change. On the engine's own H200 captures it lands within a
few percent of the rate the healthy capture of the same session measured (docs/report.md,
"How much will the fix buy?").

What one stall cost, apart from the host running slower than usual after it (a GC pause, a
hiccup every capture has): :func:`stall_costs` (the timelines draw the stall that cost most).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .after_idle import idle_factors
from .launches import busy_until
from .stored import RowStore, as_rows, steady_parts

#: launches whose blocked time is measured at once
_CHUNK = 1 << 17


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
    #: None, both, where no launch rate was measured (a single steady launch): nothing to
    #: project from (it read 0.0 launches/s, "1.00x": nothing to fix), or where the model
    #: lacks what it needs (``withheld`` says what)
    total_launches_per_s: float | None
    speedup: float | None
    withheld: str | None = None


#: steps a queue gap is estimated from: a process's healthy steps, else its stalled ones
#: (:func:`queue_gaps`); with fewer of both a fix's gain is not projected (one stalled step
#: among six gave a queue gap that made a fix "~0.89x": issue 53)
MIN_STEPS = 10
#: the model's GPU time of the fixed run may exceed the measured run by this much, the
#: projection then clamped to the measured rate (a fix never slows a run); beyond, the model
#: contradicts the trace and is withheld. Healthy captures of one program and session differ
#: by 0.4-1.8 % in their rate (17 H200 captures, five sessions)
MODEL_SLACK = 0.02
#: ranks of one group run in lockstep: measured further apart than this, their projection is
#: withheld (the TP=2 captures' ranks: 0.01-0.26 % apart)
LOCKSTEP = 0.05


#: the launch table's columns a projection reads
_PROJECTED = ["proc", "steady", "stall", "klass", "period_ns", "gpu_work_ns", "host_blocked_ns",
              "block_start_ns", "block_end_ns", "waited_for", "collective_wait_ns",
              "gpu_idle_ns", "next_gpu_start_ns", "next_api_start_ns"]
#: the launches each projection relieves, one mask per projection, of a part of the launches
#: (its :data:`_PROJECTED` columns, indexed by launch position)
Relieved = Callable[[pd.DataFrame], list[np.ndarray]]


def project(launches: pd.DataFrame | RowStore, rates: dict[int, float], fixed: Any,
            groups: list[set[int]], back_to_back: dict[int, float] | None = None) -> Projection:
    """The projection with the steady launches where ``fixed`` (one flag per launch) is True
    relieved of their stall. ``rates``: each process's measured launches/s; ``groups``: sets
    of processes that run collectives together (tensor-parallel groups); ``back_to_back``:
    how much longer each process's replays take back to back than after a stall
    (:func:`.after_idle.idle_factors`: measured in the trace; none given, measured here)."""
    flags = np.asarray(fixed, dtype=bool)
    return project_each(launches, rates, groups, lambda part: [flags[part.index]], 1,
                        back_to_back)[0]


def project_each(launches: pd.DataFrame | RowStore, rates: dict[int, float],
                 groups: list[set[int]], relieved: Relieved, n: int,
                 back_to_back: dict[int, float] | None = None) -> list[Projection]:
    """``n`` projections at once (:func:`project`), ``relieved`` saying which launches each
    relieves. Each process's steps are summed a part of the launches at a time: its queue gap
    first (:func:`queue_gaps`), then which processes each projection relieves (a peer that
    waited for one of them in collectives no longer waits), then its steps' sums; a relieved
    step whose replay followed a stall has its GPU work scaled by ``back_to_back``."""
    rows = as_rows(launches)
    q = queue_gaps(rows)
    factor = idle_factors(rows) if back_to_back is None else back_to_back
    fixed_procs: list[set[int]] = [set() for _ in range(n)]
    for part in _steps(rows):
        procs = part["proc"].to_numpy()
        for f, mask in zip(fixed_procs, relieved(part), strict=True):
            f.update(pd.unique(procs[mask]).tolist())
    sums = [{p: _Sums() for p in q} for _ in range(n)]
    last: dict[int, bool] = {}  # each process's previous step stalled
    for part in _steps(rows):
        masks = relieved(part)
        for proc, at in part.groupby("proc").indices.items():
            p = int(proc)
            step = _Step.of(part, at, last.get(p, False))
            last[p] = bool(step.stalled[-1])
            for k, mask in enumerate(masks):
                sums[k][p].add(step, mask[at], fixed_procs[k], q[p], factor.get(p, 1.0))
    return [_projection({p: s.rate(rates.get(p, 0.0), q[p]) for p, s in per.items()}, rates,
                        groups) for per in sums]


def _steps(rows: RowStore) -> Iterator[pd.DataFrame]:
    """The steady launches with a step (a next launch), a part at a time."""
    for part in steady_parts(rows, _PROJECTED):
        yield part[part["period_ns"].notna().to_numpy()]


@dataclass(frozen=True)
class QueueGap:
    """How closely the GPU runs two queued replays (ns), and over how many steps that was
    measured (fewer than :data:`MIN_STEPS`: not enough to project from)."""

    ns: float
    steps: int


def queue_gaps(launches: RowStore) -> dict[int, QueueGap]:
    """How closely the GPU runs two queued replays, per process with a steady step (see the
    module doc): the median idle gap of its healthy steps, with fewer than
    :data:`MIN_STEPS` of them the 10th percentile of its stalled steps' launch latency."""
    idle: dict[int, list[np.ndarray]] = {}
    latency: dict[int, list[np.ndarray]] = {}
    for part in _steps(launches):
        healthy = (part["klass"] == "healthy").to_numpy()
        stalled = part["stall"].to_numpy(dtype=bool)
        for proc, at in part.groupby("proc").indices.items():
            v = part["gpu_idle_ns"].to_numpy(dtype=np.float64)[at[healthy[at]]]
            idle.setdefault(int(proc), []).append(v[~np.isnan(v)])
            s = at[stalled[at]]
            lat = part["next_gpu_start_ns"].to_numpy(dtype=np.float64)[s] - \
                part["next_api_start_ns"].to_numpy(dtype=np.float64)[s]
            latency.setdefault(int(proc), []).append(lat[~np.isnan(lat)])
    out = {}
    for proc, parts in idle.items():
        gaps = np.concatenate(parts)
        if len(gaps) >= MIN_STEPS:
            out[proc] = QueueGap(float(np.median(gaps)), len(gaps))
            continue
        lat = np.concatenate(latency[proc])
        out[proc] = QueueGap(float(np.percentile(np.clip(lat, 0, None), 10)), len(lat)) \
            if len(lat) else QueueGap(0.0, 0)
    return out


@dataclass(frozen=True)
class _Step:
    """A process's steady steps in a part of the launches, as the projection reads them."""

    period: np.ndarray
    work: np.ndarray
    host: np.ndarray  # the host's own work: the period less its blocked time
    stall_block: np.ndarray
    stalled: np.ndarray
    peer: np.ndarray  # the process each waited for in collectives (-1: none)
    collective_wait: np.ndarray
    after_stall: np.ndarray  # its replay followed a stalled step (the GPU idle before it)

    @classmethod
    def of(cls, part: pd.DataFrame, at: np.ndarray, before: bool) -> _Step:
        """The steps at positions ``at`` of ``part``, ``before``: whether the step before
        the first of them stalled."""
        def col(c: str) -> np.ndarray:
            values: np.ndarray = part[c].to_numpy(dtype=np.float64)[at]
            return values

        period, blocked = col("period_ns"), col("host_blocked_ns")
        stall_block = col("block_end_ns") - col("block_start_ns")
        stall_block[np.isnan(stall_block)] = 0
        stalled = part["stall"].to_numpy(dtype=bool)[at]
        return cls(period=period, work=col("gpu_work_ns"),
                   host=period - np.where(np.isnan(blocked), 0, blocked),
                   stall_block=stall_block, stalled=stalled,
                   peer=part["waited_for"].to_numpy()[at],
                   collective_wait=col("collective_wait_ns"),
                   after_stall=np.r_[before, stalled[:-1]])


@dataclass
class _Sums:
    """One process's steps under one projection, summed over the parts of the launches."""

    touched: bool = False
    stall_fixed: bool = False  # a relieved step stalled (a fix, not a host that keeps ahead)
    new: float = 0.0  # the projected steps
    gpu: float = 0.0  # the GPU's work and queue gap of each step
    period: float = 0.0  # the measured steps

    def add(self, step: _Step, relieved: np.ndarray, fixed_procs: set[int], q: QueueGap,
            back_to_back: float = 1.0) -> None:
        # a peer that waited for a fixed process in collectives no longer waits
        peer = np.isin(step.peer, list(fixed_procs)) if fixed_procs else \
            np.zeros(len(step.peer), dtype=bool)
        work = step.work - np.where(peer, step.collective_wait, 0)
        # a relieved step's replay, measured after the GPU idled, runs back to back once fixed
        work = np.where(relieved & step.after_stall, work * back_to_back, work)
        # the host's own work per step: a relieved stall's block goes; a relieved launch that
        # did not stall (a launch-bound gap) has a host that keeps ahead, the GPU bounds it; a
        # stall not fixed keeps the whole step (its block is a cause); other waits follow the
        # GPU, and go with it
        own_host = np.where(relieved, np.where(step.stalled, step.period - step.stall_block, 0.0),
                            np.where(step.stalled, step.period, step.host))
        touched = relieved | peer
        self.touched |= bool(touched.any())
        self.stall_fixed |= bool((relieved & step.stalled).any())
        new = np.where(touched, np.minimum(step.period, np.maximum(work + q.ns, own_host)),
                       step.period)
        self.new += float(np.nansum(new))
        self.gpu += float(np.nansum(work + q.ns))
        self.period += float(np.nansum(step.period))

    def rate(self, measured: float, q: QueueGap) -> float | str:
        """The projected launch rate of a process measured at ``measured`` launches/s, or
        why it is not projected."""
        if not self.touched:
            return measured
        if q.steps < MIN_STEPS and (q.steps or self.stall_fixed):  # (none measured, a host
            # that keeps ahead is bounded by the GPU running its replays back to back)
            return (f"too few steps to tell how closely the GPU runs queued replays ({q.steps} "
                    f"measured; {MIN_STEPS} are needed)")
        # the steps right after a stall were short while the host caught up with an idle GPU;
        # fixed, the GPU bounds every step: the whole run takes at least its GPU work
        total = max(self.new, self.gpu)
        if total > self.period * (1 + MODEL_SLACK):
            return (f"the model's GPU time ({total / 1e6:.1f} ms) exceeds the measured steps' "
                    f"({self.period / 1e6:.1f} ms): its queue gap or GPU work does not fit "
                    "this trace")
        return measured * self.period / min(total, self.period) if total else measured


def _projection(got: dict[int, float | str], rates: dict[int, float],
                groups: list[set[int]]) -> Projection:
    """The projected rates of the processes, tensor-parallel groups moving together; withheld
    where a process's is, or where a group's ranks were measured at different rates."""
    why = next((w for w in got.values() if isinstance(w, str)), None)
    for group in groups:
        each = sorted(rates[p] for p in group if rates.get(p))
        if each and each[-1] > each[0] * (1 + LOCKSTEP):
            why = why or (f"ranks of one group measured at different rates "
                          f"({', '.join(f'{r:.1f}' for r in each)} launches/s): they cannot "
                          "all move in lockstep")
    if why:
        return Projection({}, None, None, why)
    out = {p: float(r) for p, r in got.items()}
    for group in groups:  # lockstep: the group goes as fast as its slowest rank
        ranks = [p for p in group if p in out]  # (a part of a trace may hold none)
        for p in ranks:
            out[p] = min(out[r] for r in ranks)
    total = sum(out.values())
    measured = sum(rates.get(p, 0.0) for p in out)
    if not measured:
        return Projection(out, None, None)
    return Projection(out, round(total, 2), round(total / measured, 3))


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
    klasses = L["klass"].astype(str)  # (the rows of the table itself are not copied)
    for klass, idx in after[steady_stalls].groupby(klasses[steady_stalls]).groups.items():
        usual[(klasses == klass) & L["stall"]] = float(np.median(after[idx]))
    slow = (after - usual).clip(lower=0).fillna(0.0).where(L["stall"], 0.0)
    idle = L["gpu_idle_ns"].astype(float)
    cost = (idle - slow).clip(lower=0).where(idle.notna())
    return pd.DataFrame({"host_after_ns": after, "usual_after_ns": usual, "slow_host_ns": slow,
                         "stall_cost_ns": cost}, index=L.index)
