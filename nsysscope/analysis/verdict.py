"""The verdict line, the notes that qualify it, and the check that the profiler kept the data."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model import ProcessSummary, StallSite, Summary, counted_steps
from ..model.sites import NO_NVTX, NO_PHASE
from ..trace.load import Trace
from ..trace.python_samples import NO_PAYLOAD, NO_STACKS, STACKS_HINT, PythonSamples
from ..util.units import pct, us
from .collectives import groups_note
from .config import AnalysisConfig
from .stored import RowStore, as_rows, steady_parts


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


#: with several processes, what a graph-level trace cannot show (collectives.py reads the
#: NCCL kernels inside each replay, which only --cuda-graph-trace=node records)
GRAPH_TRACED_RANKS = (
    "graph replays were traced whole (--cuda-graph-trace=graph, nsys's default): the "
    "collectives inside them are not recorded, so a tensor-parallel rank that waits in its "
    "graph for a late peer would read as healthy; capture with --cuda-graph-trace=node to see "
    "which rank waits for which")


def notes_for(trace: Trace, launches: pd.DataFrame | RowStore,
              python_samples: PythonSamples | None = None,
              sites: list[StallSite] | None = None) -> list[str]:
    """What the reader should know about how far to trust this report."""
    n, missing, procs, groups = 0, 0, set(), []
    for part in as_rows(launches).chunks(["gpu_end_ns", "proc", "collective_group"]):
        n += len(part)
        missing += int(part["gpu_end_ns"].isna().sum())
        procs.update(pd.unique(part["proc"]).tolist())
        groups.append(part.loc[part["collective_group"] >= 0, ["collective_group", "proc"]]
                      .drop_duplicates())
    notes = []
    line = python_samples_note(python_samples, sites, trace.meta.has_nvtx)
    if line:
        notes.append(line)
    m = trace.meta
    if not (m.has_sync_records and m.has_event_records):
        notes.append(f"{m.profiler.without_sync_records}: event waits were matched to launches "
                     "by timing alone")
    if not m.has_nvtx:
        notes.append("no NVTX ranges: stalls cannot be attributed to loop phases; add "
                     "torch.cuda.nvtx ranges around schedule/launch/sample/post")
    if missing:
        notes.append(f"{missing} of {n} graph launches have no GPU work in the trace "
                     "(profiler buffer loss, or capture stopped mid-replay); they are excluded")
    lost = data_loss_reason(trace)
    if lost:
        notes.append(lost)
    grouped = groups_note(pd.concat(groups)) if groups else None
    if grouped:
        notes.append(grouped)
    if not m.has_graph_nodes and len(procs) > 1:
        notes.append(GRAPH_TRACED_RANKS)
    early = negative_windows_note(launches)
    if early:
        notes.append(early)
    return notes + list(m.reader_notes)


def negative_windows_note(launches: pd.DataFrame | RowStore) -> str | None:
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
    where = f"; {other} of them on another thread than the launching one" if other else ""
    return (f"{n} steady launches have a negative overlap window (down to {us(low / 1e3)}): "
            "the host wait on the launch began before its launch call returned, on a thread "
            "that waits on the stream while another issues the launch" + where + "; such a "
            "window is no overlap at all, and the percentiles above count it as it is")


def python_samples_note(samples: PythonSamples | None, sites: list[StallSite] | None,
                        has_nvtx: bool = True) -> str | None:
    """One line when stall sites could not be given a Python source line, saying why (and,
    with no NVTX ranges either, that only the API calls name a stall)."""
    by = "NVTX phase and op" if has_nvtx else "their CUDA calls"
    stalls = [s for s in (sites or []) if s.klass != "launch_bound"]
    if not stalls:
        return None
    # samples None with named sites: summarised again from launches attributed before
    have = samples.ok if samples is not None else any(s.source for s in stalls)
    if not have:
        if samples is not None and samples.status == NO_STACKS:
            return (f"no Python stacks: stalls are attributed to "
                    f"{'ranges and op' if has_nvtx else by} only; {STACKS_HINT}")
        if samples is not None and samples.status == NO_PAYLOAD:
            return ("this export has Python samples but no JSON payloads: stalls are attributed "
                    f"to {by} only; re-export with "
                    "`nsys export --type sqlite --include-json true`")
        return (f"no Python samples: stalls are attributed to {by} only; to name "
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
