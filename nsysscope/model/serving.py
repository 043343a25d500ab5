"""What a server's trace holds besides its steady state: its start-up, its idle periods, and
its graph execs (batch-size buckets); summary 1.8. The analysis: ``nsysscope.analysis.startup``,
``.idle`` and ``.serving``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .schema import Record, extra_field


@dataclass(frozen=True)
class Startup(Record):
    """The launches of a server's start-up (graph capture and each graph's check replay, each
    waited on at once), left out of the steady state and of warm-up."""

    launches: int  # the start-up launches (check replays)
    graphs: int  # the graph execs they replayed
    #: from the start of the trace to the first launch after start-up (weights, warm-up
    #: passes, graph capture, the checks): what the steady state leaves out
    span_us: float
    extra: dict[str, Any] = extra_field()


@dataclass(frozen=True)
class IdlePeriods(Record):
    """A server's idle periods: quiet gaps (no CUDA call, no GPU work) after a launch the host
    had already waited on, at least ``threshold_us`` long (a number of steps). The launch
    before each is not judged, and the periods are left out of the serving time over which
    ``gpu_busy`` and ``launches_per_s`` are measured."""

    periods: int
    total_us: float
    longest_us: float
    #: ``total_us`` over the trace's time span (the capture), 0..1; None without a span
    share: float | None
    #: the step period the threshold is made from: the time between consecutive steps'
    #: starts (launch bursts), p10/p50/p90 in microseconds (the process with most idle time)
    step_us: tuple[float, float, float]
    threshold_us: float  # a quiet gap this long is idle
    extra: dict[str, Any] = extra_field()
    nested = {"step_us": tuple}


@dataclass(frozen=True)
class GraphExec(Record):
    """One executable graph a process replayed (a server captures one per batch-size bucket)
    and how its steady launches went. ``graph_exec``: the trace's id of it (torch.profiler
    names none: a number per distinct sequence of kernels)."""

    pid: int
    graph_exec: int
    launches: int  # every launch of it
    steady: int
    stalls: int  # steady launches that stalled
    launch_bound: int  # steady launches after which the GPU idled past the threshold
    gpu_us: float | None  # its replays' GPU time, median
    window_us: float | None  # the overlap window of its steady launches, median
    gpu_gap_us: float | None  # the GPU idle gap after its steady launches, median
    extra: dict[str, Any] = extra_field()
