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
in collectives, -1 if none, :data:`.collectives.ABSENT` for a rank not in the input),
``collectives`` (whether it ran any), ``group`` (the group of ranks it runs them with, named
by its smallest process key; -1: none), ``rank`` (:func:`ranks`), ``idle_ns`` (the idle
periods inside the steady span, left out of ``span_ns``: GPU busy and the launch rate are over
serving time, :mod:`.idle`) and ``gpu_busy_capture`` (busy over the span with them).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..model import LAUNCH_CLASSES
from ..model import NOT_JUDGED as NOT_JUDGED_CLASSES
from ..trace.load import Trace
from .config import AnalysisConfig
from .launches import BUSY_BEFORE
from .stored import RowStore, as_rows

COLUMNS = ["proc", "pid", "name", "device", "launches", "warmup_launches", "steady_launches",
           *(str(k) for k in LAUNCH_CLASSES), "busy_ns", "span_ns", "gpu_busy",
           "launches_per_s", "collective_wait_ns", "waited_for", "collectives", "group", "rank",
           "idle_ns", "gpu_busy_capture"]

#: classes never in the steady state: nothing follows the last launch on a stream, and a
#: launch without GPU work in the trace has no replay to judge
NOT_JUDGED = [str(k) for k in NOT_JUDGED_CLASSES]


def warmup_and_steady(launches: RowStore,
                      cfg: AnalysisConfig) -> Iterator[dict[str, np.ndarray]]:
    """Per part of ``launches`` (:meth:`~.stored.RowStore.update_parts`), whether each launch
    is warm-up, and whether it is steady state: neither warm-up, nor the last launch on its
    stream, nor one whose GPU work is missing from the trace (profiler buffer loss: nothing
    to judge it by, and counting it would thin the stall share). Warm-up is counted in each
    process's own launches: ranks start at different times."""
    n = pd.concat([part.loc[~part["startup"].to_numpy(dtype=bool), "proc"].value_counts()
                   for part in launches.chunks(["proc", "startup"])])
    limit = {int(p): cfg.warmup_for(int(k)) for p, k in n.groupby(level=0).sum().items()}
    seen: dict[int, int] = {}
    for part in launches.chunks(["proc", "klass", "startup"]):
        startup = part["startup"].to_numpy(dtype=bool)
        # warm-up: a process's first launches after its start-up (:mod:`.startup`)
        nth = pd.Series(~startup).groupby(part["proc"].to_numpy(), sort=False).cumsum() \
            .to_numpy() - 1
        first = np.zeros(len(part), dtype=np.int64)
        before = np.zeros(len(part), dtype=np.int64)
        for p, at in part.groupby("proc", sort=False).indices.items():
            first[at], before[at] = limit.get(int(p), 0), seen.get(int(p), 0)
            seen[int(p)] = seen.get(int(p), 0) + int((~startup[at]).sum())
        warmup = ~startup & (nth + before < first)
        yield {"warmup": warmup, "steady": ~warmup & ~startup
               & ~part["klass"].isin(NOT_JUDGED).to_numpy(dtype=bool)}


def process_table(trace: Trace, launches: pd.DataFrame | RowStore) -> pd.DataFrame:
    """One row per process (see the module doc), from the launches a part at a time: what
    each part says of each process (counts, sums, its first and last replay on each device)
    added to what the parts before it said, so that no column of every launch is held."""
    names = trace.processes.set_index("proc") if len(trace.processes) else None
    seen: dict[int, _Process] = {}
    for part in as_rows(launches).chunks(_READ):
        col = {c: part[c].to_numpy() for c in _READ}
        col["klass"] = part["klass"].astype(str).to_numpy()
        for proc, own in part.groupby("proc").indices.items():
            seen.setdefault(int(proc), _Process()).add(col, own)
    rows = []
    for proc, p in sorted(seen.items()):
        device = min(p.devices, key=lambda d: (-p.devices[d], d))  # the mode (ties: least)
        busy_ns, span_ns = p.busy(device)
        idle_ns = p.idle_inside() if span_ns else 0.0
        span_ns -= idle_ns  # serving time: the idle periods inside the span left out
        n_work = p.n_work if span_ns else 0
        pid = int(names.loc[proc, "pid"]) if names is not None and proc in names.index \
            else int(proc) & 0xFFFFFF
        name = str(names.loc[proc, "name"]) if names is not None and proc in names.index else ""
        rows.append(dict(
            proc=proc, pid=pid, name=name, device=device, launches=p.launches,
            warmup_launches=p.warmup, steady_launches=p.steady,
            **{str(k): p.classes.get(str(k), 0) for k in LAUNCH_CLASSES}, busy_ns=busy_ns,
            span_ns=span_ns,
            gpu_busy=round(busy_ns / span_ns, 4) if span_ns else None,
            launches_per_s=round(n_work / (span_ns / 1e9), 2) if span_ns else None,
            collective_wait_ns=p.collective_wait,
            # the process it waited for longest in collectives (-1: none)
            waited_for=min(p.peers, key=lambda q: (-p.peers[q], q)) if p.peers else -1,
            collectives=p.grouped, group=p.group, rank=None, idle_ns=idle_ns,
            gpu_busy_capture=round(busy_ns / (span_ns + idle_ns), 4) if span_ns else None))
    table = pd.DataFrame(rows, columns=COLUMNS)
    table["rank"] = ranks(trace, table, {p for p, s in seen.items() if s.grouped})
    return table


def ranks(trace: Trace, table: pd.DataFrame, grouped: set[int]) -> pd.Series:
    """Each process's rank, where the trace says it (None elsewhere), in this order: the rank
    its trace names (``processes.rank``: a file's in a job; or ``meta.rank``, for the one
    process of a trace that launched graphs); for the ranks of a group (the processes with
    collectives, ``grouped``), their CUDA devices where each has its own (ranks of one node
    see every GPU: the device is the local rank); else their place in a job's files
    (``processes.order``)."""
    out = pd.Series([None] * len(table), index=table["proc"].to_numpy(), dtype=object)
    info = trace.processes.set_index("proc") if len(trace.processes) else pd.DataFrame()
    if "rank" in info:
        said = info["rank"].dropna()
        out.update(said[said.index.isin(out.index)].astype(int).astype(object))
    elif trace.meta.rank is not None and len(table) == 1:
        out.iloc[0] = trace.meta.rank
    unknown = [p for p in out.index[out.isna()] if p in grouped]
    devices = table.set_index("proc")["device"]
    if unknown and devices[list(grouped)].is_unique:
        out[unknown] = devices[unknown].astype(int).astype(object)
    elif unknown and "order" in info:
        out[unknown] = info["order"].reindex(unknown).astype(object)
    return out.reindex(table["proc"].to_numpy()).reset_index(drop=True)


#: the launch table's columns the per-process table reads
_READ = ["proc", "klass", "steady", "warmup", "device", "gpu_start_ns", "gpu_end_ns",
         "idle_ns", "quiet_start_ns",
         *BUSY_BEFORE, "collective_wait_ns", "waited_for", "collective_group"]


@dataclass
class _Process:
    """What the launches read so far say of one process: launches, warm-up and steady ones,
    the steady ones per class, their collective wait (per peer waited for, too), and of
    their replays: how many, the first start and last end, and on each device the replay
    that starts first and the one that ends last, with their busy-before counts."""

    launches: int = 0
    warmup: int = 0
    steady: int = 0
    collective_wait: int = 0
    n_work: int = 0
    work_start: float = np.inf
    work_end: float = np.nan
    classes: dict[str, int] = field(default_factory=dict)
    devices: dict[int, int] = field(default_factory=dict)
    first: dict[int, tuple[float, float]] = field(default_factory=dict)  # start, busy
    last: dict[int, tuple[float, float]] = field(default_factory=dict)  # end, busy
    peers: dict[int, int] = field(default_factory=dict)
    grouped: bool = False  # in a group of ranks (it has collectives)
    group: int = -1  # which (its launches' ``collective_group``)
    idle: list[tuple[float, float]] = field(default_factory=list)  # (start, length) each

    def add(self, col: dict[str, np.ndarray], own: np.ndarray) -> None:
        """Count the launches at positions ``own`` of a part (``col``: its columns)."""
        self.launches += len(own)
        idle = own[~np.isnan(col["idle_ns"][own].astype(np.float64))]
        self.idle += list(zip(col["quiet_start_ns"][idle].tolist(),
                              col["idle_ns"][idle].tolist(), strict=True))
        self.warmup += int(col["warmup"][own].sum())
        grouped = col["collective_group"][own]
        if (grouped >= 0).any():
            self.grouped, self.group = True, int(grouped[grouped >= 0][0])
        _count(self.devices, col["device"][own])
        steady = own[col["steady"][own].astype(bool)]
        self.steady += len(steady)
        _count(self.classes, col["klass"][steady])
        self.collective_wait += int(col["collective_wait_ns"][steady].sum())
        start = col["gpu_start_ns"][steady].astype(np.float64)
        work = steady[~np.isnan(start)]
        if len(work):
            start, end = start[~np.isnan(start)], col["gpu_end_ns"][work].astype(np.float64)
            self.n_work += len(work)
            self.work_start = min(self.work_start, float(start.min()))
            if not np.isnan(end).all():
                self.work_end = float(np.fmax(self.work_end, np.nanmax(end)))
            device = col["device"][work]
            for d in np.unique(device):  # a process's devices: a few, not launches
                on = np.flatnonzero(device == d)
                i = on[start[on].argmin()]  # ties: the earlier row
                if start[i] < self.first.get(int(d), (np.inf, 0.0))[0]:
                    self.first[int(d)] = (start[i], col["busy_before_start_ns"][work[i]])
                ended = on[~np.isnan(end[on])]
                if len(ended):
                    j = ended[end[ended].argmax()]
                    if end[j] > self.last.get(int(d), (-np.inf, 0.0))[0]:
                        self.last[int(d)] = (end[j], col["busy_before_end_ns"][work[j]])
        waited = steady[col["waited_for"][steady] != -1]  # a peer, or one not in the input
        peer, wait = col["waited_for"][waited], col["collective_wait_ns"][waited]
        for q in np.unique(peer):
            self.peers[int(q)] = self.peers.get(int(q), 0) + int(wait[peer == q].sum())

    def idle_inside(self) -> float:
        """The idle periods (:mod:`.idle`) between the first steady replay's start and the
        last one's end: left out of the serving time."""
        return float(sum(n for t, n in self.idle if self.work_start <= t < self.work_end))

    def busy(self, device: int) -> tuple[float, float]:
        """GPU busy time of ``device`` over the span of the steady replays, and that span (0
        for fewer than two): the busy time before the last replay's end on that device minus
        that before the first one's start (``busy_before_*_ns``, :mod:`.launches`), whole
        nanoseconds, so exact. The busy time of a process that replays on several devices is
        its main one's, over the span of its replays on that device."""
        if self.n_work < 2:
            return 0.0, 0.0
        span = float(self.work_end - self.work_start)
        if device not in self.first or device not in self.last:
            return 0.0, span
        busy = self.last[device][1] - self.first[device][1]
        return float(np.nan_to_num(busy)), span


def _count(counts: dict[Any, int], values: np.ndarray) -> None:
    """Add the number of times each of ``values`` occurs to ``counts``."""
    for v, n in zip(*np.unique(values, return_counts=True), strict=True):
        key = v.item() if isinstance(v, np.generic) else v
        counts[key] = counts.get(key, 0) + int(n)


def totals(processes: pd.DataFrame) -> tuple[float | None, float | None]:
    """The trace's GPU busy fraction and launch rate, from its processes' rows."""
    if processes.empty or not processes["span_ns"].sum():
        return None, None
    busy = round(float(processes["busy_ns"].sum() / processes["span_ns"].sum()), 4)
    rate = round(float(processes["launches_per_s"].fillna(0).sum()), 2)
    return busy, rate


def servers_rate(processes: pd.DataFrame) -> float | None:
    """The launch rate of the trace's servers: the ranks of a group step together, once (their
    mean rate), and independent processes (engines, groups) add up."""
    rates = processes[processes["launches_per_s"].notna()]
    if rates.empty:
        return None
    alone = rates["group"] < 0
    grouped = rates[~alone].groupby("group")["launches_per_s"].mean()
    return round(float(rates.loc[alone, "launches_per_s"].sum() + grouped.sum()), 2)


def groups_of(processes: pd.DataFrame) -> list[set[int]]:
    """The groups of ranks (processes that run collectives together) of the trace, each a set
    of process keys (groups of one left out)."""
    grouped = processes[processes["group"] >= 0].groupby("group")["proc"]
    return [{int(p) for p in procs} for _, procs in grouped if len(procs) > 1]
