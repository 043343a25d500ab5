"""The one result model that reports, the gate and notebooks share.

Everything here is a frozen dataclass of plain values, so ``to_dict()`` is JSON and
``from_dict()`` reads it back: ``nsysscope summarize`` writes a :class:`Summary`, the gate
reads two, and every renderer formats one. Times are microseconds (``*_us``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

#: bump when a field changes meaning; readers refuse a newer major
SCHEMA = "nsysscope.summary/1"

FIXES = {
    "gpu_to_cpu": (
        "Don't read GPU values on the hot path (.item(), .all(), .tolist(), bool(t)): decide on "
        "the CPU from the request parameters (e.g. a CPU-side greedy flag), or copy the value into "
        "pinned memory with non_blocking=True and wait on an event in the next round."),
    "cpu_to_gpu": (
        "Stage host inputs in preallocated pinned buffers and copy with non_blocking=True; a copy "
        "from pageable memory synchronises with the in-flight forward before the next launch."),
    "other_stall": (
        "The host waits for the in-flight launch before queuing the next one. Launch first, then "
        "wait only on the previous round's completion event."),
    "launch_bound": (
        "The host is slower than the GPU: the next replay is issued after the GPU went idle. "
        "Trim per-step CPU work, or move it off the launching thread."),
}


@dataclass(frozen=True)
class Percentiles:
    p10: float | None
    p50: float | None
    p90: float | None

    @classmethod
    def of(cls, values_us: np.ndarray) -> "Percentiles":
        v = np.asarray(values_us, dtype=float)
        v = v[~np.isnan(v)]
        if not len(v):
            return cls(None, None, None)
        p = np.percentile(v, [10, 50, 90])
        return cls(*(round(float(x), 2) for x in p))


@dataclass(frozen=True)
class SourceLine:
    """The Python line that caused a stall site (from nsys Python sampling)."""

    file: str
    line: int
    function: str
    samples: int
    agreement: float  # share of the samples inside the site's blocks that name this line
    text: str | None = None


@dataclass(frozen=True)
class StallSite:
    """Stalls with the same class, phase, op and API chain: one thing to fix."""

    klass: str
    count: int
    lost_us: float  # GPU idle time after these launches
    share: float  # of all steady-state stalls
    phase: str | None
    op: str | None
    api_chain: str
    nvtx_path: str
    thread: str
    mean_block_us: float
    example_launch: int
    fix: str
    source: SourceLine | None = None

    @property
    def where(self) -> str:
        """Where to look, most specific first: the source line, else phase and op."""
        parts = []
        if self.source:
            parts.append(f"{self.source.file}:{self.source.line}")
        if self.phase:
            parts.append(f"phase '{self.phase}'")
        if self.op:
            parts.append(self.op)
        return ", ".join(parts) or self.nvtx_path or "(no NVTX range)"


@dataclass(frozen=True)
class TraceInfo:
    path: str
    nsys_version: str
    schema_version: str
    gpus: tuple[str, ...]
    graph_trace: str


@dataclass(frozen=True)
class Distributions:
    """Per-launch steady-state values the gate compares (sampled when the trace is large)."""

    window_us: list[float | None]
    gpu_idle_us: list[float | None]
    klass: list[str]
    sampled_from: int


@dataclass(frozen=True)
class Summary:
    trace: TraceInfo
    verdict: str
    overlap_ok: bool
    launches: int
    steady_launches: int
    warmup_launches: int
    stalls: dict[str, int]  # steady state, per stall class
    classes: dict[str, int]  # steady state, every class
    no_wait: int  # steady launches the host never had to wait for
    window_us: Percentiles
    gpu_gap_us: Percentiles  # idle time between consecutive replays
    gpu_busy: float | None
    launches_per_s: float | None
    steps_per_s: float | None  # NVTX "step N" ranges per second, when the trace has them
    sites: list[StallSite]
    notes: list[str]
    config: dict[str, Any]
    distributions: Distributions | None = None
    schema: str = SCHEMA

    def _repr_html_(self) -> str:
        from .render.html import summary_fragment
        return summary_fragment(self)

    # -- serialisation ---------------------------------------------------------------------
    def to_dict(self, with_distributions: bool = False) -> dict[str, Any]:
        d = asdict(self)
        if not with_distributions:
            d.pop("distributions")
        return d

    def to_json(self, with_distributions: bool = False, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(with_distributions), indent=indent)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Summary":
        d = dict(d)
        if not str(d.get("schema", "")).startswith("nsysscope.summary/"):
            raise ValueError("not an nsysscope summary (missing 'schema')")
        d["trace"] = TraceInfo(**{**d["trace"], "gpus": tuple(d["trace"]["gpus"])})
        d["window_us"] = Percentiles(**d["window_us"])
        d["gpu_gap_us"] = Percentiles(**d["gpu_gap_us"])
        d["sites"] = [StallSite(**{**s, "source": SourceLine(**s["source"]) if s.get("source") else None})
                      for s in d["sites"]]
        if d.get("distributions"):
            d["distributions"] = Distributions(**d["distributions"])
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})
