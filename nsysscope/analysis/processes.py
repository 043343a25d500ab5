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
from .launches import BUSY_BEFORE

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
    """One row per process (see the module doc). Each process's values are read from
    ``launches`` by position, not from a copy of its rows (at 10^6 launches the copies of a
    process's rows and of its steady ones were 150 MB)."""
    names = trace.processes.set_index("proc") if len(trace.processes) else None
    col = {c: launches[c].to_numpy() for c in _READ}
    rows = []
    for proc, own in sorted(launches.groupby("proc").indices.items()):
        steady = own[col["steady"][own]]
        counts = launches["klass"].iloc[steady].value_counts()
        device = int(pd.Series(col["device"][own]).mode().iloc[0]) if len(own) else -1
        busy_ns, span_ns, n_work = _busy(col, steady, device)
        pid = int(names.loc[proc, "pid"]) if names is not None and proc in names.index \
            else int(proc) & 0xFFFFFF
        name = str(names.loc[proc, "name"]) if names is not None and proc in names.index else ""
        rows.append(dict(
            proc=int(proc), pid=pid, name=name, device=device, launches=len(own),
            warmup_launches=int(col["warmup"][own].sum()), steady_launches=len(steady),
            **{str(k): int(counts.get(k, 0)) for k in LAUNCH_CLASSES}, busy_ns=busy_ns,
            span_ns=span_ns,
            gpu_busy=round(busy_ns / span_ns, 4) if span_ns else None,
            launches_per_s=round(n_work / (span_ns / 1e9), 2) if span_ns else None,
            collective_wait_ns=int(col["collective_wait_ns"][steady].sum()),
            waited_for=_top_peer(col, steady)))
    return pd.DataFrame(rows, columns=COLUMNS)


#: the launch table's columns the per-process table reads besides ``proc`` and ``klass``
_READ = ["steady", "warmup", "device", "gpu_start_ns", "gpu_end_ns", *BUSY_BEFORE,
         "collective_wait_ns", "waited_for"]


def _busy(col: dict[str, np.ndarray], steady: np.ndarray,
          device: int) -> tuple[float, float, int]:
    """GPU busy time of a process's ``device`` over the span of its ``steady`` replays
    (positions), that span, and the replays in it: the busy time before the last replay's end
    minus that before the first one's start (``busy_before_*_ns``, :mod:`.launches`), whole
    nanoseconds, so exact. The busy time of a process that replays on several devices is its
    main one's, over the span of its replays on that device."""
    work = steady[~np.isnan(col["gpu_start_ns"][steady])]
    if len(work) < 2:
        return 0.0, 0.0, 0
    start, end = col["gpu_start_ns"][work], col["gpu_end_ns"][work]
    span = float(np.nanmax(end) - start.min())
    on = col["device"][work] == device
    if not on.any():
        return 0.0, span, len(work)
    first, last = work[on][start[on].argmin()], work[on][np.nanargmax(end[on])]
    busy = col["busy_before_end_ns"][last] - col["busy_before_start_ns"][first]
    return float(np.nan_to_num(busy)), span, len(work)


def _top_peer(col: dict[str, np.ndarray], steady: np.ndarray) -> int:
    """The process this one's ``steady`` launches (positions) waited for longest in
    collectives (-1: none)."""
    peer = col["waited_for"][steady]
    waited = peer >= 0
    if not waited.any():
        return -1
    wait = pd.Series(col["collective_wait_ns"][steady][waited])
    return int(wait.groupby(peer[waited]).sum().idxmax())


def totals(processes: pd.DataFrame) -> tuple[float | None, float | None]:
    """The trace's GPU busy fraction and launch rate, from its processes' rows."""
    if processes.empty or not processes["span_ns"].sum():
        return None, None
    busy = round(float(processes["busy_ns"].sum() / processes["span_ns"].sum()), 4)
    rate = round(float(processes["launches_per_s"].fillna(0).sum()), 2)
    return busy, rate
