"""The headline of a summary: the report's first line, and the numbers it is made of."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .schema import Record, extra_field


@dataclass(frozen=True)
class Headline(Record):
    """The report's first line, and the numbers it is made of: the cause that costs the GPU
    most idle time (the top stall site, or the launch-bound gaps taken together), what share
    of the GPU's time it costs, and what removing it is projected to buy. ``text`` is the line
    itself; where nothing is worth naming it is the verdict."""

    text: str
    #: the cause's class: a stall class (``gpu_to_cpu``...) or ``launch_bound``; None where
    #: the steady state has neither
    klass: str | None
    where: str | None  # the stall site's place (``sites[].where``); None for launch-bound gaps
    launches: int  # the steady launches it holds
    lost_us: float  # the GPU idle time after them
    #: ``lost_us`` over the GPU time of the steady state (each process's span of steady
    #: replays, added); None where there is no span
    idle_frac: float | None
    #: the launch rate projected without it over the measured one (for launch-bound gaps an
    #: upper bound: a host that keeps ahead of the GPU); None where no rate was measured
    speedup: float | None
    launches_per_s_if_fixed: float | None
    #: False when the projected gain (or, without one, the idle share) is below what separates
    #: two healthy captures of one program: the line then says "not worth chasing first"
    worth_chasing: bool
    extra: dict[str, Any] = extra_field()
