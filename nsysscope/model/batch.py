"""The result of analysing many traces at once (``nsysscope report DIR_OR_GLOB...``).

``BatchResult.to_dict()`` is the ``nsysscope.many/1`` JSON. Wall-clock seconds are measured
but written only when asked for (``timed``): by default the same traces give the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .schema import check_schema, to_plain
from .summary import Summary, counted_steps

BATCH_SCHEMA = "nsysscope.many/1"


def _empty() -> np.ndarray:
    return np.empty(0, np.float64)


@dataclass
class TraceResult:
    """What one worker sends back: the summary, or the error that stopped the analysis."""

    path: str
    rank: int | None
    summary: Summary | None = None
    error: str | None = None
    exit_code: int = 0
    seconds: float | None = None  # wall time of this trace's load and analysis
    lost_us: float = 0.0  # GPU idle time after the steady-state stalls
    #: every steady launch's effective overlap window and GPU idle gap (us), for exact
    #: percentiles over all traces; not written to JSON
    window_values_us: np.ndarray = field(default_factory=_empty)
    gpu_idle_values_us: np.ndarray = field(default_factory=_empty)

    @property
    def ok(self) -> bool:
        return self.summary is not None

    @property
    def stalled(self) -> int:
        return sum(self.summary.stalls.values()) if self.summary is not None else 0

    @property
    def stall_share(self) -> float:
        """Fraction 0..1 of this trace's steady launches that stalled, or of its steady steps
        where a step is several launches (piecewise CUDA graphs), as the verdict counts."""
        s = self.summary
        if s is None:
            return 0.0
        b = counted_steps(s)
        if b:
            return b.stalled / b.steady
        return self.stalled / s.steady_launches if s.steady_launches else 0.0

    @property
    def label(self) -> str:
        return str(self.rank) if self.rank is not None else "-"

    def to_dict(self, timed: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {"path": self.path, "rank": self.rank,
                             "seconds": self.seconds if timed else None}
        if self.summary is not None:
            d.update(stall_share=round(self.stall_share, 4), lost_us=round(self.lost_us, 1),
                     summary=self.summary.to_dict(with_distributions=False))
        else:
            d.update(error=self.error, exit_code=self.exit_code)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TraceResult:
        s = d.get("summary")
        return cls(path=d["path"], rank=d.get("rank"),
                   summary=Summary.from_dict(s) if s else None, error=d.get("error"),
                   exit_code=int(d.get("exit_code", 0)), seconds=d.get("seconds"),
                   lost_us=float(d.get("lost_us", 0.0)))


@dataclass
class Aggregate:
    """All traces together: counts summed, percentiles over every steady launch."""

    traces: int
    analysed: int
    failed: int
    launches: int
    steady_launches: int
    stalls: dict[str, int]
    stall_share: float  # fraction 0..1 of all steady launches
    lost_us: float
    #: pooled over every steady launch where the traces are the ranks of one job; None for
    #: unrelated traces, whose pooled percentile describes none of them
    window_p50_us: float | None
    gpu_idle_p50_us: float | None
    gpu_busy_mean: float | None  # fraction 0..1
    launches_per_s_mean: float | None
    worst: TraceResult | None  # the trace that stalls most
    worst_line: str = ""  # one sentence on it

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {k: to_plain(getattr(self, k)) for k in self.__dataclass_fields__
                             if k not in ("worst", "worst_line")}
        w = self.worst
        d["worst"] = None if w is None else {"path": w.path, "rank": w.rank,
                                             "stall_share": round(w.stall_share, 4),
                                             "lost_us": round(w.lost_us, 1)}
        d["worst_line"] = self.worst_line
        return d


@dataclass
class BatchResult:
    """Many traces analysed: one result per trace, in the order given, and their aggregate."""

    traces: list[TraceResult]
    aggregate: Aggregate
    workers: int = 1  # local worker processes (1: analysed in this process)
    scheduler: str | None = None  # the Dask scheduler's address, when one was used
    seconds: float | None = None  # wall time of the whole batch
    timed: bool = False  # write the wall times
    schema: str = BATCH_SCHEMA

    @property
    def exit_code(self) -> int:
        """0 when every trace was analysed, else the first failed trace's code."""
        failed = [r for r in self.traces if not r.ok]
        return failed[0].exit_code if failed else 0

    def to_dict(self) -> dict[str, Any]:
        return {"schema": self.schema,
                "traces": [r.to_dict(self.timed) for r in self.traces],
                "aggregate": self.aggregate.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BatchResult:
        """Read ``--format json`` output back (the per-launch arrays are not in it)."""
        check_schema(d, BATCH_SCHEMA, "many-trace report")
        traces = [TraceResult.from_dict(t) for t in d["traces"]]
        a = dict(d["aggregate"])
        worst = a.pop("worst")
        line = a.pop("worst_line", "")
        match = next((t for t in traces if worst and t.path == worst["path"]), None)
        return cls(traces=traces, aggregate=Aggregate(**a, worst=match, worst_line=line),
                   schema=d["schema"])
