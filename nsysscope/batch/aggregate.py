"""All traces of a batch together: summed counts, exact percentiles, the trace that stalls most."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..model import Aggregate, LaunchClass, TraceResult, counted_steps
from ..util.units import ms, pct


def _p50(arrays: list[np.ndarray]) -> float | None:
    v = np.concatenate(arrays) if arrays else np.empty(0)
    v = v[~np.isnan(v)]
    return round(float(np.percentile(v, 50)), 2) if len(v) else None


def _mean(values: list[float | None]) -> float | None:
    v = [x for x in values if x is not None]
    return round(float(np.mean(v)), 4) if v else None


def aggregate(results: list[TraceResult]) -> Aggregate:
    ok = [r for r in results if r.summary is not None]
    summaries = [r.summary for r in ok if r.summary is not None]
    stalls: dict[str, int] = {}
    for s in summaries:
        for k, v in s.stalls.items():
            stalls[k] = stalls.get(k, 0) + v
    steady = sum(s.steady_launches for s in summaries)
    worst = max(ok, key=lambda r: (r.stall_share, r.lost_us), default=None)
    pooled = one_job(ok)
    if worst is not None and worst.stalled == 0 and worst.lost_us == 0:
        worst = None
    agg = Aggregate(
        traces=len(results), analysed=len(ok), failed=len(results) - len(ok),
        launches=sum(s.launches for s in summaries), steady_launches=steady,
        stalls=stalls, stall_share=round(sum(stalls.values()) / steady, 4) if steady else 0.0,
        lost_us=round(sum(r.lost_us for r in ok), 1),
        window_p50_us=_p50([r.window_values_us for r in ok]) if pooled else None,
        gpu_idle_p50_us=_p50([r.gpu_idle_values_us for r in ok]) if pooled else None,
        gpu_busy_mean=_mean([s.gpu_busy for s in summaries]),
        launches_per_s_mean=_mean([s.rate for s in summaries]), worst=worst)
    agg.worst_line = worst_line(agg, shown_names([r.path for r in results]))
    return agg


def one_job(results: list[TraceResult]) -> bool:
    """Whether the traces are the ranks of one job (each file names a rank of its own:
    ``rank0``, ``rank1``...), whose launches' percentiles pool into one: a window p50 over
    unrelated traces (a case-1 run, a healthy one, another engine) described none of them.
    One trace is its own job."""
    ranks = [r.rank for r in results]
    return len(results) <= 1 or (None not in ranks and len(set(ranks)) == len(ranks))


def shown_names(paths: list[str]) -> dict[str, str]:
    """How each trace is named in the table and the worst-trace line: its file name, or,
    where another trace has the same file name (two runs' ``rank0.sqlite``), as many of its
    last folders as tell them apart (``runA/rank0.sqlite``; the whole path was cut at its
    start to fit the terminal, and with it what told them apart)."""
    parts = {p: Path(p).parts for p in paths}
    out = {}
    for p in paths:
        n = 1
        while n < len(parts[p]) and any(q != p and parts[q][-n:] == parts[p][-n:]
                                        for q in paths):
            n += 1
        out[p] = p if n >= len(parts[p]) else str(Path(*parts[p][-n:]))
    return out


def worst_line(agg: Aggregate, names: dict[str, str] | None = None) -> str:
    """One sentence on the trace that stalls most (or that none does)."""
    w = agg.worst
    if w is None or w.summary is None:
        if not agg.analysed:
            return "No trace could be analysed."
        return "No trace stalls in steady state." if agg.steady_launches else \
            "No trace has a steady-state launch to judge (all are warm-up)."
    name = (names or {}).get(w.path, Path(w.path).name)
    who = f"rank {w.rank} ({name})" if w.rank is not None else name
    s = w.summary
    # the class of its costliest site (sites come biggest gain first), not the class with
    # most launches (as the verdict and the headline name it)
    stall_sites = [x for x in s.sites if x.klass != LaunchClass.LAUNCH_BOUND]
    kind = (stall_sites[0].klass if stall_sites else max(s.stalls, key=lambda k: s.stalls[k])) \
        if w.stalled else LaunchClass.LAUNCH_BOUND
    top = next((x for x in s.sites if x.klass == kind), None)
    where = f" at {top.where}" if top else ""
    steps = counted_steps(s)  # as the share counts them: a piecewise trace's steps
    count = f"{steps.stalled}/{steps.steady} steady steps" if steps else \
        f"{w.stalled}/{s.steady_launches} steady launches"
    return (f"{who} stalls most: {count} ({pct(w.stall_share)}, {kind}{where}), "
            f"{ms(w.lost_us)} GPU idle after stalls.")
