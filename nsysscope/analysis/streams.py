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

COVERAGE_COLUMNS = ["block", "proc", "stream", "boundary_ns"]


def stream_waits(trace: Trace) -> pd.DataFrame:
    """Every stream-waits-for-event edge: ``proc, wait_ns`` (the wait call's start: its
    position in the waiting stream), ``stream`` (the waiting stream), ``src_stream`` and
    ``record_ns`` (where the awaited event was recorded)."""
    cols = ["proc", "wait_ns", "stream", "src_stream", "record_ns"]
    api = trace.api
    waits = api.loc[api["name"].isin(STREAM_WAIT_APIS), ["proc", "corr_id", "start_ns"]]
    if waits.empty or trace.syncs.empty or trace.event_records.empty:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in cols})
    waits = waits.merge(trace.syncs.drop_duplicates(["proc", "corr_id"]), on=["proc", "corr_id"])
    records = trace.event_records.merge(
        api.loc[api["name"].isin(RECORD_APIS), ["proc", "corr_id", "start_ns"]],
        on=["proc", "corr_id"]).rename(columns={"start_ns": "record_ns", "stream": "src_stream"})
    records = records.drop_duplicates(["proc", "event_sync_id"])
    edges = waits.merge(records[["proc", "event_sync_id", "src_stream", "record_ns"]],
                        on=["proc", "event_sync_id"])
    edges = edges.rename(columns={"start_ns": "wait_ns"})
    edges = edges[edges["stream"] != edges["src_stream"]]
    return edges[cols].sort_values(["proc", "wait_ns"], kind="stable").reset_index(drop=True)


def coverage(blocks: pd.DataFrame, waits: pd.DataFrame) -> pd.DataFrame:
    """One row per (exact stream/event block, stream it covers) with the boundary on that
    stream. ``blocks`` needs ``block, proc, stream, boundary_ns``."""
    own = blocks[COVERAGE_COLUMNS].astype({"boundary_ns": "float64"})
    if waits.empty or own.empty:
        return own.reset_index(drop=True)
    out = [own]
    for proc, b in own.groupby("proc", sort=False):
        w = waits[waits["proc"] == proc]
        if w.empty:
            continue
        out += _reach(b, w)
    reach = pd.concat(out, ignore_index=True)
    # a stream reached along several paths: the latest boundary covers the most
    reach = reach.sort_values("boundary_ns", kind="stable").drop_duplicates(
        ["block", "stream"], keep="last")
    return reach.sort_values(["block", "stream"], kind="stable").reset_index(drop=True)


def _reach(b: pd.DataFrame, w: pd.DataFrame) -> list[pd.DataFrame]:
    """The other streams one process's blocks reach through its waits (a fixed point: each
    pass follows one more hop; there are at most as many hops as streams)."""
    streams = np.unique(np.concatenate([b["stream"].to_numpy(), w["stream"].to_numpy(),
                                        w["src_stream"].to_numpy()]))
    n = len(b)
    cov = {s: np.full(n, -np.inf) for s in streams}
    own_stream = b["stream"].to_numpy()
    boundary = b["boundary_ns"].to_numpy(dtype=np.float64)
    for s in streams:
        cov[s][own_stream == s] = boundary[own_stream == s]
    # per edge (waiting stream -> source stream): waits in issue order, with the latest
    # record awaited so far (a later wait can name an earlier record)
    edges = []
    for (s, x), e in w.groupby(["stream", "src_stream"], sort=False):
        e = e.sort_values("wait_ns", kind="stable")
        edges.append((s, x, e["wait_ns"].to_numpy(dtype=np.float64),
                      np.maximum.accumulate(e["record_ns"].to_numpy(dtype=np.float64))))
    for _ in range(len(streams)):
        changed = False
        for s, x, wait_ns, latest_record in edges:
            i = np.searchsorted(wait_ns, cov[s], side="left") - 1  # waits enqueued before
            reached = np.where(i >= 0, latest_record[np.maximum(i, 0)], -np.inf)
            grown = reached > cov[x]
            if grown.any():
                cov[x] = np.where(grown, reached, cov[x])
                changed = True
        if not changed:
            break
    blocks = b["block"].to_numpy()
    proc = b["proc"].to_numpy()
    return [pd.DataFrame({"block": blocks[m], "proc": proc[m], "stream": s,
                          "boundary_ns": cov[s][m]})
            for s in streams if (m := (cov[s] > -np.inf) & (own_stream != s)).any()]
