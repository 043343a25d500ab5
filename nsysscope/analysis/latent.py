"""Latent causes: patterns on the hot path that break overlap once the current stall is fixed.

A step stalls at its first host wait; whatever would have made it wait later in the step costs
nothing today. In the engine's ``both`` mode the readback in ``sample`` stalls every step, and
the pageable upload in ``launch`` never shows: fix the readback and the upload is next. In a
CPU-bound engine a pageable upload costs nothing either, until the host gets faster.

Two patterns are looked for in the steady state of every process that launches graphs, on its
engine threads, and reported when they are not already the cause of a stall:

* ``cpu_to_gpu``: a host-to-device copy from pageable memory (it synchronises the host with the
  stream, whatever ``non_blocking`` says);
* ``gpu_to_cpu``: a device-to-host copy followed, on the same thread, by a stream or device
  synchronisation, or into pageable memory (``.item()``, ``.tolist()``, ``bool(t)``).

:func:`latent_copies` finds the copies of either pattern (per window of a long trace);
:func:`latent_sites` keeps those of the steady state and returns one
:class:`~nsysscope.model.LatentSite` per (kind, phase, op, API chain), most steps first.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model import LatentSite
from ..trace.apis import SYNC_APIS
from ..trace.load import Trace
from .bursts import count_before
from .calls import ThreadCalls
from .distinct import per_distinct_row
from .keys import KeyIndex
from .nvtx import NvtxIndex
from .stored import RowStore, as_rows, steady_parts

_KIND_LABEL = {1: "HtoD", 2: "DtoH"}


def latent_copies(trace: Trace, copies: pd.DataFrame, nvtx: NvtxIndex,
                  calls: ThreadCalls) -> pd.DataFrame:
    """Every copy of either pattern, with its ``kind``, NVTX ``phase`` and ``op``, API
    ``chain`` and ``call_us``: what :func:`latent_sites` picks the steady ones from."""
    htod, dtoh, pageable = trace.enums["htod"], trace.enums["dtoh"], trace.enums["pageable"]
    c = copies
    upload = (c["copy_kind"] == htod) & (c["src_kind"] == pageable)
    readback = (c["copy_kind"] == dtoh) & ((c["dst_kind"] == pageable) | _then_sync(calls, c))
    found = pd.concat([c[upload].assign(kind="cpu_to_gpu"), c[readback].assign(kind="gpu_to_cpu")])
    enc = nvtx.enclosing(found["tid"].to_numpy(), found["start_ns"].to_numpy())
    return pd.DataFrame({
        "tid": found["tid"].to_numpy(), "proc": found["proc"].to_numpy(),
        "start_ns": found["start_ns"].to_numpy(), "kind": found["kind"].to_numpy(),
        "phase": enc["phase"].fillna("").to_numpy(), "op": enc["op"].fillna("").to_numpy(),
        "chain": per_distinct_row(found[["name", "copy_kind", "bytes", "kind"]], _chain),
        "call_us": ((found["end_ns"] - found["start_ns"]) / 1e3).to_numpy()})


def latent_sites(found: pd.DataFrame, launches: pd.DataFrame | RowStore,
                 top: int = 5) -> list[LatentSite]:
    """The sites of the :func:`latent_copies` issued in the steady state and not already the
    cause of a stall, most steps first. The steady launches are read a part at a time: each
    part says which copies its stalls blamed, and how many of its launches each copy
    follows."""
    blamed = np.zeros(len(found), dtype=bool)
    step = np.zeros(len(found), dtype=np.int64)
    spans, n_steady = [], 0
    proc, start = found["proc"].to_numpy(), found["start_ns"].to_numpy()
    for steady in steady_parts(as_rows(launches), _READ):
        n_steady += len(steady)
        if steady.empty or found.empty:
            continue
        spans.append(steady.groupby("proc").agg(a=("api_start_ns", "min"),
                                                b=("next_api_start_ns", "max")))
        # a copy already blamed for a stall (the same thread and start) is not latent
        cause = steady[["cause_tid", "cause_start_ns"]].dropna().astype(np.int64)
        blamed |= KeyIndex.of(cause["cause_tid"], cause["cause_start_ns"]).first_row(
            found["tid"], found["start_ns"]) >= 0
        step += count_before(proc, start, steady["proc"].to_numpy(),
                             steady["api_start_ns"].to_numpy(), side="right")
    if not spans:
        return []
    span = pd.concat(spans).groupby(level=0).agg(a=("a", "min"), b=("b", "max"))
    found = found.assign(step=np.where(np.isin(proc, span.index), step, -1))
    found = found[_in_steady_span(found, span) & ~blamed]
    if found.empty:
        return []
    g = found.groupby(["kind", "phase", "op", "chain"], sort=False).agg(
        calls=("tid", "size"), steps=("step", "nunique"), mean_call_us=("call_us", "mean"),
        pid=("proc", "first"))
    g = g.reset_index().sort_values(["steps", "calls"], ascending=False).head(top)
    return [LatentSite(kind=r.kind, calls=int(r.calls), steps=int(r.steps),
                       steady_steps=n_steady, phase=r.phase or None, op=r.op or None,
                       api_chain=r.chain, mean_call_us=round(float(r.mean_call_us), 1),
                       pid=int(r.pid) & 0xFFFFFF)
            for r in g.itertuples()]


#: the launch table's columns the latent sites read
_READ = ["proc", "steady", "api_start_ns", "next_api_start_ns", "cause_tid", "cause_start_ns"]


def _chain(c: pd.DataFrame) -> pd.Series:
    """``cudaMemcpyAsync DtoH 4 B`` (`` (pageable)`` for an upload) of each copy."""
    pageable = np.where(c["kind"] == "cpu_to_gpu", " (pageable)", "")
    return (c["name"].astype(str) + " " + c["copy_kind"].map(_KIND_LABEL).fillna("") + " "
            + c["bytes"].astype(str) + " B" + pageable)


def _in_steady_span(copies: pd.DataFrame, span: pd.DataFrame) -> np.ndarray:
    """Copies issued by a launching process between its first and last steady launch
    (``span``: per process, ``a`` the first one's call, ``b`` the last one's next call)."""
    proc = copies["proc"].to_numpy()
    t = copies["start_ns"].to_numpy(dtype=np.float64)
    inside = np.zeros(len(copies), dtype=bool)
    for p, a, b in zip(span.index, span["a"], span["b"], strict=True):
        own = proc == p
        inside[own] = (t[own] >= a) & (t[own] < b)
    return inside


def _then_sync(calls: ThreadCalls, c: pd.DataFrame) -> pd.Series:
    """Whether the thread's next CUDA call after each copy is a synchronisation, among the
    calls the loader reads (launches, syncs, records, stream waits, queries, copies: a
    ``cudaLaunchKernel`` in between is not seen)."""
    sync = calls.table["name"].isin(SYNC_APIS).to_numpy(dtype=bool)
    # per call (and row -1: no such call): the next call is on the same thread and syncs
    next_is_sync = np.r_[sync[1:] & calls.follows_on_thread[1:], False, False]
    return pd.Series(next_is_sync[calls.row(c["tid"], c["corr_id"])], index=c.index)
