"""The verdict line, the notes that qualify it, and the check that the profiler kept the data."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..model import Note, ProcessSummary, StallSite, Summary, Verdict, counted_steps
from ..trace.load import Trace
from ..trace.python_samples import NO_PAYLOAD, NO_STACKS, PythonSamples
from .collectives import groups_note
from .config import AnalysisConfig
from .stored import RowStore, as_rows, steady_parts


def data_loss_reason(trace: Trace) -> str | None:
    """Why the trace cannot be trusted, or None: the refusal of a trace with no launch to
    analyse (:func:`data_loss`, said)."""
    lost = data_loss(trace)
    if lost is None:
        return None
    v = lost.values
    if lost.code == "profiler_lost_data":
        return f"the profiler reports lost data: {v['diagnostic']}"
    return (f"CUDA tracing stops {v['after_s']:.2f} s into the capture, yet {v['later']} of "
            f"{v['ranges']} NVTX ranges follow with no CUDA activity: the profiler (nsys "
            f"{v['nsys_version']}) lost the GPU data. Profile again with an nsys that supports "
            "this CUDA version.")


def data_loss(trace: Trace) -> Note | None:
    """The note that the trace cannot be trusted, or None. nsys records dropped events in
    DIAGNOSTIC_EVENT; old versions on new CUDA silently stop tracing, which shows as CUDA
    activity that ends long before the capture and the program's NVTX ranges do."""
    lost = [d for d in trace.meta.diagnostics if any(
        w in d.lower() for w in ("lost", "dropped", "discard", "overflow", "not supported"))]
    if lost:
        return Note("profiler_lost_data", {"diagnostic": lost[0]})
    if trace.api.empty and trace.gpu_ops.empty:
        return None
    cuda_end = max(float(trace.api["end_ns"].max()) if len(trace.api) else 0.0,
                   float(trace.gpu_ops["end_ns"].max()) if len(trace.gpu_ops) else 0.0)
    nv = trace.nvtx
    later = nv[nv["start_ns"] > cuda_end]
    if len(later) >= 10 and len(later) >= 0.5 * len(nv):
        return Note("cuda_tracing_stopped", {
            "after_s": (cuda_end - trace.meta.capture_start_ns) / 1e9, "later": len(later),
            "ranges": len(nv), "nsys_version": trace.meta.nsys_version})
    return None


def notes_for(trace: Trace, launches: pd.DataFrame | RowStore,
              python_samples: PythonSamples | None = None,
              sites: list[StallSite] | None = None) -> list[Note]:
    """What the reader should know about how far to trust this report."""
    n, missing, procs, groups = 0, 0, set(), []
    for part in as_rows(launches).chunks(["gpu_end_ns", "proc", "collective_group"]):
        n += len(part)
        missing += int(part["gpu_end_ns"].isna().sum())
        procs.update(pd.unique(part["proc"]).tolist())
        groups.append(part.loc[part["collective_group"] >= 0, ["collective_group", "proc"]]
                      .drop_duplicates())
    m = trace.meta
    notes = [python_samples_note(python_samples, sites, m.has_nvtx)]
    if not (m.has_sync_records and m.has_event_records):
        notes.append(Note("no_sync_records", {"lacking": m.profiler.without_sync_records}))
    if not m.has_nvtx:
        notes.append(Note("no_nvtx"))
    if missing:
        notes.append(Note("launches_without_gpu_work", {"missing": missing, "launches": n}))
    notes.append(data_loss(trace))
    notes.append(groups_note(pd.concat(groups)) if groups else None)
    if not m.has_graph_nodes and len(procs) > 1:
        notes.append(Note("graph_traced_ranks"))
    notes.append(negative_windows_note(launches))
    return [x for x in notes if x is not None] + list(m.reader_notes)


def negative_windows_note(launches: pd.DataFrame | RowStore) -> Note | None:
    """What a negative overlap window means, where steady launches have one (a p10 of -91 us
    was printed without a word): the host wait on the launch began before its launch call
    returned, so on another thread than the launching one."""
    n, low, other = 0, 0.0, 0
    for part in steady_parts(as_rows(launches), ["window_ns", "tid", "block_tid"]):
        w = part["window_ns"].to_numpy(dtype=np.float64)
        neg = w < 0  # (NaN: no wait, compares False)
        if neg.any():
            n += int(neg.sum())
            low = min(low, float(w[neg].min()))
            other += int((part["block_tid"].to_numpy()[neg] != part["tid"].to_numpy()[neg]).sum())
    if not n:
        return None
    return Note("negative_windows", {"launches": n, "lowest_us": low / 1e3,
                                     "other_thread": other})


def python_samples_note(samples: PythonSamples | None, sites: list[StallSite] | None,
                        has_nvtx: bool = True) -> Note | None:
    """The note when stall sites could not be given a Python source line, saying why (and,
    with no NVTX ranges either, that only the API calls name a stall)."""
    stalls = [s for s in (sites or []) if s.klass != "launch_bound"]
    if not stalls:
        return None
    # samples None with named sites: summarised again from launches attributed before
    have = samples.ok if samples is not None else any(s.source for s in stalls)
    if not have:
        code = "no_python_stacks" if samples is not None and samples.status == NO_STACKS else \
            "no_python_payloads" if samples is not None and samples.status == NO_PAYLOAD else \
            "no_python_samples"
        return Note(code, {"has_nvtx": has_nvtx})
    unnamed = [s for s in stalls if s.source is None]
    if unnamed:
        return Note("sites_without_source", {"unnamed": len(unnamed), "stalls": len(stalls)})
    return None


def verdict_line(s: Summary, cfg: AnalysisConfig) -> tuple[bool, Verdict]:
    """Whether overlap holds, and the verdict that says so, as values (worded in
    ``render/verdict.py``). With several processes, it names the process that stalls most and
    the ranks that wait for it."""
    if len(s.processes) > 1:
        return _several(s, cfg)
    if not s.steady_launches:
        return False, Verdict("idle")
    if _stalled_share(s) > cfg.stall_fraction_broken:
        return False, _broken(s)
    if s.processes and s.processes[0].status == "waits_for_peer":  # a rank whose peers'
        # traces are not in the input: its own launches are on time
        return False, Verdict("waits_for_peer", processes=[0])
    if _launch_bound_share(s) > cfg.stall_fraction_broken and (s.gpu_busy or 0) < 0.9:
        return True, _launch_bound(s, idle=True)
    return True, _healthy(s, cfg)


def _healthy(s: Summary | ProcessSummary, cfg: AnalysisConfig) -> Verdict:
    """How many steady launches queued ahead of the GPU, and how busy it was. Where most
    launches came after the GPU idled past a threshold below the gaps every replay leaves
    (``--launch-bound-us 5``), the GPU still busy: those launches and that threshold, not
    "0/293 queued" beside "launch-bound gaps 293", which read as a fault."""
    lb = s.classes.get("launch_bound", 0)
    queued = s.steady_launches - sum(s.stalls.values()) - lb  # launch-bound: the next launch
    # came after the GPU idled
    if lb > queued:
        return replace(_launch_bound(s, idle=True), case="healthy", gpu_busy=s.gpu_busy,
                       idle_over_us=cfg.launch_bound_gap_us)
    return Verdict("healthy", count=queued, of=s.steady_launches, gpu_busy=s.gpu_busy)


def _stalled_share(s: Summary | ProcessSummary) -> float:
    """The share of steady launches that stall, or of steady steps where a step is several
    launches (piecewise CUDA graphs: only a step's last launch is followed by the block that
    stalls, so a stall on every step would read as 1/N of the launches; :class:`Bursts`)."""
    b = counted_steps(s)
    return b.stalled / b.steady if b else sum(s.stalls.values()) / s.steady_launches


def _launch_bound_share(s: Summary | ProcessSummary) -> float:
    """The share of steady launches, or steps (as :func:`_stalled_share`), after which the GPU
    idled past the launch-bound threshold without a stall."""
    b = counted_steps(s)
    return b.launch_bound / b.steady if b else s.classes.get("launch_bound", 0) / s.steady_launches


def _launch_bound(s: Summary | ProcessSummary, idle: bool) -> Verdict:
    """The launch-bound launches, or steps where a step is several launches (the per-launch
    idle gaps are then mostly the pieces'); ``idle``: with the GPU's idle gap between
    replays (launches only)."""
    b = counted_steps(s)
    if b:
        return Verdict("launch_bound", unit="steps", count=b.launch_bound, of=b.steady,
                       launches_per_step=b.launches_p50)
    return Verdict("launch_bound", count=s.classes.get("launch_bound", 0),
                   of=s.steady_launches, idle_us=s.gpu_gap_us.p50 if idle else None)


def _broken(s: Summary | ProcessSummary) -> Verdict:
    """The steady launches that stall (in steps where a step is several launches), the class
    and the place of the costliest site, and the median overlap window."""
    top = s.sites[0] if s.sites else None
    # the class of the site that costs most (sites come biggest gain first), not the class
    # with most launches: that named other_stall beside a gpu_to_cpu site's line
    stall = top is not None and top.klass != "launch_bound"
    kind = top.klass if top is not None and stall else max(s.stalls, key=lambda k: s.stalls[k])
    b = counted_steps(s)
    if b:
        return Verdict("stalls", unit="steps", count=b.stalled, of=b.steady, klass=kind,
                       site=0 if stall else None, launches_per_step=b.launches_p50,
                       window_us=b.window_us.p50)
    return Verdict("stalls", count=sum(s.stalls.values()), of=s.steady_launches, klass=kind,
                   site=0 if stall else None, window_us=s.window_us.p50)


def process_verdict(p: ProcessSummary, cfg: AnalysisConfig) -> tuple[str, Verdict]:
    """A process's status (``stalls``, ``waits_for_peer``, ``launch_bound``, ``healthy``, or
    ``idle`` without steady launches) and its verdict as values. A rank whose own launches
    are on time but whose GPU spins in collectives for a slower peer waits for that peer: it
    is neither stalled nor healthy."""
    if not p.steady_launches:
        return "idle", Verdict("idle")
    if _stalled_share(p) > cfg.stall_fraction_broken:
        return "stalls", _broken(p)
    wait = p.collective_wait_us.p50 or 0.0
    period_us = 1e6 / p.launches_per_s if p.launches_per_s else None
    if p.waits_for is not None and wait >= cfg.peer_wait_us and \
            (period_us is None or wait >= cfg.peer_wait_fraction * period_us):
        return "waits_for_peer", Verdict("waits_for_peer", wait_us=wait)
    if _launch_bound_share(p) > cfg.stall_fraction_broken and (p.gpu_busy or 0) < 0.9:
        return "launch_bound", _launch_bound(p, idle=False)
    return "healthy", _healthy(p, cfg)


def _several(s: Summary, cfg: AnalysisConfig) -> tuple[bool, Verdict]:
    procs = s.processes
    stalling = sorted((i for i, p in enumerate(procs) if p.status == "stalls"),
                      key=lambda i: -sum(site.lost_us for site in procs[i].sites))
    waiting = [i for i, p in enumerate(procs) if p.status == "waits_for_peer"]
    if stalling:  # every stalling process named, the worst one's verdict told
        return False, Verdict("processes_stall", processes=stalling, waiting=waiting)
    if waiting:
        return False, Verdict("processes_wait", processes=waiting)
    lb = [i for i, p in enumerate(procs) if p.status == "launch_bound"]
    if lb:
        return True, Verdict("processes_launch_bound", processes=lb)
    return True, replace(_healthy(s, cfg), case="processes_healthy")
