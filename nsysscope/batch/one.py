"""One trace of many, analysed where a worker runs it (a local worker process, a Dask
worker, or this process): its :class:`~nsysscope.model.TraceResult`, and what it gives a job
of several files."""

from __future__ import annotations

import time

import numpy as np

from ..analysis import AnalysisConfig, analyze_file
from ..analysis.job import JobPart
from ..analysis.summarise import steady_values
from ..errors import NsysscopeError
from ..export.db import write_part
from ..model import TraceResult
from .expand import rank_of

#: what a worker sends back for one trace: its result, and its part of a job
Done = tuple[TraceResult, JobPart | None]


def analyze_one(path: str, config: AnalysisConfig | None = None,
                nsys: str | None = None, per_launch_part: str | None = None,
                label: str | None = None) -> TraceResult:
    """Load and analyse one trace; never raises for a bad trace (the error goes in the
    result). Runs in a worker process or on a Dask worker. ``per_launch_part``: also write
    the trace's tables to this new SQLite file (:func:`nsysscope.export.db.write_part`), as
    trace ``label`` (default: ``path``)."""
    return analyze_part(path, config, nsys, per_launch_part, label)[0]


def analyze_part(path: str, config: AnalysisConfig | None = None, nsys: str | None = None,
                 per_launch_part: str | None = None, label: str | None = None,
                 job: bool | None = False) -> tuple[TraceResult, JobPart | None]:
    """:func:`analyze_one`, and what the trace gives a job of several files
    (:class:`~nsysscope.analysis.job.JobPart`): with ``job`` True, always; None, where the
    trace has collectives (a job is recognised by them); False, never."""
    t0 = time.perf_counter()
    result = TraceResult(path=str(path), rank=rank_of(path))
    part = None
    try:
        a = analyze_file(path, config, nsys, events="none", collectives=job is not False)
        if job or (job is None and len(a.trace.collectives)):
            part = JobPart.of(path, a)
        result.rank = rank_of(path, len(a.summary.processes))
        if per_launch_part:
            write_part(per_launch_part, a, trace=label or str(path), rank=result.rank)
    except NsysscopeError as e:
        result.error, result.exit_code = str(e), e.exit_code
    except Exception as e:  # noqa: BLE001 - one broken trace must not sink the others
        result.error, result.exit_code = f"internal error: {type(e).__name__}: {e}", 70
    else:
        result.summary = a.summary
        values = {c: steady_values(a.launch_table, c) for c in ("window_ns", "gpu_idle_ns",
                                                                   "stall")}
        # float64: the pooled p50 of one trace is its own p50 (float32 moved it by 0.01 us)
        result.window_values_us = values["window_ns"].astype(np.float64) / 1e3
        idle = values["gpu_idle_ns"].astype(np.float64)
        result.gpu_idle_values_us = idle / 1e3
        lost = idle[values["stall"].astype(bool)]
        result.lost_us = float(np.nansum(np.clip(lost, 0, None)) / 1e3)
    result.seconds = round(time.perf_counter() - t0, 3)
    return result, part


def part_of(parts: list[str] | None, i: int) -> str | None:
    return parts[i] if parts else None
