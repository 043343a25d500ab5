"""Where stalls are and how long things took: a stall site (:class:`StallSite`, with the
Python line behind it, :class:`SourceLine`), a pattern that will stall next
(:class:`LatentSite`), and the percentiles every per-launch time is summarised by
(:class:`Percentiles`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .schema import Record, extra_field, optional

#: where a stall is when the trace has no NVTX range around it (and no source line)
NO_NVTX = "(no NVTX range)"
#: where it is when the ranges around it are steps only (``step 1058``), no phase: the first
#: launch's step named every launch's, and told the gate's sites apart by step number
NO_PHASE = "(no NVTX phase)"


@dataclass(frozen=True)
class Percentiles(Record):
    """p10, p50 and p90 of a per-launch time, in microseconds (None: no value)."""

    p10: float | None
    p50: float | None
    p90: float | None
    extra: dict[str, Any] = extra_field()

    @classmethod
    def of(cls, values_us: Any) -> Percentiles:
        v = np.asarray(values_us, dtype=float)
        v = v[~np.isnan(v)]
        if not len(v):
            return cls(None, None, None)
        p10, p50, p90 = (round(float(x), 2) for x in np.percentile(v, [10, 50, 90]))
        return cls(p10, p50, p90)


#: why a frame has no line: torch.profiler records each Python function's code object
#: (``file.py(12): f``, 12 its first line), and line 0 where there is none (module-level code)
NO_LINE = "torch.profiler records no line"


def source_location(file: str, line: int, function: str | None = None) -> str:
    """Where a frame is, in words: ``file.py:12``; a frame of line 0 (no line: :data:`NO_LINE`)
    by file and function: ``module-level code in file.py (torch.profiler records no line)``,
    never ``file.py:0``."""
    if line > 0:
        return f"{file}:{line}"
    what = "module-level code" if not function or function == "<module>" else function
    return f"{what} in {file} ({NO_LINE})"


@dataclass(frozen=True)
class SourceLine(Record):
    """The Python line that caused a stall site (from nsys Python sampling, or the
    torch.profiler frame around the blocking call)."""

    file: str
    line: int  # 0: the profiler recorded none (see :data:`NO_LINE`)
    function: str
    samples: int
    agreement: float  # fraction 0..1 of the samples inside the site's blocks that name this line
    text: str | None = None
    extra: dict[str, Any] = extra_field()

    @property
    def location(self) -> str:
        """``file.py:12``, or for a frame without a line its file and function in words
        (:func:`source_location`)."""
        return source_location(self.file, self.line, self.function)


@dataclass(frozen=True)
class StallSite(Record):
    """Stalls with the same class, phase, op and API chain: one thing to fix."""

    klass: str  # a LaunchClass value
    count: int
    lost_us: float  # GPU idle time after these launches
    share: float  # fraction 0..1 of all steady-state stalls
    phase: str | None
    op: str | None
    api_chain: str
    nvtx_path: str
    thread: str
    mean_block_us: float
    example_launch: int
    fix: str
    source: SourceLine | None = None
    pid: int | None = None  # the process whose launches stall here
    mean_polls: float = 0.0  # tries per wait when the host polls (cudaEventQuery loops)
    #: the trace's launch rate with this site's stalls fixed, over the measured one (the
    #: model: docs/report.md, "How much will the fix buy?"); None for launch-bound gaps
    speedup_if_fixed: float | None = None
    #: the trace's launch rate with this site's stalls fixed (what ``speedup_if_fixed``
    #: multiplies, rounded as ``if_fixed.launches_per_s`` is, so that the two agree)
    launches_per_s_if_fixed: float | None = None
    extra: dict[str, Any] = extra_field()
    nested = {"source": optional(SourceLine.from_dict)}

    @property
    def where(self) -> str:
        """Where to look, most specific first: the source line, else phase and op; without
        them, that no phase encloses it (:data:`NO_PHASE`) or no range at all."""
        parts = []
        if self.source:
            parts.append(self.source.location)
        if self.phase:
            parts.append(f"phase '{self.phase}'")
        if self.op:
            parts.append(self.op)
        return ", ".join(parts) or (NO_PHASE if self.nvtx_path else NO_NVTX)


@dataclass(frozen=True)
class LatentSite(Record):
    """A pattern on the hot path that is not (yet) costing overlap: a pageable upload
    (``cpu_to_gpu``) or a synchronous readback (``gpu_to_cpu``) in steps that stalled
    elsewhere first, or in an engine whose host is the bottleneck anyway. Fix the current stall
    and this one is next."""

    kind: str  # the LaunchClass it would cause
    calls: int
    steps: int  # steady steps with at least one such call
    steady_steps: int
    phase: str | None
    op: str | None
    api_chain: str
    mean_call_us: float  # host time of the call itself
    pid: int | None = None
    extra: dict[str, Any] = extra_field()

    @property
    def where(self) -> str:
        parts = [f"phase '{self.phase}'"] if self.phase else []
        if self.op:
            parts.append(self.op)
        return ", ".join(parts) or NO_NVTX
