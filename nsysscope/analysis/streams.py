"""Which streams' work a host wait covers, across ``cudaStreamWaitEvent``.

A wait on stream S (a stream sync, or an event recorded on S) covers the work enqueued on S
before its boundary. If S waited on an event recorded on stream X before that boundary
(``cudaStreamWaitEvent``, which ``torch.cuda.Stream.wait_stream`` issues), the wait also
covers X's work enqueued before that record, and, transitively, the work of every stream X
waited on before *its* boundary. That is how vLLM's async output copy and sglang's
schedule/forward streams tie a host wait on a side stream to the forward pass on the main
stream.

:func:`stream_waits` lists the dependency edges; :func:`coverage` expands each exact block
into one row per stream it covers: ``block, proc, stream, boundary_ns`` (the block covers
the launches enqueued on ``stream`` before ``boundary_ns``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.apis import RECORD_APIS, STREAM_WAIT_APIS
from ..trace.load import Trace
from .keys import join_first

COVERAGE_COLUMNS = ["block", "proc", "stream", "boundary_ns"]


def stream_waits(trace: Trace, records: pd.DataFrame) -> pd.DataFrame:
    """Every stream-waits-for-event edge: ``proc, wait_ns`` (the wait call's start: its
    position in the waiting stream), ``stream`` (the waiting stream), ``src_stream`` and
    ``record_ns`` (where the awaited event was recorded: ``records``, from
    :func:`event_records_with_calls`)."""
    cols = ["proc", "wait_ns", "stream", "src_stream", "record_ns"]
    api = trace.api
    waits = api.loc[api["name"].isin(STREAM_WAIT_APIS), ["proc", "corr_id", "start_ns"]]
    if waits.empty or trace.syncs.empty or trace.event_records.empty:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in cols})
    waits = join_first(waits, trace.syncs, on=["proc", "corr_id"], how="inner")
    records = records.rename(columns={"start_ns": "record_ns", "stream": "src_stream"})
    edges = join_first(waits, records[["proc", "event_sync_id", "src_stream", "record_ns"]],
                       on=["proc", "event_sync_id"], how="inner")
    edges = edges.rename(columns={"start_ns": "wait_ns"})
    edges = edges[edges["stream"] != edges["src_stream"]]
    return edges[cols].sort_values(["proc", "wait_ns"], kind="stable").reset_index(drop=True)


def event_records_with_calls(trace: Trace) -> pd.DataFrame:
    """Each event's first record (per process and event sync id) with the
    ``cudaEventRecord`` call that made it: ``proc, corr_id, event_sync_id, stream`` (the
    stream it marks), ``start_ns`` and ``tid`` of the call."""
    api = trace.api
    calls = api.loc[api["name"].isin(RECORD_APIS), ["proc", "corr_id", "start_ns", "tid"]]
    records = join_first(trace.event_records, calls, on=["proc", "corr_id"], how="inner")
    return records.drop_duplicates(["proc", "event_sync_id"])


def coverage(blocks: pd.DataFrame, waits: pd.DataFrame) -> pd.DataFrame:
    """One row per (exact stream/event block, stream it covers) with the boundary on that
    stream. ``blocks`` needs ``block, proc, stream, boundary_ns``."""
    own = blocks[COVERAGE_COLUMNS].astype({"boundary_ns": "float64"})
    if waits.empty or own.empty:
        return own.reset_index(drop=True)
    out = [tuple(own[c].to_numpy() for c in COVERAGE_COLUMNS)]
    for proc, b in own.groupby("proc", sort=False):
        w = waits[waits["proc"] == proc]
        if w.empty:
            continue
        out += _reach(b, w)
    # one row per (block, stream): _reach never gives a block's own stream, and gives each
    # other stream once, at the latest boundary of every path to it
    reach = {c: np.concatenate(v) for c, v in
             zip(COVERAGE_COLUMNS, zip(*out, strict=True), strict=True)}
    order = np.lexsort((reach["stream"], reach["block"]))  # by block, then stream
    return pd.DataFrame({c: v[order] for c, v in reach.items()})


_Columns = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _reach(b: pd.DataFrame, w: pd.DataFrame) -> list[_Columns]:
    """The other streams one process's blocks reach through its waits (the coverage
    columns). A block's reach depends on its own stream and boundary only, so the blocks of
    one stream are followed together, through the edges their stream leads to."""
    streams = np.unique(np.concatenate([b["stream"].to_numpy(), w["stream"].to_numpy(),
                                        w["src_stream"].to_numpy()]))
    edges = _edges(w)
    blocks = b["block"].to_numpy()
    proc = b["proc"].to_numpy()
    boundary = b["boundary_ns"].to_numpy(dtype=np.float64)
    out = []
    for origin, rows in b.groupby("stream", sort=True).indices.items():
        cov = _follow(edges, origin, boundary[rows], len(streams))
        out += [(blocks[rows[m]], proc[rows[m]], np.full(m.sum(), s, dtype=np.int64), c[m])
                for s, c in sorted(cov.items()) if s != origin and (m := c > -np.inf).any()]
    return out


#: one dependency edge: the source stream, the waits' times in issue order, and the latest
#: record awaited so far at each
_Edge = tuple[int, np.ndarray, np.ndarray]


def _edges(w: pd.DataFrame) -> dict[int, list[_Edge]]:
    """Per waiting stream, its edges (one per source stream, in order of its first wait): the
    waits' times in issue order, and the latest record awaited so far at each (a later wait
    can name an earlier record)."""
    edge, _ = pd.factorize(pd.MultiIndex.from_arrays([w["stream"], w["src_stream"]]))
    order = np.lexsort((w["wait_ns"].to_numpy(), edge))
    stream, src = w["stream"].to_numpy()[order], w["src_stream"].to_numpy()[order]
    wait_ns = w["wait_ns"].to_numpy(dtype=np.float64)[order]
    record_ns = w["record_ns"].to_numpy(dtype=np.float64)[order]
    cut = np.flatnonzero(np.diff(edge[order])) + 1
    out: dict[int, list[_Edge]] = {}
    for a, z in zip(np.r_[0, cut], np.r_[cut, len(order)], strict=True):
        if z > a:
            out.setdefault(int(stream[a]), []).append(
                (int(src[a]), wait_ns[a:z], np.maximum.accumulate(record_ns[a:z])))
    return out


def _follow(edges: dict[int, list[_Edge]], origin: int, boundary: np.ndarray,
            hops: int) -> dict[int, np.ndarray]:
    """How far blocks on stream ``origin`` with these boundaries reach on each stream they
    reach (-inf: not this block). A fixed point, one hop a round from the streams whose reach
    grew in the last (at most ``hops`` rounds): only the edges out of those are followed,
    so a round costs what the streams reached lead to, not every edge of the process (a
    server's thousands of streams: 61 of 141 s of a two-rank 10^5 trace went to following
    every edge in every round for every stream)."""
    cov = {origin: boundary}
    grew = [origin]
    for _ in range(hops):
        now: dict[int, None] = {}  # the streams whose reach grew this round, in order
        for s in grew:
            for x, wait_ns, latest_record in edges.get(s, ()):
                i = np.searchsorted(wait_ns, cov[s], side="left") - 1  # waits enqueued before
                reached = np.where(i >= 0, latest_record[np.maximum(i, 0)], -np.inf)
                before = cov.get(x, np.full(len(boundary), -np.inf))
                grown = reached > before
                if grown.any():
                    cov[x] = np.where(grown, reached, before)
                    now[x] = None
        if not now:
            break
        grew = list(now)
    return cov
