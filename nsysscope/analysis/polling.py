"""Polling loops as host blocks: ``while not event.query(): ...`` waits too.

nsys records each try as a short, non-blocking ``cudaEventQuery``/``cudaStreamQuery`` (or
driver ``cuEventQuery``/``cuStreamQuery``) call. On one thread, queries that follow each other
with no other CUDA call in between (of those the loader reads: launches, syncs, records, stream
waits, queries and copies; an eager kernel launch between two tries is not seen) and no more
than ``poll_gap_us`` apart form one block, from the first query's start to the last one's end
(the try that found the work done). Where the export has the calls' return codes, a try that
succeeded ends its loop (the others return ``cudaErrorNotReady``), so two loops back to back
stay two blocks. A tight loop leaves a few microseconds between tries; an asyncio loop that
yields between tries, tens. A run needs ``poll_min_queries`` tries: one query that finds the
work done is no wait at all.

Not every query loop is the engine waiting. NCCL's watchdog thread in every
``torch.distributed`` process queries its own events hundreds of times; a thread that only
queries, and never launches graphs, copies, records events or synchronises, is left out.
torch's caching host allocator, when a server allocates pinned memory every step (vLLM,
sglang), queries the events of the pinned blocks freed so far, one after the other, to reuse
those whose copies are done: a handful of queries, mostly successful, then the allocation.
Where the export has the return codes each success ends a run, so those never make a loop
(a loop that waits on several events in turn, all tries but its last unfinished, stays one);
without them, where it links each query to its event (nsys's sync records), a query of
another event than the try before it starts a run of its own (the allocator queries one event
per freed block: without the codes, 139 runs of 3-6 tries on the H100 server capture made
loops, none once a run must poll one event); where it has neither
(torch.profiler) the tries of a run that starts inside a tensor op (an
``aten::`` range: torch.profiler records every op, nsys with ``--pytorch=autograd-nvtx``)
are the op's own bookkeeping, not the engine polling: a loop written in Python
(``while not event.query()``) runs outside any op. On the H100 torch.profiler server capture
with per-step pinned buffers, 92 such runs of 3 tries, all inside ``aten::empty`` or
``aten::zeros``.

Which event a loop polled is the event of its last try, the one that found the work done:
:mod:`.blocks` resolves it as an event sync's, where the export links queries to their events
(each ``cudaEventQuery`` has a SYNCHRONIZATION row whose ``eventSyncId`` names its
``cudaEventRecord``; every query of the H200 captures does). Where it does not, the loop is
matched to launches by timing (``exact`` False), and its cause is found as for an event wait:
when the call right before the loop is a ``cudaEventRecord`` (the event just recorded, e.g.
after a readback copy), the cause is the call before that record; otherwise the call before
the first try.

Output: the block columns of :mod:`.blocks`, with ``polls`` (the number of tries) and
``done_corr`` (the correlation id of the last try).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.apis import QUERY_APIS, RECORD_APIS
from ..trace.load import Trace
from .calls import ThreadCalls
from .config import AnalysisConfig
from .nvtx import NvtxIndex

#: ``cudaErrorNotReady`` / ``CUDA_ERROR_NOT_READY``: the query's work is still running
NOT_READY = 600
#: what a loop's name adds to its query's: ``cudaEventQuery (polling)``
POLLING = " (polling)"


def _queried_events(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """The event each of the calls at ``rows`` of ``trace.api`` queried, where the export
    links the query to its event (its sync record's ``eventSyncId``), else -1."""
    api, syncs = trace.api, trace.syncs
    linked = syncs[syncs["event_sync_id"] >= 0].drop_duplicates(["proc", "corr_id"])
    if linked.empty:
        return np.full(len(rows), -1, dtype=np.int64)
    keys = pd.MultiIndex.from_arrays([api["proc"].to_numpy()[rows],
                                      api["corr_id"].to_numpy()[rows]])
    at = pd.MultiIndex.from_frame(linked[["proc", "corr_id"]]).get_indexer(keys)
    return np.where(at >= 0, linked["event_sync_id"].to_numpy()[np.maximum(at, 0)], -1)


def polling_blocks(trace: Trace, calls: ThreadCalls, cfg: AnalysisConfig,
                   nvtx: NvtxIndex | None = None) -> pd.DataFrame:
    """One row per polling loop on an engine thread: ``tid, corr_id, name, start_ns, end_ns,
    polls, anchor_corr, anchor_tid, done_corr``. ``calls`` orders the trace's calls by thread;
    ``nvtx``: the trace's ranges, where the queries inside a tensor op are told apart (the
    module's doc)."""
    api = trace.api
    is_query = api["name"].isin(QUERY_APIS).to_numpy()
    cols = ["tid", "corr_id", "name", "start_ns", "end_ns", "polls", "anchor_corr", "anchor_tid",
            "done_corr"]
    if not is_query.any():
        return pd.DataFrame({c: pd.Series(dtype="int64" if c != "name" else object) for c in cols})
    engine_threads = pd.unique(api["tid"].to_numpy()[~is_query])  # (hashed: order unused)
    rows = calls.order[np.isin(api["tid"].to_numpy()[calls.order], engine_threads)]
    tid, start, end, corr, status = (api[c].to_numpy()[rows] for c in
                                     ("tid", "start_ns", "end_ns", "corr_id", "status"))
    name = api["name"].iloc[rows]
    query = is_query[rows]
    record = name.isin(RECORD_APIS).to_numpy()
    same_thread = np.r_[False, tid[1:] == tid[:-1]]
    gap = np.r_[np.inf, start[1:] - end[:-1]]
    continues = query & np.r_[False, query[:-1]] & same_thread & (gap <= cfg.poll_gap_us * 1e3)
    if (status[query] == NOT_READY).any():  # return codes recorded: a success ends a loop
        continues &= np.r_[False, status[:-1] == NOT_READY]
    else:  # none: a loop polls one event, and a try of another event (where the export names
        # each try's) starts a run of its own
        event = _queried_events(trace, rows)
        known = event >= 0
        continues &= ~np.r_[False, known[1:] & known[:-1] & (event[1:] != event[:-1])]
    first = query & ~continues
    run = np.cumsum(first)
    rows = np.flatnonzero(query)
    runs = pd.DataFrame({"run": run[rows], "row": rows}).groupby("run")["row"].agg(
        ["first", "last", "size"])
    runs = runs[runs["size"] >= cfg.poll_min_queries]
    if nvtx is not None and len(runs):  # an allocator's queries, inside a tensor op
        at = runs["first"].to_numpy()
        runs = runs[pd.isna(nvtx.enclosing(tid[at], start[at].astype(np.float64))["op"])
                    .to_numpy()]
    f, last = runs["first"].to_numpy(), runs["last"].to_numpy()
    before = f - 1
    has_before = (before >= 0) & same_thread[f]
    prev = np.maximum(before, 0)
    after_record = has_before & record[prev]
    return pd.DataFrame({
        "tid": tid[f], "corr_id": corr[f],
        "name": name.iloc[f].astype(str).to_numpy() + POLLING,
        "start_ns": start[f], "end_ns": end[last], "polls": runs["size"].to_numpy(),
        # an event recorded right before the loop: its cause is the call before the record
        "anchor_corr": np.where(after_record, corr[prev], corr[f]),
        "anchor_tid": tid[f], "done_corr": corr[last],
    })
