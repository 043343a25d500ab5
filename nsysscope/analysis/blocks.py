"""Host blocks: CUDA calls that make a host thread wait for the GPU, and what each waits on.

A block is a stream, event, device or context synchronisation (runtime or driver API), a
copy that completes synchronously (a synchronous ``cudaMemcpy``, or any copy touching
pageable host memory: a pageable readback blocks inside ``cudaMemcpyAsync`` itself), or a
polling loop of event/stream queries (:mod:`.polling`).

What a block waits on is expressed as a *scope* and a *boundary*: it covers the GPU work
enqueued before ``boundary_ns`` on ``stream`` (scope ``stream`` or ``event``) or on every
stream (scope ``device``). For an event sync the boundary is the ``cudaEventRecord`` that
``eventSyncId`` links it to, and so is a polling loop's whose last query the export links to
its event. ``exact`` is False where the export lacks those tables or links; such blocks are
matched by timing alone.

A blocking copy is matched by timing: whether it waits for queued work depends on its size
and direction (a small pageable upload returns once staged), so only a copy that was still
running when a launch's work ended is taken to have waited on it.

Output columns: ``block``, ``tid``, ``corr_id``, ``name``, ``start_ns``, ``end_ns``,
``scope``, ``stream``, ``boundary_ns``, ``exact``, ``anchor_corr`` and ``anchor_tid`` (the
call whose predecessor may be the copy that caused the block: the sync itself, or the
``cudaEventRecord`` it waits on, and that call's thread), ``proc``, ``polls`` (tries of a
polling loop, 0 otherwise), and for copies ``copy_kind``, ``src_kind``, ``dst_kind``,
``bytes``.

Every key is per process: correlation ids, streams and event sync ids restart in each one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.apis import SYNC_APIS, is_copy_api, process_of
from ..trace.load import Trace
from .calls import ThreadCalls
from .config import AnalysisConfig
from .distinct import per_distinct
from .keys import join_first
from .nvtx import NvtxIndex
from .polling import POLLING, polling_blocks

#: the calls that wait on one stream, and on one event (the queries: by polling them)
_STREAM_WAITS = frozenset({"cudaStreamSynchronize", "cuStreamSynchronize", "cudaStreamQuery",
                           "cuStreamQuery"})
_EVENT_WAITS = frozenset({"cudaEventSynchronize", "cuEventSynchronize", "cudaEventQuery",
                          "cuEventQuery"})


def copy_calls(trace: Trace) -> pd.DataFrame:
    """Every copy API call with its GPU copy: kind, memory kinds, bytes and stream."""
    api = trace.api
    copy_names = [n for n in api["name"].cat.categories if is_copy_api(n)]
    calls = api.loc[api["name"].isin(copy_names),
                    ["tid", "proc", "corr_id", "name", "start_ns", "end_ns"]]
    ops = trace.gpu_ops.loc[trace.gpu_ops["kind"] == "memcpy",
                            ["proc", "corr_id", "stream", "copy_kind", "src_kind", "dst_kind",
                             "bytes", "start_ns", "end_ns"]]
    ops = ops.rename(columns={"start_ns": "gpu_start_ns", "end_ns": "gpu_end_ns"})
    out = join_first(calls, ops, on=["proc", "corr_id"])
    for col in ("stream", "copy_kind", "src_kind", "dst_kind", "bytes"):
        out[col] = out[col].fillna(-1).astype("int64")
    # the name stays a categorical: a few names over every copy (400,000 at 10^5 launches),
    # made text only where a copy becomes a block
    return out


def block_table(trace: Trace, copies: pd.DataFrame, calls: ThreadCalls, records: pd.DataFrame,
                cfg: AnalysisConfig, nvtx: NvtxIndex | None = None) -> pd.DataFrame:
    """Every block: syncs, blocking copies (``copies``: :func:`copy_calls`) and polling loops
    (found along ``calls``; ``nvtx``: the ranges they may lie in, :func:`.polling_blocks`);
    ``records``: :func:`.streams.event_records_with_calls`."""
    api = trace.api
    syncs = api.loc[api["name"].isin(SYNC_APIS),
                    ["tid", "proc", "corr_id", "name", "start_ns", "end_ns"]]
    syncs = syncs.assign(name=syncs["name"].astype(str), anchor_corr=syncs["corr_id"],
                         anchor_tid=syncs["tid"])
    pageable = trace.enums["pageable"]
    is_async = per_distinct(copies["name"], lambda s: s.str.contains("Async"), False)
    blocking = ~is_async | (copies["src_kind"] == pageable) | (copies["dst_kind"] == pageable)
    blocking_copies = copies.loc[blocking, ["tid", "proc", "corr_id", "name", "start_ns",
                                            "end_ns", "stream", "copy_kind", "src_kind",
                                            "dst_kind", "bytes"]]
    blocking_copies = blocking_copies.assign(name=blocking_copies["name"].astype(str))
    s = _scope_waits(trace, syncs, syncs["name"], records)
    c = blocking_copies.assign(scope=np.where(blocking_copies["stream"] >= 0, "stream", "device"),
                               boundary_ns=blocking_copies["start_ns"], exact=False,
                               anchor_corr=blocking_copies["corr_id"],
                               anchor_tid=blocking_copies["tid"])
    polls = polling_blocks(trace, calls, cfg, nvtx)
    polls = polls.assign(proc=process_of(polls["tid"]))
    # a loop waits on what its last try (the one that found the work done) queried
    p = _scope_waits(trace, polls, polls["name"].str.removesuffix(POLLING), records,
                     call="done_corr").drop(columns="done_corr")
    blocks = pd.concat([s, c, p], ignore_index=True).sort_values("start_ns", kind="stable")
    for col in ("copy_kind", "src_kind", "dst_kind", "bytes", "stream", "anchor_corr",
                "anchor_tid", "polls"):
        blocks[col] = blocks[col].fillna(-1 if col != "polls" else 0).astype("int64")
    blocks["exact"] = blocks["exact"].astype(bool)
    blocks = blocks.reset_index(drop=True)
    blocks.insert(0, "block", np.arange(len(blocks)))
    return blocks


def _scope_waits(trace: Trace, waits: pd.DataFrame, api_name: pd.Series,
                 records: pd.DataFrame, call: str = "corr_id") -> pd.DataFrame:
    """Scope, stream and boundary of each wait of ``waits`` (synchronisation calls, or
    polling loops), whose CUDA call is ``api_name`` and whose sync record is that of the
    call ``call`` names. An event wait's boundary is its event's record, from ``records``:
    the wait is exact then, and its anchor is that record."""
    meta = trace.meta
    syncs = trace.syncs.rename(columns={"corr_id": call})
    out = join_first(waits, syncs, on=["proc", call])
    out["scope"] = "device"
    out["boundary_ns"] = out["start_ns"]
    out["exact"] = True
    name = api_name.reset_index(drop=True)
    is_stream = name.isin(_STREAM_WAITS)
    known_stream = is_stream & out["stream"].notna() & (out["stream"] >= 0) & \
        (out["stream"] < 2**32 - 1)
    out.loc[known_stream, "scope"] = "stream"
    out.loc[is_stream & ~known_stream, "exact"] = False
    is_event = name.isin(_EVENT_WAITS)
    out.loc[is_event, "exact"] = False
    out.loc[is_event, "scope"] = "event"
    if meta.has_sync_records and meta.has_event_records and len(trace.event_records):
        records = records.rename(columns={
            "start_ns": "record_ns", "stream": "record_stream", "corr_id": "record_corr",
            "tid": "record_tid"})
        out = join_first(out, records[["proc", "event_sync_id", "record_ns", "record_stream",
                                       "record_corr", "record_tid"]], on=["proc", "event_sync_id"])
        resolved = is_event.to_numpy() & out["record_ns"].notna().to_numpy()
        out.loc[resolved, "boundary_ns"] = out.loc[resolved, "record_ns"]
        out.loc[resolved, "stream"] = out.loc[resolved, "record_stream"]
        out.loc[resolved, "exact"] = True
        out.loc[resolved, "anchor_corr"] = out.loc[resolved, "record_corr"]
        out.loc[resolved, "anchor_tid"] = out.loc[resolved, "record_tid"]
        out = out.drop(columns=["record_ns", "record_stream", "record_corr", "record_tid"])
    return out.drop(columns=["event_sync_id"])
