"""A server's trace summarised beyond its steady state: what start-up and the idle periods
left out (:mod:`.startup`, :mod:`.idle`), and the steady launches per graph exec (a server
captures one graph per batch-size bucket and replays the smallest that holds its batch, so
each bucket has its own GPU time, and a slow host shows first at the small ones).

Each is read a part of the launches at a time, like the rest of the summary."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model import GraphExec, IdlePeriods, Startup
from ..trace.load import Trace
from .idle import StepPeriod, step_periods
from .stored import RowStore


def startup_summary(trace: Trace, rows: RowStore) -> Startup | None:
    """How many launches start-up held, of how many graph execs, and the time from the trace's
    start to the first launch after it (None: no start-up)."""
    n, execs, first_after = 0, set(), np.inf
    for part in rows.chunks(["startup", "graph_exec", "api_start_ns"]):
        up = part["startup"].to_numpy(dtype=bool)
        n += int(up.sum())
        execs.update(part.loc[up, "graph_exec"].tolist())
        after = part.loc[~up, "api_start_ns"]
        if len(after):
            first_after = min(first_after, float(after.min()))
    if not n:
        return None
    begin = trace.meta.capture_start_ns or 0
    span = (first_after - begin) / 1e3 if np.isfinite(first_after) else None
    return Startup(launches=n, graphs=len(execs), span_us=round(span, 1) if span else 0.0)


def idle_summary(trace: Trace, rows: RowStore) -> IdlePeriods | None:
    """The idle periods (None: none): how many, their total and longest length, their share of
    the trace's span, and the step period and threshold they were told by (of the process with
    most idle time)."""
    found = pd.concat([part.loc[part["idle_ns"].notna(), ["proc", "idle_ns"]]
                       for part in rows.chunks(["proc", "idle_ns"])])
    if found.empty:
        return None
    periods = step_periods(rows)
    proc = int(found.groupby("proc")["idle_ns"].sum().idxmax())
    step: StepPeriod | None = periods.get(proc)
    m = trace.meta
    span = (m.capture_end_ns - m.capture_start_ns) if m.capture_end_ns > m.capture_start_ns \
        else None
    total = float(found["idle_ns"].sum())
    return IdlePeriods(
        periods=len(found), total_us=round(total / 1e3, 1),
        longest_us=round(float(found["idle_ns"].max()) / 1e3, 1),
        share=round(total / span, 4) if span else None,
        step_us=tuple(round(v / 1e3, 1) for v in (step.p10, step.p50, step.p90))
        if step else (0.0, 0.0, 0.0),  # type: ignore[arg-type]
        threshold_us=round(step.idle_from_ns / 1e3, 1) if step else 0.0)


#: the launch table's columns the per-exec summary reads
_READ = ["proc", "graph_exec", "steady", "stall", "klass", "window_ns", "gpu_idle_ns",
         "gpu_start_ns", "gpu_end_ns"]


def graph_summaries(rows: RowStore, pids: dict[int, int]) -> list[GraphExec]:
    """One :class:`GraphExec` per graph exec with steady launches, where a process replays
    several (a server's buckets), biggest median GPU time first; none where every process
    replays one graph (the trace-wide numbers already say it all). ``pids``: each process
    key's pid."""
    parts = [part for part in rows.chunks(_READ)]
    if not parts:
        return []
    df = pd.concat(parts, ignore_index=True)
    df = df[df["graph_exec"].to_numpy() >= 0]
    steady = df[df["steady"].to_numpy(dtype=bool)]
    if steady.empty or steady.groupby("proc")["graph_exec"].nunique().max() < 2:
        return []
    gpu = (df["gpu_end_ns"] - df["gpu_start_ns"]).rename("gpu")
    all_of = df.assign(gpu=gpu).groupby(["proc", "graph_exec"])
    s = steady.assign(stalled=steady["stall"].to_numpy(dtype=bool),
                      late=(steady["klass"] == "launch_bound").to_numpy(dtype=bool))
    by = s.groupby(["proc", "graph_exec"])
    table = pd.DataFrame({
        "launches": all_of.size(), "gpu": all_of["gpu"].median(),
        "steady": by.size(), "stalls": by["stalled"].sum(), "late": by["late"].sum(),
        "window": by["window_ns"].median(), "gap": by["gpu_idle_ns"].median()}).dropna(
        subset=["steady"])
    table = table.sort_values("gpu", ascending=False, kind="stable")

    def us(v: float) -> float | None:
        return None if pd.isna(v) else round(float(v) / 1e3, 1)

    return [GraphExec(pid=pids.get(int(p), int(p) & 0xFFFFFF), graph_exec=int(e),
                      launches=int(r.launches), steady=int(r.steady), stalls=int(r.stalls),
                      launch_bound=int(r.late), gpu_us=us(r.gpu), window_us=us(r.window),
                      gpu_gap_us=us(r.gap))
            for (p, e), r in table.iterrows()]
