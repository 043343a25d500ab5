"""The verdict line, the notes that qualify it, and the check that the profiler kept the data."""

from __future__ import annotations

import pandas as pd

from ..model import StallSite, Summary
from ..trace.load import Trace
from ..trace.python_samples import NO_PAYLOAD, NO_STACKS, STACKS_HINT, PythonSamples
from .config import AnalysisConfig


def data_loss_reason(trace: Trace) -> str | None:
    """Why the trace cannot be trusted, or None. nsys records dropped events in
    DIAGNOSTIC_EVENT; old versions on new CUDA silently stop tracing, which shows as CUDA
    activity that ends long before the capture and the program's NVTX ranges do."""
    lost = [d for d in trace.meta.diagnostics if any(
        w in d.lower() for w in ("lost", "dropped", "discard", "overflow", "not supported"))]
    if lost:
        return f"the profiler reports lost data: {lost[0]}"
    if trace.api.empty and trace.gpu_ops.empty:
        return None
    cuda_end = max(float(trace.api["end_ns"].max()) if len(trace.api) else 0.0,
                   float(trace.gpu_ops["end_ns"].max()) if len(trace.gpu_ops) else 0.0)
    nv = trace.nvtx
    later = nv[nv["start_ns"] > cuda_end]
    if len(later) >= 10 and len(later) >= 0.5 * len(nv):
        return (f"CUDA tracing stops {(cuda_end - trace.meta.capture_start_ns) / 1e9:.2f} s into "
                f"the capture, yet {len(later)} of {len(nv)} NVTX ranges follow with no CUDA "
                f"activity: the profiler (nsys {trace.meta.nsys_version}) lost the GPU data. "
                "Profile again with an nsys that supports this CUDA version.")
    return None


def notes_for(trace: Trace, launches: pd.DataFrame, python_samples: PythonSamples | None = None,
              sites: list[StallSite] | None = None) -> list[str]:
    """What the reader should know about how far to trust this report."""
    notes = []
    line = python_samples_note(python_samples, sites)
    if line:
        notes.append(line)
    m = trace.meta
    if m.format == "kineto":
        notes.append("torch.profiler traces have no sync-to-event records: event waits were "
                     "matched to launches by timing alone")
    elif not (m.has_sync_records and m.has_event_records):
        notes.append("no sync-to-event records in this export (needs nsys >= 2024 with "
                     "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION.eventSyncId and CUDA_EVENT): event "
                     "waits were matched to launches by timing alone")
    if not m.has_nvtx:
        notes.append("no NVTX ranges: stalls cannot be attributed to loop phases; add "
                     "torch.cuda.nvtx ranges around schedule/launch/sample/post")
    missing = int(launches["gpu_end_ns"].isna().sum())
    if missing:
        notes.append(f"{missing} of {len(launches)} graph launches have no GPU work in the trace "
                     "(profiler buffer loss, or capture stopped mid-replay); they are excluded")
    lost = data_loss_reason(trace)
    if lost:
        notes.append(lost)
    return notes


def python_samples_note(samples: PythonSamples | None, sites: list[StallSite] | None) -> str | None:
    """One line when stall sites could not be given a Python source line, saying why."""
    stalls = [s for s in (sites or []) if s.klass != "launch_bound"]
    if not stalls:
        return None
    # samples None with named sites: summarised again from launches attributed before
    have = samples.ok if samples is not None else any(s.source for s in stalls)
    if not have:
        if samples is not None and samples.status == NO_STACKS:
            return f"no Python stacks: stalls are attributed to ranges and op only; {STACKS_HINT}"
        if samples is not None and samples.status == NO_PAYLOAD:
            return ("this export has Python samples but no JSON payloads: stalls are attributed "
                    "to NVTX phase and op only; re-export with "
                    "`nsys export --type sqlite --include-json true`")
        return ("no Python samples: stalls are attributed to NVTX phase and op only; to name "
                "the source line of each stall, capture with `nsys profile "
                "--python-sampling=true --python-sampling-frequency=2000` and export with "
                "`nsys export --type sqlite --include-json true`")
    unnamed = [s for s in stalls if s.source is None]
    if unnamed:
        return (f"{len(unnamed)} of {len(stalls)} stall sites have no source line: no Python "
                "sample of the blocking thread fell inside their blocks with a frame outside "
                "the library paths (AnalysisConfig.library_paths)")
    return None


def verdict_line(s: Summary, cfg: AnalysisConfig) -> tuple[bool, str]:
    n = s.steady_launches
    stalled = sum(s.stalls.values())
    if not n:
        return False, "no steady-state launches to judge"
    if stalled / n > cfg.stall_fraction_broken:
        top = s.sites[0] if s.sites else None
        where = f" at {top.where}" if top and top.klass != "launch_bound" else ""
        kind = max(s.stalls, key=s.stalls.get)
        return False, (f"OVERLAP BROKEN: {stalled}/{n} steady launches stall "
                       f"({kind}{where}); median overlap window {s.window_us.p50} us")
    lb = s.classes.get("launch_bound", 0)
    if lb / n > cfg.stall_fraction_broken and (s.gpu_busy or 0) < 0.9:
        return True, (f"overlap works, but the host is launch-bound on {lb}/{n} launches "
                      f"(GPU idle p50 {s.gpu_gap_us.p50} us between replays)")
    return True, (f"overlap healthy: {n - stalled}/{n} steady launches queued ahead of the GPU; "
                  f"GPU busy {s.gpu_busy:.1%}" if s.gpu_busy is not None else
                  f"overlap healthy: {n - stalled}/{n} steady launches queued ahead of the GPU")
