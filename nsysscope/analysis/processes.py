"""Per-process results: one row per process that launched CUDA graphs.

A server trace holds several processes (the API server, the scheduler, one worker per
tensor-parallel rank); each worker has its own launches, streams and GPU. Warm-up, GPU busy
time and the launch rate are therefore computed per process, and the trace's totals are
built from these rows: counts add up, busy is total busy time over total span, and the
launch rate is the sum of the processes' rates.

Columns: ``proc``, ``pid``, ``name``, ``device``, ``launches``, ``warmup_launches``,
``steady_launches``, one count per launch class (steady state), ``busy_ns`` and ``span_ns``
(GPU busy time and the span of the steady replays), ``gpu_busy``, ``launches_per_s``,
``collective_wait_ns`` (steady-state total), ``waited_for`` (the process it waited for most
in collectives, -1 if none).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model import LAUNCH_CLASSES, LaunchClass
from ..trace.load import Trace
from .config import AnalysisConfig

COLUMNS = ["proc", "pid", "name", "device", "launches", "warmup_launches", "steady_launches",
           *(str(k) for k in LAUNCH_CLASSES), "busy_ns", "span_ns", "gpu_busy",
           "launches_per_s", "collective_wait_ns", "waited_for"]

#: classes never in the steady state: nothing follows the last launch on a stream, and a
#: launch without GPU work in the trace has no replay to judge
NOT_JUDGED = [LaunchClass.LAST.value, LaunchClass.NO_GPU_WORK.value]


def warmup_and_steady(launches: pd.DataFrame, cfg: AnalysisConfig) -> tuple[pd.Series, pd.Series]:
    """Per launch: whether it is warm-up, and whether it is steady state: neither warm-up,
    nor the last launch on its stream, nor one whose GPU work is missing from the trace
    (profiler buffer loss: nothing to judge it by, and counting it would thin the stall
    share). Warm-up is counted in each process's own launches: ranks start at different
    times."""
    nth = launches.groupby("proc", sort=False).cumcount()
    n = launches.groupby("proc", sort=False)["launch"].transform("size")
    limit = n.map({k: cfg.warmup_for(int(k)) for k in n.unique()})  # once per process size
    warmup = nth < limit
    return warmup, ~warmup & ~launches["klass"].isin(NOT_JUDGED)


def process_table(trace: Trace, launches: pd.DataFrame) -> pd.DataFrame:
    """One row per process (see the module doc)."""
    names = trace.processes.set_index("proc") if len(trace.processes) else None
    rows = []
    columns = ["proc", "klass", "device", "warmup", "steady", "gpu_start_ns", "gpu_end_ns",
               "busy_before_start_ns", "busy_before_end_ns", "collective_wait_ns", "waited_for"]
    for proc, own in launches[columns].groupby("proc", sort=True):
        steady = own[own["steady"]]
        counts = steady["klass"].value_counts()
        device = int(own["device"].mode().iloc[0]) if len(own) else -1
        busy_ns, span_ns, n_work = _busy(steady, device)
        pid = int(names.loc[proc, "pid"]) if names is not None and proc in names.index \
            else int(proc) & 0xFFFFFF
        name = str(names.loc[proc, "name"]) if names is not None and proc in names.index else ""
        rows.append(dict(
            proc=int(proc), pid=pid, name=name, device=device, launches=len(own),
            warmup_launches=int(own["warmup"].sum()), steady_launches=len(steady),
            **{str(k): int(counts.get(k, 0)) for k in LAUNCH_CLASSES}, busy_ns=busy_ns,
            span_ns=span_ns,
            gpu_busy=round(busy_ns / span_ns, 4) if span_ns else None,
            launches_per_s=round(n_work / (span_ns / 1e9), 2) if span_ns else None,
            collective_wait_ns=int(steady["collective_wait_ns"].sum()),
            waited_for=_top_peer(steady)))
    return pd.DataFrame(rows, columns=COLUMNS)


def _busy(steady: pd.DataFrame, device: int) -> tuple[float, float, int]:
    """GPU busy time of a process's ``device`` over the span of its steady replays, that span,
    and the replays in it: the busy time before the last replay's end minus that before the
    first one's start (``busy_before_*_ns``, :mod:`.launches`), whole nanoseconds, so exact.
    The busy time of a process that replays on several devices is its main one's, over the
    span of its replays on that device."""
    work = steady.dropna(subset=["gpu_start_ns"])
    if len(work) < 2:
        return 0.0, 0.0, 0
    t0, t1 = work["gpu_start_ns"].min(), work["gpu_end_ns"].max()
    on = work[work["device"] == device]
    if on.empty:
        return 0.0, float(t1 - t0), len(work)
    first = on["gpu_start_ns"].to_numpy().argmin()
    last = on["gpu_end_ns"].to_numpy().argmax()
    busy = on["busy_before_end_ns"].iloc[last] - on["busy_before_start_ns"].iloc[first]
    return float(np.nan_to_num(busy)), float(t1 - t0), len(work)


def _top_peer(steady: pd.DataFrame) -> int:
    """The process this one's steady launches waited for longest in collectives (-1: none)."""
    w = steady[steady["waited_for"] >= 0]
    if w.empty:
        return -1
    return int(w.groupby("waited_for")["collective_wait_ns"].sum().idxmax())


def totals(processes: pd.DataFrame) -> tuple[float | None, float | None]:
    """The trace's GPU busy fraction and launch rate, from its processes' rows."""
    if processes.empty or not processes["span_ns"].sum():
        return None, None
    busy = round(float(processes["busy_ns"].sum() / processes["span_ns"].sum()), 4)
    rate = round(float(processes["launches_per_s"].fillna(0).sum()), 2)
    return busy, rate
