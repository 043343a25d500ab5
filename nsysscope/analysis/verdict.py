"""The verdict line, the notes that qualify it, and the check that the profiler kept the data."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model import Note, ProcessSummary, StallSite, Summary, counted_steps
from ..model.sites import NO_NVTX, NO_PHASE
from ..trace.load import Trace
from ..trace.python_samples import NO_PAYLOAD, NO_STACKS, PythonSamples
from ..util.units import pct, us
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


def verdict_line(s: Summary, cfg: AnalysisConfig) -> tuple[bool, str]:
    """Whether overlap holds, and the one line that says so. With several processes, the
    line names the process that stalls most and the ranks that wait for it."""
    if len(s.processes) > 1:
        return _several(s, cfg)
    if not s.steady_launches:
        return False, "no steady-state launches to judge"
    if _stalled_share(s) > cfg.stall_fraction_broken:
        return False, _broken(s)
    if s.processes and s.processes[0].status == "waits_for_peer":  # a rank whose peers'
        # traces are not in the input: its own launches are on time
        return False, f"overlap lost to waiting: {s.processes[0].verdict}"
    if _launch_bound_share(s) > cfg.stall_fraction_broken and (s.gpu_busy or 0) < 0.9:
        return True, f"overlap works, but the host is launch-bound on {_launch_bound(s)}"
    return True, f"overlap healthy: {_healthy(s, cfg)}"


def _healthy(s: Summary | ProcessSummary, cfg: AnalysisConfig) -> str:
    """``291/293 steady launches queued ahead of the GPU; GPU busy 98.9%``. Where most
    launches came after the GPU idled past a threshold below the gaps every replay leaves
    (``--launch-bound-us 5``), the GPU still busy: that, not "0/293 queued" beside
    "launch-bound gaps 293", which read as a fault."""
    lb = s.classes.get("launch_bound", 0)
    queued = s.steady_launches - sum(s.stalls.values()) - lb  # launch-bound: the next launch
    # came after the GPU idled
    busy = f"GPU busy {pct(s.gpu_busy)}" if s.gpu_busy is not None else ""
    if lb > queued:
        return ((f"{busy}; " if busy else "") + f"{_launch_bound(s)} came after the GPU idled "
                f"over {cfg.launch_bound_gap_us:g} us")
    return (f"{queued}/{s.steady_launches} steady launches queued ahead of the GPU"
            + (f"; {busy}" if busy else ""))


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


def _launch_bound(s: Summary | ProcessSummary, idle: bool = True) -> str:
    """``293/293 launches (GPU idle p50 ...)`` (``idle``: with the gap), or in steps where a
    step is several launches (the per-launch idle gaps are then mostly the pieces')."""
    b = counted_steps(s)
    if b:
        return (f"{b.launch_bound}/{b.steady} steps ({b.launches_p50:g} graph launches per "
                "step, as piecewise CUDA graphs issue them)")
    gap = f" (GPU idle p50 {us(s.gpu_gap_us.p50)} between replays)" if idle else ""
    return f"{s.classes.get('launch_bound', 0)}/{s.steady_launches} launches{gap}"


def _broken(s: Summary | ProcessSummary) -> str:
    """``OVERLAP BROKEN: 194/194 steady launches stall (...); median overlap window ...``,
    counted in steps (launch bursts) where a step is several launches."""
    top = s.sites[0] if s.sites else None
    # the class of the site that costs most (sites come biggest gain first), not the class
    # with most launches: that named other_stall beside a gpu_to_cpu site's line
    kind = top.klass if top is not None and top.klass != "launch_bound" else \
        max(s.stalls, key=lambda k: s.stalls[k])
    b = counted_steps(s)
    if b:
        return (f"OVERLAP BROKEN: {b.stalled}/{b.steady} steady steps stall ({kind}"
                f"{_located(top)}; {b.launches_p50:g} graph launches per step, as piecewise "
                f"CUDA graphs issue them); median overlap window of a step's last launch "
                f"{us(b.window_us.p50)}")
    return (f"OVERLAP BROKEN: {sum(s.stalls.values())}/{s.steady_launches} steady launches "
            f"stall ({kind}{_located(top)}); median overlap window {us(s.window_us.p50)}")


def _located(top: StallSite | None) -> str:
    """`` at sampler.py:58, phase 'sample'``; without NVTX or a line, the API chain."""
    if top is None or top.klass == "launch_bound":
        return ""
    if top.where in (NO_NVTX, NO_PHASE):
        return f" in {top.api_chain}" if top.api_chain else ""
    return f" at {top.where}"


def process_verdict(p: ProcessSummary, cfg: AnalysisConfig) -> tuple[str, str]:
    """A process's status (``stalls``, ``waits_for_peer``, ``launch_bound``, ``healthy``, or
    ``idle`` without steady launches) and its one-line verdict. A rank whose own launches are
    on time but whose GPU spins in collectives for a slower peer waits for that peer: it is
    neither stalled nor healthy."""
    if not p.steady_launches:
        return "idle", "no steady-state launches"
    if _stalled_share(p) > cfg.stall_fraction_broken:
        return "stalls", _broken(p).replace("OVERLAP BROKEN: ", "")
    wait = p.collective_wait_us.p50 or 0.0
    period_us = 1e6 / p.launches_per_s if p.launches_per_s else None
    if p.waits_for is not None and wait >= cfg.peer_wait_us and \
            (period_us is None or wait >= cfg.peer_wait_fraction * period_us):
        return "waits_for_peer", (f"waits {us(wait)} per step in "
                                  f"{p.waits_in or 'collectives'} for {p.waits_for}; "
                                  "its own launches are on time")
    if _launch_bound_share(p) > cfg.stall_fraction_broken and (p.gpu_busy or 0) < 0.9:
        return "launch_bound", f"launch-bound on {_launch_bound(p, idle=False)}"
    return "healthy", f"healthy: {_healthy(p, cfg)}"


def _named(procs: list[ProcessSummary]) -> str:
    """``pids 937, 938``, ``ranks 0, 1 (pids 937, 938)``."""
    pids = ", ".join(str(p.pid) for p in procs)
    if len(procs) == 1:
        return procs[0].label
    if any(p.rank is None for p in procs):
        return f"pids {pids}"
    return f"ranks {', '.join(str(p.rank) for p in procs)} (pids {pids})"


def _several(s: Summary, cfg: AnalysisConfig) -> tuple[bool, str]:
    procs = s.processes
    n = len(procs)
    stalling = sorted((p for p in procs if p.status == "stalls"),
                      key=lambda p: -sum(site.lost_us for site in p.sites))
    waiting = [p for p in procs if p.status == "waits_for_peer"]
    waits = "; ".join(f"{p.label} {p.verdict.split(';')[0]}" for p in waiting)
    if stalling:
        worst = stalling[0]  # every stalling process named, the worst one's verdict told
        who = worst.label if len(stalling) == 1 else \
            f"{_named(stalling)}; the worst, {worst.label},"
        line = f"OVERLAP BROKEN in {len(stalling)} of {n} processes: {who} {worst.verdict}"
        return False, line + (f"; {waits}" if waits else "")
    if waiting:
        return False, f"overlap lost to waiting ranks in {len(waiting)} of {n} processes: {waits}"
    lb = [p for p in procs if p.status == "launch_bound"]
    if lb:
        return True, (f"overlap works in all {n} processes, but {len(lb)} are launch-bound "
                      f"({_named(lb)})")
    return True, f"overlap healthy in all {n} processes: {_healthy(s, cfg)}"
