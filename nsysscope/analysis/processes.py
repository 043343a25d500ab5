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

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..model import LAUNCH_CLASSES, LaunchClass
from ..trace.load import Trace
from .config import AnalysisConfig
from .launches import BUSY_BEFORE
from .stored import RowStore, as_rows

COLUMNS = ["proc", "pid", "name", "device", "launches", "warmup_launches", "steady_launches",
           *(str(k) for k in LAUNCH_CLASSES), "busy_ns", "span_ns", "gpu_busy",
           "launches_per_s", "collective_wait_ns", "waited_for"]

#: classes never in the steady state: nothing follows the last launch on a stream, and a
#: launch without GPU work in the trace has no replay to judge
NOT_JUDGED = [LaunchClass.LAST.value, LaunchClass.NO_GPU_WORK.value]


def warmup_and_steady(launches: RowStore,
                      cfg: AnalysisConfig) -> Iterator[dict[str, np.ndarray]]:
    """Per part of ``launches`` (:meth:`~.stored.RowStore.update_parts`), whether each launch
    is warm-up, and whether it is steady state: neither warm-up, nor the last launch on its
    stream, nor one whose GPU work is missing from the trace (profiler buffer loss: nothing
    to judge it by, and counting it would thin the stall share). Warm-up is counted in each
    process's own launches: ranks start at different times."""
    n = pd.concat([part["proc"].value_counts() for part in launches.chunks(["proc"])])
    limit = {int(p): cfg.warmup_for(int(k)) for p, k in n.groupby(level=0).sum().items()}
    seen: dict[int, int] = {}
    for part in launches.chunks(["proc", "klass"]):
        nth = part.groupby("proc", sort=False).cumcount().to_numpy()
        first = np.zeros(len(part), dtype=np.int64)
        before = np.zeros(len(part), dtype=np.int64)
        for p, at in part.groupby("proc", sort=False).indices.items():
            first[at], before[at] = limit[int(p)], seen.get(int(p), 0)
            seen[int(p)] = seen.get(int(p), 0) + len(at)
        warmup = nth + before < first
        yield {"warmup": warmup,
               "steady": ~warmup & ~part["klass"].isin(NOT_JUDGED).to_numpy(dtype=bool)}


def process_table(trace: Trace, launches: pd.DataFrame | RowStore) -> pd.DataFrame:
    """One row per process (see the module doc), from the launches a part at a time: what
    each part says of each process (counts, sums, its first and last replay on each device)
    put together, so that no column of every launch is held at once."""
    names = trace.processes.set_index("proc") if len(trace.processes) else None
    parts = [_Part.of(c) for c in as_rows(launches).chunks(_READ)]
    if not parts:
        return pd.DataFrame(columns=COLUMNS)
    own = pd.concat([p.own for p in parts]).groupby(level=0).agg(
        {c: "min" if c == "work_start" else "max" if c == "work_end" else "sum"
         for c in parts[0].own.columns})
    devices = pd.concat([p.devices for p in parts]).groupby(level=[0, 1]).sum()
    # the replay that starts first on each device (ties: the earlier row), and that ends last
    first = _earliest(pd.concat([p.first for p in parts]).sort_values("start", kind="stable"))
    last = _earliest(pd.concat([p.last for p in parts]).sort_values("end", ascending=False,
                                                                    kind="stable"))
    peers = pd.concat([p.peers for p in parts]).groupby(level=[0, 1]).sum()
    rows = []
    for proc, r in own.sort_index().iterrows():
        seen = devices.xs(proc, level=0)
        device = int(seen.index[seen.to_numpy() == seen.max()].min())  # the mode (ties: least)
        busy_ns, span_ns = _busy(r, first, last, (proc, device))
        n_work = int(r["n_work"]) if span_ns else 0
        pid = int(names.loc[proc, "pid"]) if names is not None and proc in names.index \
            else int(proc) & 0xFFFFFF
        name = str(names.loc[proc, "name"]) if names is not None and proc in names.index else ""
        rows.append(dict(
            proc=int(proc), pid=pid, name=name, device=device, launches=int(r["launches"]),
            warmup_launches=int(r["warmup"]), steady_launches=int(r["steady"]),
            **{str(k): int(r[str(k)]) for k in LAUNCH_CLASSES}, busy_ns=busy_ns,
            span_ns=span_ns,
            gpu_busy=round(busy_ns / span_ns, 4) if span_ns else None,
            launches_per_s=round(n_work / (span_ns / 1e9), 2) if span_ns else None,
            collective_wait_ns=int(r["collective_wait_ns"]),
            waited_for=_top_peer(peers, proc)))
    return pd.DataFrame(rows, columns=COLUMNS)


#: the launch table's columns the per-process table reads
_READ = ["proc", "klass", "steady", "warmup", "device", "gpu_start_ns", "gpu_end_ns",
         *BUSY_BEFORE, "collective_wait_ns", "waited_for"]


@dataclass(frozen=True)
class _Part:
    """What one part of the launches says of each process: ``own`` (per process: launches,
    warm-up and steady counts, a count per class and the collective wait of the steady ones,
    and of its steady replays: how many, the first start and the last end), ``devices``
    (launches per process and device), ``first`` / ``last`` (per process and device: the
    steady replay that starts first / ends last, with its busy-before count), ``peers``
    (steady collective wait per process and peer waited for)."""

    own: pd.DataFrame
    devices: pd.Series
    first: pd.DataFrame
    last: pd.DataFrame
    peers: pd.Series

    @classmethod
    def of(cls, c: pd.DataFrame) -> _Part:
        steady = c[c["steady"].to_numpy(dtype=bool)]
        own = c.groupby("proc").agg(launches=("proc", "size"), warmup=("warmup", "sum"))
        own["steady"] = steady.groupby("proc").size()
        own["collective_wait_ns"] = steady.groupby("proc")["collective_wait_ns"].sum()
        classes = pd.crosstab(steady["proc"], steady["klass"].astype(str))
        for k in LAUNCH_CLASSES:
            own[str(k)] = classes[str(k)] if str(k) in classes.columns else 0
        work = steady[steady["gpu_start_ns"].notna()]
        spans = work.groupby("proc").agg(n_work=("proc", "size"),
                                         work_start=("gpu_start_ns", "min"),
                                         work_end=("gpu_end_ns", "max"))
        own = own.join(spans).fillna({c: 0 for c in own.columns if c not in spans.columns}
                                     | {"n_work": 0})
        by = work.groupby(["proc", "device"])
        starts = work.loc[by["gpu_start_ns"].idxmin()]
        ended = work[work["gpu_end_ns"].notna()]
        ends = ended.loc[ended.groupby(["proc", "device"])["gpu_end_ns"].idxmax()]
        waited = steady[steady["waited_for"] >= 0]
        return cls(
            own=own, devices=c.groupby(["proc", "device"]).size(),
            first=pd.DataFrame({"proc": starts["proc"], "device": starts["device"],
                                "start": starts["gpu_start_ns"],
                                "busy": starts["busy_before_start_ns"]}),
            last=pd.DataFrame({"proc": ends["proc"], "device": ends["device"],
                               "end": ends["gpu_end_ns"], "busy": ends["busy_before_end_ns"]}),
            peers=waited.groupby(["proc", "waited_for"])["collective_wait_ns"].sum())


def _earliest(rows: pd.DataFrame) -> pd.DataFrame:
    """The first of ``rows`` for each process and device, indexed by them."""
    return rows.drop_duplicates(["proc", "device"]).set_index(["proc", "device"])


def _busy(own: pd.Series, first: pd.DataFrame, last: pd.DataFrame,
          key: tuple[int, int]) -> tuple[float, float]:
    """GPU busy time of a process's main device over the span of its steady replays, and
    that span (0 for fewer than two): the busy time before the last replay's end on that
    device minus that before the first one's start (``busy_before_*_ns``, :mod:`.launches`),
    whole nanoseconds, so exact. The busy time of a process that replays on several devices
    is its main one's, over the span of its replays on that device."""
    if own["n_work"] < 2:
        return 0.0, 0.0
    span = float(own["work_end"] - own["work_start"])
    if key not in first.index or key not in last.index:
        return 0.0, span
    busy = last.loc[key, "busy"] - first.loc[key, "busy"]
    return float(np.nan_to_num(busy)), span


def _top_peer(peers: pd.Series, proc: int) -> int:
    """The process ``proc``'s steady launches waited for longest in collectives (-1:
    none)."""
    if proc not in peers.index.get_level_values(0):
        return -1
    return int(peers.xs(proc, level=0).idxmax())


def totals(processes: pd.DataFrame) -> tuple[float | None, float | None]:
    """The trace's GPU busy fraction and launch rate, from its processes' rows."""
    if processes.empty or not processes["span_ns"].sum():
        return None, None
    busy = round(float(processes["busy_ns"].sum() / processes["span_ns"].sum()), 4)
    rate = round(float(processes["launches_per_s"].fillna(0).sum()), 2)
    return busy, rate
