"""Build the :class:`~nsysscope.model.Summary` of analysed launches, once.

The summary describes the launches marked ``steady`` (warm-up, each stream's last launch and
launches without GPU work in the trace left out). A trace with several processes
(tensor-parallel ranks, several engines) gets one :class:`~nsysscope.model.ProcessSummary`
per process that launched graphs; the top-level numbers are their totals: counts summed,
percentiles pooled over every steady launch, GPU busy as total busy time over total span,
launch rates added (see :mod:`.processes`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ..model import (
    LAUNCH_CLASSES,
    STALL_CLASSES,
    Distributions,
    IfFixed,
    LatentSite,
    Percentiles,
    ProcessSummary,
    StallSite,
    Summary,
)
from ..trace.apis import process_of
from ..trace.load import Trace
from ..trace.python_samples import PythonSamples
from .bursts import steady_bursts
from .config import AnalysisConfig
from .nvtx import names_step
from .processes import process_table, totals
from .projection import Projection, coupled_groups, project
from .sites import site_rows, stall_sites
from .verdict import notes_for, process_verdict, verdict_line

#: at most this many per-launch values are kept for the gate (a sample beyond: see
#: :func:`_sample`)
MAX_DISTRIBUTION = 4000


#: the launch table's columns the summary's steady-state numbers read
_SUMMARISED = ["proc", "klass", "waited", "window_ns", "gpu_idle_ns", "api_start_ns",
               "gpu_work_ns", "burst", "stall"]
#: and those a process's summary reads besides
_PER_PROCESS = [*_SUMMARISED, "collective_wait_ns", "waited_for", "waited_in"]
#: every column of the launch table that :func:`summarize` and
#: :func:`~.latent.latent_sites` read (a long trace's table is read from disk: only these)
SUMMARISED = list(dict.fromkeys([
    *_PER_PROCESS, "launch", "device", "steady", "warmup", "period_ns", "host_blocked_ns",
    "next_api_start_ns", "next_gpu_start_ns", "gpu_start_ns", "gpu_end_ns",
    "busy_before_start_ns", "busy_before_end_ns", "block", "block_start_ns", "block_end_ns",
    "block_polls", "collective_group", "cause_tid", "cause_start_ns", "phase", "op",
    "api_chain", "thread", "nvtx_path", "src_file", "src_line", "src_function", "src_text",
    "src_samples", "src_block_samples"]))


def summarize(trace: Trace, launches: pd.DataFrame, cfg: AnalysisConfig,
              python_samples: PythonSamples | None = None,
              latent: list[LatentSite] | None = None) -> tuple[Summary, pd.DataFrame]:
    """The summary of the launches marked ``steady``, and the per-process table it totals.
    ``latent``: the hot-path patterns not yet costing overlap (:mod:`.latent`)."""
    table = process_table(trace, launches)
    rates = {int(p): float(r) for p, r in zip(table["proc"], table["launches_per_s"], strict=True)
             if pd.notna(r)}
    groups = coupled_groups(launches)

    def if_fixed(rows: pd.Index) -> Projection:
        return project(launches, rates, pd.Series(True, index=rows), groups)

    fixed = project(launches, rates, launches["steady"] & launches["stall"], groups)
    sites = stall_sites(launches, if_fixed=if_fixed)
    # made past the projections, whose temporaries it would add to (110 MB at 10^6 launches)
    steady = launches.loc[launches["steady"], _PER_PROCESS]  # (one process: its own too)
    busy, per_s = totals(table)
    numbers = _steady_numbers(steady)
    processes = _processes(launches, steady, numbers, table, cfg, if_fixed, fixed, sites)
    summary = Summary(
        trace=trace.meta.info,
        verdict="", overlap_ok=True, launches=len(launches), steady_launches=len(steady),
        warmup_launches=int(launches["warmup"].sum()), **numbers,
        gpu_busy=busy, launches_per_s=per_s, steps_per_s=_steps_per_s(trace, steady),
        sites=sites, notes=notes_for(trace, launches, python_samples, sites),
        config=cfg.to_dict(), if_fixed=IfFixed(fixed.total_launches_per_s, fixed.speedup),
        latent=_not_covered(latent or [], sites),
        processes=processes, distributions=_distributions(steady))
    ok, line = verdict_line(summary, cfg)
    return Summary(**{**summary.__dict__, "verdict": line, "overlap_ok": ok}), table


def _steady_numbers(steady: pd.DataFrame) -> dict[str, Any]:
    """Class counts, stalls, launches never waited for, window and idle-gap percentiles, and
    the launches' bursts."""
    counts = steady["klass"].value_counts()
    classes = {str(k): int(counts.get(k, 0)) for k in LAUNCH_CLASSES}
    return dict(classes=classes, stalls={str(k): classes[k] for k in STALL_CLASSES},
                no_wait=int((~steady["waited"]).sum()),
                window_us=Percentiles.of(steady["window_ns"].to_numpy() / 1e3),
                gpu_gap_us=Percentiles.of(steady["gpu_idle_ns"].to_numpy() / 1e3),
                bursts=steady_bursts(steady))


def _processes(launches: pd.DataFrame, steady_launches: pd.DataFrame,
               steady_numbers: dict[str, Any], table: pd.DataFrame, cfg: AnalysisConfig,
               if_fixed: Callable[[pd.Index], Projection], fixed: Projection,
               sites: list[StallSite]) -> list[ProcessSummary]:
    """One summary per process; ``steady_launches`` (their :data:`_PER_PROCESS` columns),
    their :func:`_steady_numbers` and ``sites``: the whole trace's, which are the only
    process's own where there is one (not made again: at 10^6 launches a copy of the rows
    is 110 MB, the numbers' temporaries 190 MB)."""
    pid_of = dict(zip(table["proc"], table["pid"], strict=True))
    # a site's fix relieves every process that has it
    everywhere = site_rows(launches) if len(table) > 1 else None
    out = []
    for row in table.sort_values("pid", kind="stable").itertuples():
        own = launches if len(table) == 1 else launches[launches["proc"] == row.proc]
        steady = steady_launches if len(table) == 1 else own.loc[own["steady"], _PER_PROCESS]
        waits = steady["collective_wait_ns"].to_numpy() / 1e3
        numbers = steady_numbers if len(table) == 1 else _steady_numbers(steady)
        p = ProcessSummary(
            pid=int(row.pid), name=str(row.name), device=int(row.device), status="",
            verdict="", launches=int(row.launches), steady_launches=int(row.steady_launches),
            warmup_launches=int(row.warmup_launches), **numbers,
            gpu_busy=None if pd.isna(row.gpu_busy) else float(row.gpu_busy),
            launches_per_s=None if pd.isna(row.launches_per_s) else float(row.launches_per_s),
            collective_wait_us=Percentiles.of(waits),
            waits_for_pid=pid_of.get(row.waited_for) if row.waited_for >= 0 else None,
            waits_in=_most_waited_in(steady),
            sites=sites if everywhere is None else stall_sites(own, if_fixed=if_fixed,
                                                                scope=everywhere),
            if_fixed=_if_fixed(fixed, int(row.proc), row.launches_per_s),
            # one process: its distributions are the summary's own, not kept twice
            distributions=_distributions(steady) if len(table) > 1 else None)
        status, verdict = process_verdict(p, cfg)
        out.append(ProcessSummary(**{**p.__dict__, "status": status, "verdict": verdict}))
    return out


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


def _most_waited_in(steady: pd.DataFrame) -> str | None:
    w = steady[steady["waited_for"] >= 0]
    if w.empty:
        return None
    return str(w.groupby("waited_in")["collective_wait_ns"].sum().idxmax())


def _steps_per_s(trace: Trace, steady: pd.DataFrame) -> float | None:
    """NVTX ``step N`` ranges per second: per process, its own threads' ranges over its
    steady launches' span (a process that launches no graphs, a scheduler say: over all of
    theirs), added over the processes as their launch rates are (pooling every process's
    ranges over one span counted neither: 294/s for engines doing 306 and 195)."""
    nv = trace.nvtx
    if nv.empty or steady.empty:
        return None
    steps = nv.loc[names_step(nv["text"]), ["start_ns", "tid"]]
    proc = process_of(steps["tid"].to_numpy())
    span = steady.groupby("proc")["api_start_ns"].agg(["min", "max"])
    t0 = span["min"].reindex(proc).fillna(span["min"].min()).to_numpy(dtype=np.float64)
    t1 = span["max"].reindex(proc).fillna(span["max"].max()).to_numpy(dtype=np.float64)
    start = steps["start_ns"].to_numpy()
    inside = (start >= t0) & (start < t1)
    per = pd.Series(start[inside]).groupby(proc[inside]).agg(["size", "min", "max"])
    per = per[per["size"] >= 2]
    if per.empty:
        return None
    return round(float(((per["size"] - 1) / ((per["max"] - per["min"]) / 1e9)).sum()), 2)


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


def _distributions(steady: pd.DataFrame) -> Distributions:
    s = steady.iloc[_sample(steady["gpu_idle_ns"].to_numpy(dtype=float), MAX_DISTRIBUTION)]

    def us(col: str) -> list[float | None]:
        return _us(s[col])

    return Distributions(window_us=us("window_ns"), gpu_idle_us=us("gpu_idle_ns"),
                         klass=[str(k) for k in s["klass"]], sampled_from=len(steady),
                         gpu_work_us=us("gpu_work_ns"))  # .projection.step_costs
