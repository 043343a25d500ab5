"""The verdict, said: the one line a summary (or one of its processes) gives, made from its
values (:class:`~nsysscope.model.Verdict`, which ``analysis/verdict.py`` decides) and the
sites and processes they point at. Times are written as every report writes them
(:func:`~nsysscope.util.units.us`), so the line reads the same in the JSON and in the text.
"""

from __future__ import annotations

from ..model import ProcessSummary, StallSite, Summary, Verdict
from ..model.sites import NO_NVTX, NO_PHASE
from ..util.units import pct, us


def verdict_text(v: Verdict, s: Summary | ProcessSummary) -> str:
    """``v``, the verdict of ``s``, said: ``OVERLAP BROKEN: 194/194 steady launches stall
    (...); median overlap window ...`` of a summary, ``194/194 steady launches stall ...`` of
    a process."""
    whole = isinstance(s, Summary)
    if v.case == "idle":
        return "no steady-state launches to judge" if whole else "no steady-state launches"
    if v.case == "stalls":
        return ("OVERLAP BROKEN: " if whole else "") + _broken(v, s)
    if v.case == "waits_for_peer":
        if isinstance(s, Summary):
            return f"overlap lost to waiting: {s.processes[v.processes[0]].verdict}"
        return (f"waits {us(v.wait_us)} per step in {s.waits_in or 'collectives'} for "
                f"{s.waits_for}; its own launches are on time")
    if v.case == "launch_bound":
        return (f"overlap works, but the host is launch-bound on {_launch_bound(v)}" if whole
                else f"launch-bound on {_launch_bound(v)}")
    if v.case == "healthy":
        return ("overlap healthy: " if whole else "healthy: ") + _healthy(v)
    if isinstance(s, Summary):
        return _several(v, s)
    raise ValueError(f"a process has no verdict of case {v.case!r}")


def _healthy(v: Verdict) -> str:
    """``291/293 steady launches queued ahead of the GPU; GPU busy 98.9%``, or ``GPU busy
    99.1%; 293/293 launches (...) came after the GPU idled over 5.0 us``."""
    busy = f"GPU busy {pct(v.gpu_busy)}" if v.gpu_busy is not None else ""
    if v.idle_over_us is not None:
        return ((f"{busy}; " if busy else "") + f"{_launch_bound(v)} came after the GPU idled "
                f"over {us(v.idle_over_us)}")
    return f"{v.count}/{v.of} steady launches queued ahead of the GPU" + (
        f"; {busy}" if busy else "")


def _launch_bound(v: Verdict) -> str:
    """``293/293 launches (GPU idle p50 ...)``, or in steps where a step is several launches."""
    if v.unit == "steps":
        return (f"{v.count}/{v.of} steps ({v.launches_per_step:g} graph launches per step, as "
                "piecewise CUDA graphs issue them)")
    gap = f" (GPU idle p50 {us(v.idle_us)} between replays)" if v.idle_us is not None else ""
    return f"{v.count}/{v.of} launches{gap}"


def _broken(v: Verdict, s: Summary | ProcessSummary) -> str:
    """``194/194 steady launches stall (gpu_to_cpu at ...); median overlap window ...``."""
    where = _located(s.sites[v.site]) if v.site is not None else ""
    if v.unit == "steps":
        return (f"{v.count}/{v.of} steady steps stall ({v.klass}{where}; "
                f"{v.launches_per_step:g} graph launches per step, as piecewise CUDA graphs "
                f"issue them); median overlap window of a step's last launch {us(v.window_us)}")
    return (f"{v.count}/{v.of} steady launches stall ({v.klass}{where}); median overlap "
            f"window {us(v.window_us)}")


def _located(top: StallSite) -> str:
    """`` at sampler.py:58, phase 'sample'``; without NVTX or a line, the API chain."""
    if top.where in (NO_NVTX, NO_PHASE):
        return f" in {top.api_chain}" if top.api_chain else ""
    return f" at {top.where}"


def _named(procs: list[ProcessSummary]) -> str:
    """``pids 937, 938``, ``ranks 0, 1 (pids 937, 938)``."""
    pids = ", ".join(str(p.pid) for p in procs)
    if len(procs) == 1:
        return procs[0].label
    if any(p.rank is None for p in procs):
        return f"pids {pids}"
    return f"ranks {', '.join(str(p.rank) for p in procs)} (pids {pids})"


def _several(v: Verdict, s: Summary) -> str:
    """The verdict of a summary of several processes: those that stall (the worst one's
    verdict told) and those that wait, or that all work."""
    n = len(s.processes)
    named = [s.processes[i] for i in v.processes]
    waiting = [s.processes[i] for i in (v.waiting if v.case == "processes_stall" else
                                        v.processes if v.case == "processes_wait" else [])]
    waits = "; ".join(f"{p.label} {p.verdict.split(';')[0]}" for p in waiting)
    if v.case == "processes_stall":
        worst = named[0]
        who = worst.label if len(named) == 1 else f"{_named(named)}; the worst, {worst.label},"
        line = f"OVERLAP BROKEN in {len(named)} of {n} processes: {who} {worst.verdict}"
        return line + (f"; {waits}" if waits else "")
    if v.case == "processes_wait":
        return f"overlap lost to waiting ranks in {len(waiting)} of {n} processes: {waits}"
    if v.case == "processes_launch_bound":
        return (f"overlap works in all {n} processes, but {len(named)} are launch-bound "
                f"({_named(named)})")
    if v.case == "processes_healthy":
        return f"overlap healthy in all {n} processes: {_healthy(v)}"
    raise ValueError(f"no verdict of case {v.case!r}")
