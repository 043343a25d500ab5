"""The headline: the report's first line names what costs the GPU most, and what removing it buys.

The verdict says whether overlap holds; it does not say whether that matters. A pageable
upload that breaks overlap on every step can cost 1 % of the GPU's time, and a host that comes
late can cost more than the stalls the verdict names. The headline ranks the causes of GPU
idle by their cost, the GPU idle time after their launches:

* the top stall site (:attr:`Summary.sites` come biggest projected gain first), and
* the launch-bound gaps taken together (the host came late: no one place to fix, one cause),

names the costlier, with its share of the GPU's time and its projected gain
(:mod:`.projection`; for launch-bound gaps an upper bound, a host that keeps ahead of the
GPU), and says plainly when that gain is too small to chase first (:data:`NOT_WORTH_BELOW`).
Where nothing is worth naming on a trace whose overlap holds, the headline is the verdict.
The line is worded in ``render/headline.py`` from these values.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..model import Headline, LaunchClass, Summary, registry

#: a projected gain below 2 % (or, where no gain is projected, a cause costing less than 2 % of
#: the GPU's time) is "not worth chasing first": that much separates healthy captures of one
#: program, with no overlap fault at all. The bundled healthy H200 captures leave the GPU idle
#: 0.4-1.8 % of its time (GPU busy 98.2-99.6 %, 17 captures over five device sessions: 60 to
#: 5000 steps, five separate runs, TP=2, piecewise graphs, torch.profiler); five separate
#: healthy runs of one session span 0.5 % in launch rate (303.8-305.4/s); and the projection
#: lands within 1.2 % of the healthy capture's rate on 19 of its 24 validation pairs
#: (docs/report.md, "How much will the fix buy?"). The case-2 samples fall on both sides:
#: 1.5-1.7 % on the 60-step captures (nsys and torch.profiler), 0.4 % with 24 piecewise graphs
#: per step, 2.3-5.1 % on the 150- to 300-step ones.
NOT_WORTH_BELOW = 0.02


@dataclass(frozen=True)
class LateCost:
    """The launch-bound gaps of a trace taken together: how many steady launches came after
    the GPU went idle, the GPU idle time after them, and the projection with a host that
    keeps ahead (None where no rate was measured)."""

    launches: int
    lost_us: float
    speedup: float | None
    launches_per_s_if_fixed: float | None


@dataclass(frozen=True)
class _Cause:
    klass: str
    where: str | None
    launches: int
    lost_us: float
    speedup: float | None
    rate_if_fixed: float | None


def headline(s: Summary, late: LateCost, gpu_span_us: float | None) -> Headline:
    """The headline of ``s`` (its verdict and sites made), given its launch-bound gaps
    (``late``) and the GPU time of its steady state (each process's span of steady replays,
    added)."""
    cause = _costliest(s, late)
    if cause is None:
        h = Headline(text="", klass=None, where=None, launches=0, lost_us=0.0, idle_frac=None,
                     speedup=None, launches_per_s_if_fixed=None, worth_chasing=False)
    else:
        idle = round(cause.lost_us / gpu_span_us, 4) if gpu_span_us else None
        h = Headline(text="", klass=cause.klass, where=cause.where, launches=cause.launches,
                     lost_us=round(cause.lost_us, 1), idle_frac=idle, speedup=cause.speedup,
                     launches_per_s_if_fixed=cause.rate_if_fixed,
                     worth_chasing=_worth(cause.speedup, idle))
    return replace(h, text=registry.words().headline(h, s))  # worded in render/headline.py


def _costliest(s: Summary, late: LateCost) -> _Cause | None:
    """The top stall site or the launch-bound gaps, whichever left the GPU idle longer."""
    stalls = [x for x in s.sites if x.klass != LaunchClass.LAUNCH_BOUND]
    causes = [_Cause(x.klass, x.where, x.count, x.lost_us, x.speedup_if_fixed,
                     x.launches_per_s_if_fixed) for x in stalls[:1]]
    if late.launches:
        causes.append(_Cause(LaunchClass.LAUNCH_BOUND.value, None, late.launches,
                             late.lost_us, late.speedup, late.launches_per_s_if_fixed))
    return max(causes, key=lambda c: c.lost_us, default=None)  # ties: the stall


def _worth(speedup: float | None, idle_frac: float | None) -> bool:
    """Whether a cause is worth chasing first (:data:`NOT_WORTH_BELOW`)."""
    if speedup is not None:
        return speedup - 1 >= NOT_WORTH_BELOW
    return idle_frac is not None and idle_frac >= NOT_WORTH_BELOW
