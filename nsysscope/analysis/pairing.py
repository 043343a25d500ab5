"""Pair each graph launch with the host block that waited on it, and classify the result.

The block that waits on a launch is the first (earliest-starting) block of the same process
that covers the launch's GPU work and was still waiting when that work finished. Exact
blocks cover the launches enqueued before their boundary on their own stream and on every
stream it waited on (:mod:`.streams`); inexact ones (blocking copies, and syncs or polling
loops the export does not link to a stream or event) are matched by timing: the block
spanned the moment the work ended.

Columns added to the launch table:
``block`` (the paired block, -1 if none), ``waited`` (bool), ``block_start_ns``,
``block_end_ns``, ``block_name``, ``block_tid``, ``window_ns`` (block start minus launch-call
end: the effective overlap window), ``stall`` (the block ended before the next launch was
issued, so the GPU ran dry; not where it ran on another thread than the next launch's, which
was at work meanwhile: :func:`_held_elsewhere`), ``cause`` (the copy that made
the block: its API call, kind, memory kinds and bytes), and ``klass``:

* ``gpu_to_cpu``  stall caused by a device->host readback (case 1)
* ``cpu_to_gpu``  stall caused by a host->device copy from pageable memory (case 2)
* ``other_stall`` any other stall (an explicit sync, an early event wait)
* ``launch_bound`` no stall, but the GPU sat idle longer than the threshold before the next
  replay: the host is simply slower than the GPU
* ``healthy``     the next launch was queued before the GPU finished (or the host never had
  to wait)
* ``last``        the final launch on its stream: nothing follows to judge it by
* ``no_gpu_work`` the launch has no GPU work in the trace
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model import LAUNCH_CLASSES
from ..trace.apis import RECORD_APIS, process_of
from .calls import ThreadCalls
from .config import AnalysisConfig
from .distinct import per_distinct_row
from .keys import KeyIndex

_COPY_KIND_LABEL = {1: "HtoD", 2: "DtoH", 8: "DtoD", 10: "PtoP"}


def pair_blocks(launches: pd.DataFrame, blocks: pd.DataFrame, reach: pd.DataFrame,
                cfg: AnalysisConfig) -> pd.Series:
    """The paired block index for every launch (-1 where none waited on it). ``reach`` is
    the coverage of the exact stream/event blocks (:func:`.streams.coverage`)."""
    best_start = np.full(len(launches), np.inf)
    best_block = np.full(len(launches), -1, dtype=np.int64)
    gpu_end = launches["gpu_end_ns"].to_numpy()
    api_start = launches["api_start_ns"].to_numpy(dtype=np.float64)

    def offer(rows: np.ndarray, starts: np.ndarray, ids: np.ndarray) -> None:
        better = starts < best_start[rows]
        best_start[rows[better]] = starts[better]
        best_block[rows[better]] = ids[better]

    # a block only waits for its own process's work: stream ids repeat across processes, and
    # a device-wide sync covers the calling process only
    exact = blocks[blocks["exact"]]
    start_of = pd.Series(exact["start_ns"].to_numpy(dtype=np.float64), index=exact["block"])
    device = exact[exact["scope"] == "device"]
    dev_rows = device.groupby("proc").indices
    dev_block, dev_bound = device["block"].to_numpy(), device["boundary_ns"].to_numpy(np.float64)
    own_rows = reach.groupby(["proc", "stream"]).indices
    own_block, own_bound = reach["block"].to_numpy(), reach["boundary_ns"].to_numpy(np.float64)
    none = np.zeros(0, dtype=np.intp)
    for (proc, stream), rows in launches.groupby(["proc", "stream"]).indices.items():
        own, dev = own_rows.get((proc, stream), none), dev_rows.get(proc, none)
        if not len(own) + len(dev):
            continue
        block = np.concatenate([own_block[own], dev_block[dev]])
        bound = np.concatenate([own_bound[own], dev_bound[dev]])
        by_bound = np.argsort(bound, kind="stable")
        block, bound = block[by_bound], bound[by_bound]
        start = start_of.reindex(block).to_numpy()
        # earliest start among the blocks whose boundary lies after each position
        rank = np.argsort(np.argsort(start, kind="stable"), kind="stable")
        suffix_rank = np.minimum.accumulate(rank[::-1])[::-1]
        by_rank = np.argsort(start, kind="stable")
        pos = np.searchsorted(bound, api_start[rows], side="right")
        has = pos < len(block)
        r = rows[has]
        chosen = by_rank[suffix_rank[pos[has]]]
        c_start = start[chosen]
        waiting = c_start < gpu_end[r]  # the block began before the work finished
        offer(r[waiting], c_start[waiting], block[chosen][waiting])

    slack = cfg.timing_slack_us * 1e3
    launch_proc = launches["proc"].to_numpy()
    for tid, b in blocks[~blocks["exact"]].groupby("tid"):
        b = b.sort_values("start_ns", kind="stable")
        start = b["start_ns"].to_numpy(dtype=np.float64)
        end = b["end_ns"].to_numpy(dtype=np.float64)
        i = np.searchsorted(start, gpu_end, side="left") - 1  # last block starting before
        ok = (i >= 0) & ~np.isnan(gpu_end)
        idx = np.where(ok, i, 0)
        ok &= end[idx] + slack >= gpu_end
        # that block must have started after the launch was issued, in the same process
        ok &= (start[idx] > api_start) & (launch_proc == process_of(tid))
        rows = np.flatnonzero(ok)
        offer(rows, start[idx[ok]], b["block"].to_numpy()[idx[ok]])
    return pd.Series(best_block, index=launches.index, name="block")


def attach_blocks(launches: pd.DataFrame, blocks: pd.DataFrame, reach: pd.DataFrame,
                  copies: pd.DataFrame, calls: ThreadCalls, cfg: AnalysisConfig, pageable: int,
                  htod: int, dtoh: int) -> pd.DataFrame:
    """Windows, stalls, causes and classes for every launch."""
    df = launches.copy()
    df["block"] = pair_blocks(df, blocks, reach, cfg)
    b = blocks.set_index("block")
    paired = df["block"] >= 0
    sel = df.loc[paired, "block"]
    df["waited"] = paired
    df["block_start_ns"] = np.nan
    df["block_end_ns"] = np.nan
    df.loc[paired, "block_start_ns"] = b.loc[sel, "start_ns"].to_numpy(dtype=np.float64)
    df.loc[paired, "block_end_ns"] = b.loc[sel, "end_ns"].to_numpy(dtype=np.float64)
    df["block_name"] = pd.Series(pd.NA, index=df.index, dtype="string")
    df.loc[paired, "block_name"] = b.loc[sel, "name"].to_numpy()
    df["block_tid"] = -1
    df.loc[paired, "block_tid"] = b.loc[sel, "tid"].to_numpy()
    df["block_polls"] = 0
    df.loc[paired, "block_polls"] = b.loc[sel, "polls"].to_numpy()
    df["window_ns"] = df["block_start_ns"] - df["api_end_ns"]
    df["stall"] = paired & ~(df["block_end_ns"] > df["next_api_start_ns"]) & \
        df["next_api_start_ns"].notna() & ~_held_elsewhere(df, calls)
    df = _attach_cause(df, blocks, copies, calls)
    kind = np.full(len(df), "healthy", dtype=object)
    kind[df["gpu_idle_ns"].to_numpy() > cfg.launch_bound_gap_us * 1e3] = "launch_bound"
    stall = df["stall"].to_numpy()
    readback = (df["cause_copy_kind"] == dtoh).to_numpy()
    pageable_up = ((df["cause_copy_kind"] == htod) & (df["cause_src_kind"] == pageable)).to_numpy()
    kind[stall] = "other_stall"
    kind[stall & readback] = "gpu_to_cpu"
    kind[stall & pageable_up] = "cpu_to_gpu"
    kind[df["next_api_start_ns"].isna().to_numpy()] = "last"
    kind[df["gpu_end_ns"].isna().to_numpy()] = "no_gpu_work"
    df["klass"] = pd.Categorical(kind, categories=[str(k) for k in LAUNCH_CLASSES])
    df["api_chain"] = _api_chain(df)
    return df


def _held_elsewhere(df: pd.DataFrame, calls: ThreadCalls) -> pd.Series:
    """Launches whose host wait did not hold the next launch back: the wait ran on another
    thread than the one that issued the next launch, and that thread was at work (it made a
    CUDA call) while the other one waited. With a forward thread (sglang's older overlap
    worker) the scheduler waits on step k-1 while the worker prepares and launches step k;
    when the worker is late (an eager prefill before its launch), the GPU runs dry because the
    launching thread is busy, not because of the scheduler's wait: the gap is the host's, a
    launch-bound gap, not a stall. A launching thread that waits for the waiting thread (a
    hand-off) makes no call while it waits, and the wait stays a stall."""
    next_tid = df.groupby(["proc", "stream"], sort=False)["tid"].shift(-1)
    elsewhere = (df["block"] >= 0) & next_tid.notna() & (df["block_tid"] != next_tid)
    out = pd.Series(False, index=df.index)
    if elsewhere.any():
        at = df.index[elsewhere]
        out.loc[at] = calls.busy_between(
            next_tid[at].to_numpy(dtype=np.int64),
            df.loc[at, "block_start_ns"].to_numpy(dtype=np.float64),
            df.loc[at, "block_end_ns"].to_numpy(dtype=np.float64))
    return out


def _attach_cause(df: pd.DataFrame, blocks: pd.DataFrame, copies: pd.DataFrame,
                  calls: ThreadCalls) -> pd.DataFrame:
    """The copy that made each paired block: the block itself when it is a blocking copy,
    else the copy issued right before its anchor on the anchor's thread (``.item()`` is a
    copy then a stream sync; an event wait's copy is the one right before its
    ``cudaEventRecord``). It must belong to this round: issued after the launch it waited
    on. Calls are keyed by thread and correlation id (ids restart in every process)."""
    cols = {"name": "cause_name", "copy_kind": "cause_copy_kind", "src_kind": "cause_src_kind",
            "dst_kind": "cause_dst_kind", "bytes": "cause_bytes", "start_ns": "cause_start_ns",
            "tid": "cause_tid"}
    table = calls.table
    # per call (and row -1: no such call), the previous call's id on its thread, and whether
    # it records an event
    corr = table["corr_id"].to_numpy(dtype=np.float64)
    prev_corr = np.append(np.where(calls.follows_on_thread, np.r_[np.nan, corr[:-1]], np.nan),
                          np.nan)
    is_record = np.append(table["name"].isin(RECORD_APIS).to_numpy(dtype=bool), False)
    b = blocks.set_index("block")
    paired = df.index[df["block"] >= 0]
    blk = b.loc[df.loc[paired, "block"]]
    own_copy = blk["copy_kind"].to_numpy() >= 0
    tids = blk["anchor_tid"].to_numpy()
    before = prev_corr[calls.row(tids, blk["anchor_corr"])]
    # a wait on the event just recorded (no sync records to name it): the copy precedes the
    # record, as for an exact event wait
    at = calls.row(tids, np.nan_to_num(before, nan=-1).astype(np.int64))
    before = np.where(is_record[at], prev_corr[at], before)
    cause_corr = np.where(own_copy, blk["corr_id"].to_numpy(dtype=np.float64), before)
    found = pd.DataFrame({"tid": tids, "corr": cause_corr}, index=paired).dropna()
    row = KeyIndex.of(copies["tid"], copies["corr_id"]).first_row(
        found["tid"].astype(np.int64), found["corr"].astype(np.int64))
    found = found[row >= 0]
    hit = copies.iloc[row[row >= 0]]
    ok = hit["start_ns"].to_numpy() >= df.loc[found.index, "api_start_ns"].to_numpy()
    rows, hit = found.index[ok], hit[ok]
    for src, dst in cols.items():
        df[dst] = pd.Series(pd.NA, index=df.index, dtype="string") if src == "name" else np.nan
        df.loc[rows, dst] = hit[src].to_numpy() if src == "name" else \
            hit[src].to_numpy(dtype=np.float64)
    return df


def _api_chain(df: pd.DataFrame) -> pd.Series:
    """``cudaMemcpyAsync DtoH 1 B -> cudaStreamSynchronize`` for paired blocks."""
    chain = per_distinct_row(df[["cause_name", "cause_copy_kind", "cause_bytes", "block_name"]],
                             _chain)
    return pd.Series(chain, index=df.index).where(df["block"] >= 0, "")


def _chain(df: pd.DataFrame) -> np.ndarray:
    """The API chain of each row of the cause and block columns."""
    has_copy = df["cause_copy_kind"].notna()
    kind = df["cause_copy_kind"].map(_COPY_KIND_LABEL).fillna("copy").where(has_copy, "")
    nbytes = (df["cause_bytes"].astype("Int64").astype("string") + " B").fillna("")
    cause = df["cause_name"].fillna("").astype(str) + " " + kind + " " + nbytes
    cause = cause.str.strip()
    same = df["cause_name"].fillna("").astype(str) == df["block_name"].fillna("").astype(str)
    chain = np.where(cause.str.len() > 0,
                     np.where(same, cause,
                              cause + " \u2192 " + df["block_name"].fillna("").astype(str)),
                     df["block_name"].fillna("").astype(str))
    return np.asarray(chain)
