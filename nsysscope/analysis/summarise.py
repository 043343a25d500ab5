"""Build the :class:`~nsysscope.model.Summary` of analysed launches, once.

The summary describes the launches marked ``steady`` (warm-up, each stream's last launch and
launches without GPU work in the trace left out). A trace with several processes
(tensor-parallel ranks, several engines) gets one :class:`~nsysscope.model.ProcessSummary`
per process that launched graphs; the top-level numbers are their totals: counts summed,
percentiles pooled over every steady launch, GPU busy as total busy time over total span,
launch rates added (see :mod:`.processes`).

The launches are read a part at a time (:meth:`~.stored.RowStore.chunks`: a long trace's
time windows, from disk) and what each part says is put together: counts and sums, sites,
bursts. Only the exact percentiles hold one value of every steady launch, one column at a
time, so a summary's memory is ~8 bytes per launch, not its rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..model import (
    LAUNCH_CLASSES,
    STALL_CLASSES,
    Distributions,
    IfFixed,
    LatentSite,
    Note,
    Percentiles,
    ProcessSummary,
    StallSite,
    Summary,
    registry,
)
from ..trace.apis import process_of
from ..trace.load import Trace
from ..trace.python_samples import PythonSamples
from .after_idle import SLOWER_BACK_TO_BACK, idle_factors
from .bursts import steady_bursts
from .collectives import ABSENT
from .config import AnalysisConfig
from .headline import LateCost, headline
from .nvtx import step_ranges
from .processes import groups_of, process_table, servers_rate, totals
from .projection import Projection, project_each
from .serving import graph_summaries, idle_summary, startup_summary
from .sites import SiteTable
from .source_lines import missing_text_note
from .stored import FrameRows, RowStore, as_rows, steady_parts
from .verdict import notes_for, process_verdict, verdict_line

#: at most this many per-launch values are kept for the gate (a sample beyond: see
#: :func:`_sample`)
MAX_DISTRIBUTION = 4000

#: the columns of an NVTX step range the summary reads (the steps per second)
STEP_RANGES = ["start_ns", "tid"]


def summarize(trace: Trace, launches: pd.DataFrame | RowStore, cfg: AnalysisConfig,
              python_samples: PythonSamples | None = None,
              latent: list[LatentSite] | None = None,
              steps: RowStore | None = None) -> tuple[Summary, pd.DataFrame]:
    """The summary of the launches marked ``steady``, and the per-process table it totals.
    ``latent``: the hot-path patterns not yet costing overlap (:mod:`.latent`); ``steps``:
    the NVTX step ranges (:data:`STEP_RANGES`), where ``trace`` does not hold them (a long
    trace read in windows)."""
    rows = as_rows(launches)
    table = process_table(trace, rows)
    rates = {int(p): float(r) for p, r in zip(table["proc"], table["launches_per_s"], strict=True)
             if pd.notna(r)}
    sites = SiteTable.of(rows)
    fixable = sites.stalled()
    numbers = sites.numbers
    late_sites = sites.launch_bound()

    def relieved(part: pd.DataFrame) -> list[np.ndarray]:
        site = numbers[part.index]
        return [part["stall"].to_numpy(dtype=bool), np.isin(site, late_sites),
                *(site == s for s in fixable)]

    groups = groups_of(table)
    measured = idle_factors(rows)
    fixed, keeps_ahead, *each = project_each(rows, rates, groups, relieved, 2 + len(fixable),
                                             measured)
    projected: list[Projection | None] = [None] * len(sites.sites)
    for s, projection in zip(fixable, each, strict=True):
        projected[s] = projection
    top = sites.stall_sites(projected=projected)
    busy, per_s = totals(table)
    steady_numbers = _steady_numbers(rows, table)
    processes = [_process(rows, row, table, steady_numbers, cfg, sites, projected, top, fixed)
                 for row in _by_rank(table).itertuples()]
    summary = Summary(
        trace=trace.meta.info,
        verdict="", overlap_ok=True, launches=len(rows),
        steady_launches=int(table["steady_launches"].sum()),
        warmup_launches=int(table["warmup_launches"].sum()), **steady_numbers,
        gpu_busy=busy, launches_per_s=per_s,
        steps_per_s=_steps_per_s(_step_ranges(trace) if steps is None else steps, rows,
                                 dict(zip(table["proc"], table["idle_ns"], strict=True))),
        sites=top, note_facts=[*notes_for(trace, rows, python_samples, top),
                               *filter(None, [missing_text_note(top, cfg)])],
        config=cfg.to_dict(), if_fixed=_if_all_fixed(rows, rates, groups, measured, fixed),
        latent=_not_covered(latent or [], top),
        processes=processes, distributions=_distributions(rows),
        server_launches_per_s=servers_rate(table),
        startup=startup_summary(trace, rows), idle=idle_summary(trace, rows),
        gpu_busy_capture=_busy_with_idle(table),
        graphs=graph_summaries(rows, dict(zip(table["proc"], table["pid"], strict=True))))
    if summary.if_fixed and (summary.if_fixed.withheld or summary.if_fixed.speedup_low):
        summary = Summary(**{**summary.__dict__, "note_facts": [
            *summary.note_facts, projection_note(summary.if_fixed)]})
    ok, verdict = verdict_line(summary, cfg)
    summary = Summary(**{**summary.__dict__, "verdict": registry.words().verdict(verdict, summary),
                         "verdict_facts": verdict, "overlap_ok": ok})
    late = sites.sites.loc[late_sites]
    cost = LateCost(launches=int(late["count"].sum()), lost_us=float(late["lost_ns"].sum()) / 1e3,
                    speedup=keeps_ahead.speedup,
                    launches_per_s_if_fixed=keeps_ahead.total_launches_per_s)
    first = headline(summary, cost, float(table["span_ns"].sum()) / 1e3)
    return Summary(**{**summary.__dict__, "headline": first}), table


def projection_note(f: IfFixed) -> Note:
    """Why the gain of fixing every stall is not projected, or why it is a range."""
    return Note("gain_withheld", {"why": f.withheld}) if f.withheld else Note("gain_range")


def _if_all_fixed(rows: RowStore, rates: dict[int, float], groups: list[set[int]],
                  measured: dict[int, float], fixed: Projection) -> IfFixed:
    """The projection with every stall fixed; a range where a stalled process's replays were
    never seen back to back (:mod:`.after_idle`): its low end has them take
    :data:`~.after_idle.SLOWER_BACK_TO_BACK` times as long as after the stalls."""
    if fixed.withheld or not fixed.speedup or fixed.speedup <= 1:
        return IfFixed(fixed.total_launches_per_s, fixed.speedup, fixed.withheld)
    stalled = [p for p, r in fixed.launches_per_s.items() if r > rates.get(p, 0.0)]
    if all(p in measured for p in stalled):
        return IfFixed(fixed.total_launches_per_s, fixed.speedup)
    low, = project_each(rows, rates, groups, lambda part: [part["stall"].to_numpy(dtype=bool)],
                        1, {p: measured.get(p, SLOWER_BACK_TO_BACK) for p in rates})
    if low.withheld or low.speedup is None or low.speedup >= fixed.speedup:
        return IfFixed(fixed.total_launches_per_s, fixed.speedup)
    return IfFixed(fixed.total_launches_per_s, fixed.speedup, None,
                   low.total_launches_per_s, max(low.speedup, 1.0))


def _steady_numbers(rows: RowStore, table: pd.DataFrame,
                    proc: int | None = None) -> dict[str, Any]:
    """Class counts (from the per-process ``table``), stalls, launches never waited for,
    window and idle-gap percentiles, and the launches' bursts, of the steady launches (of
    process ``proc``)."""
    counted = table if proc is None else table[table["proc"] == proc]
    classes = {str(k): int(counted[str(k)].sum()) for k in LAUNCH_CLASSES}
    return dict(classes=classes, stalls={str(k): classes[k] for k in STALL_CLASSES},
                no_wait=int((~steady_values(rows, "waited", proc)).sum()),
                window_us=Percentiles.of(steady_values(rows, "window_ns", proc) / 1e3),
                gpu_gap_us=Percentiles.of(steady_values(rows, "gpu_idle_ns", proc) / 1e3),
                bursts=steady_bursts(rows, proc))


def steady_values(rows: RowStore, column: str, proc: int | None = None) -> np.ndarray:
    """``column`` of the steady launches (of process ``proc``) in launch order, read a part
    at a time (the values of one column: what exact percentiles need)."""
    out = [part[column].to_numpy() for part in steady_parts(rows, [column], proc)]
    return out[0] if len(out) == 1 else np.concatenate(out) if out else np.zeros(0)


def _process(rows: RowStore, row: Any, table: pd.DataFrame, trace_numbers: dict[str, Any],
             cfg: AnalysisConfig, sites: SiteTable, projected: list[Projection | None],
             trace_sites: list[StallSite], fixed: Projection) -> ProcessSummary:
    """The summary of one process (``row`` of the per-process ``table``): the trace's own
    numbers, sites and distributions where it is the only one. A site's fix relieves every
    process that has it."""
    one = len(table) == 1
    proc = None if one else int(row.proc)
    pid_of = dict(zip(table["proc"], table["pid"], strict=True))
    rank_of = dict(zip(table["proc"], table["rank"], strict=True))
    p = ProcessSummary(
        pid=int(row.pid), name=str(row.name), device=int(row.device), status="",
        verdict="", launches=int(row.launches), steady_launches=int(row.steady_launches),
        warmup_launches=int(row.warmup_launches),
        **(trace_numbers if one else _steady_numbers(rows, table, proc)),
        gpu_busy=None if pd.isna(row.gpu_busy) else float(row.gpu_busy),
        launches_per_s=None if pd.isna(row.launches_per_s) else float(row.launches_per_s),
        collective_wait_us=Percentiles.of(steady_values(rows, "collective_wait_ns", proc) / 1e3),
        waits_for_pid=pid_of.get(row.waited_for) if row.waited_for >= 0 else None,
        waits_in=_most_waited_in(rows, int(row.proc)),
        rank=None if row.rank is None else int(row.rank),
        waits_for_rank=None if rank_of.get(row.waited_for) is None
        else int(rank_of[row.waited_for]),
        waits_for_missing_rank=bool(row.waited_for == ABSENT),
        collectives=bool(row.collectives),
        group=None if row.group < 0 else int(pid_of.get(row.group, row.group)),
        sites=trace_sites if one else sites.stall_sites(projected=projected, proc=proc),
        if_fixed=_if_fixed(fixed, int(row.proc), row.launches_per_s),
        # one process: its distributions are the summary's own, not kept twice
        distributions=None if one else _distributions(rows, proc))
    status, verdict = process_verdict(p, cfg)
    return ProcessSummary(**{**p.__dict__, "status": status, "verdict_facts": verdict,
                             "verdict": registry.words().verdict(verdict, p)})


def _by_rank(table: pd.DataFrame) -> pd.DataFrame:
    """The processes in rank order where their ranks are known, the others after them, each
    in pid order."""
    unranked = table["rank"].isna().to_numpy()
    rank = table["rank"].where(~unranked, 0).astype(np.int64).to_numpy()
    return table.iloc[np.lexsort((table["pid"].to_numpy(), rank, unranked))]


def _not_covered(latent: list[LatentSite], sites: list[StallSite]) -> list[LatentSite]:
    """The latent patterns a current stall site's fix does not already cover (the same kind
    in the same phase: a second pageable copy next to the one that stalls)."""
    stalling = {(s.klass, s.phase) for s in sites if s.klass != "launch_bound"}
    return [x for x in latent if (x.kind, x.phase) not in stalling]


def _if_fixed(fixed: Projection, proc: int, rate: float) -> IfFixed | None:
    if proc not in fixed.launches_per_s or pd.isna(rate) or not rate:
        return None
    new = fixed.launches_per_s[proc]
    return IfFixed(round(new, 2), round(new / rate, 3))


def _most_waited_in(rows: RowStore, proc: int) -> str | None:
    """The collective the process's steady launches waited longest in (None: none)."""
    parts = []
    for part in steady_parts(rows, ["waited_for", "waited_in", "collective_wait_ns"], proc):
        w = part[part["waited_for"].to_numpy() != -1]
        parts.append(w.groupby(w["waited_in"].astype(object))["collective_wait_ns"].sum())
    waited = pd.concat(parts)
    if waited.empty:
        return None
    return str(waited.groupby(level=0).sum().idxmax())


def _step_ranges(trace: Trace) -> RowStore:
    """The NVTX step ranges of ``trace`` (``step 12``: :func:`.nvtx.step_ranges`)."""
    return FrameRows(step_ranges(trace.nvtx)[STEP_RANGES])


def _busy_with_idle(table: pd.DataFrame) -> float | None:
    """GPU busy over the processes' steady spans with their idle periods in them (the old
    ``gpu_busy`` of a server's trace); None without a span."""
    span = float((table["span_ns"] + table["idle_ns"]).sum()) if len(table) else 0.0
    return round(float(table["busy_ns"].sum()) / span, 4) if span else None


def _steps_per_s(steps: RowStore, rows: RowStore,
                 idle: dict[int, float] | None = None) -> float | None:
    """NVTX ``step N`` ranges per second: per process, its own threads' ranges over its
    steady launches' span (a process that launches no graphs, a scheduler say: over all of
    theirs), added over the processes as their launch rates are (pooling every process's
    ranges over one span counted neither: 294/s for engines doing 306 and 195). The ranges
    are read a part at a time."""
    spans = [part.groupby("proc")["api_start_ns"].agg(["min", "max"])
             for part in steady_parts(rows, ["api_start_ns"])]
    span = pd.concat(spans).groupby(level=0).agg({"min": "min", "max": "max"}) if spans \
        else pd.DataFrame()
    if not len(steps) or span.empty:
        return None
    per = []
    for part in steps.chunks(STEP_RANGES):
        proc = process_of(part["tid"].to_numpy())
        t0 = span["min"].reindex(proc).fillna(span["min"].min()).to_numpy(dtype=np.float64)
        t1 = span["max"].reindex(proc).fillna(span["max"].max()).to_numpy(dtype=np.float64)
        start = part["start_ns"].to_numpy()
        inside = (start >= t0) & (start < t1)
        per.append(pd.Series(start[inside]).groupby(proc[inside]).agg(["size", "min", "max"]))
    counted = pd.concat(per).groupby(level=0).agg({"size": "sum", "min": "min", "max": "max"})
    counted = counted[counted["size"] >= 2]
    if counted.empty:
        return None
    # over serving time: each process's idle periods left out (:mod:`.idle`)
    away = pd.Series(idle or {}, dtype=np.float64).reindex(counted.index).fillna(0.0)
    return round(float(((counted["size"] - 1) / ((counted["max"] - counted["min"] - away)
                                                  / 1e9)).sum()), 2)


def _us(ns: pd.Series) -> list[float | None]:
    return [None if pd.isna(x) else float(x) for x in (ns / 1e3).round(2)]


def _sample(idle_ns: np.ndarray, n: int) -> np.ndarray:
    """Positions of at most ``n`` launches, in launch order, evenly spaced in the order of
    their GPU idle gaps: the sample keeps the gaps' quantiles, their largest included. An
    even sample in launch order could drop the one host pause of a long capture (a 115 ms
    one in 4899 launches), and the gate takes the pauses out of the launch rate and idle
    fraction (:func:`~nsysscope.gate.checks.robust`): without it, a healthy candidate read
    1.5 % idle and 303.5 launches/s for 0.8 % and 305.6/s. The other values of each launch
    come with it, so they are a sample stratified by idle gap, as representative."""
    if len(idle_ns) <= n:
        return np.arange(len(idle_ns))
    by_gap = np.argsort(idle_ns, kind="stable")  # a launch without a gap (NaN) sorts last
    return np.sort(by_gap[np.linspace(0, len(idle_ns) - 1, n).round().astype(int)])


def _distributions(rows: RowStore, proc: int | None = None) -> Distributions:
    """A sample of the steady launches' (of process ``proc``) values for the gate
    (:func:`_sample`), picked a part at a time."""
    idle = steady_values(rows, "gpu_idle_ns", proc).astype(np.float64)
    pick = _sample(idle, MAX_DISTRIBUTION)
    del idle
    chosen, seen = [], 0
    for steady in steady_parts(rows, ["window_ns", "gpu_idle_ns", "gpu_work_ns", "klass"],
                               proc):
        at = pick[(pick >= seen) & (pick < seen + len(steady))] - seen
        chosen.append(steady.iloc[at])
        seen += len(steady)
    s = pd.concat(chosen)

    def us(col: str) -> list[float | None]:
        return _us(s[col])

    return Distributions(window_us=us("window_ns"), gpu_idle_us=us("gpu_idle_ns"),
                         klass=[str(k) for k in s["klass"]], sampled_from=seen,
                         gpu_work_us=us("gpu_work_ns"))  # .projection.step_costs
