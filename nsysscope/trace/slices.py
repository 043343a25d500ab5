"""A time range of a trace already in memory: the rows a read of that range would give.

:func:`.load.read_trace` reads a :class:`~.time_range.TimeRange` of an export with SQL: the
CUDA calls and NVTX ranges that overlap it, and the GPU work, sync and event records of the
calls read (their correlation ids, per process). :func:`trace_in` keeps the same rows of a
loaded :class:`Trace`, so that parts of one trace can be analysed in parallel
(:func:`nsysscope.analysis.windows.parallel_rows`) without reading the export again.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from .apis import LAUNCH_APIS
from .load import Trace
from .time_range import CallRows, TimeRange


def trace_in(trace: Trace, span: TimeRange) -> Trace:
    """``trace``'s rows in ``span`` (the whole trace for a whole range)."""
    if span.whole:
        return trace
    api = _rows(trace.api, span.overlaps(trace.api["start_ns"].to_numpy(),
                                        trace.api["end_ns"].to_numpy()))
    calls = span.of_calls(api["corr_id"].to_numpy(), api["proc"].to_numpy())
    launches = api.loc[api["name"].isin(LAUNCH_APIS), ["proc", "corr_id"]]
    graph_work = _of(trace.graph_work, calls)
    graph_work = _rows(graph_work, pd.MultiIndex.from_frame(graph_work[["proc", "corr_id"]])
                       .isin(pd.MultiIndex.from_frame(launches)))
    nvtx = _rows(trace.nvtx, span.overlaps(trace.nvtx["start_ns"].to_numpy(),
                                          trace.nvtx["end_ns"].to_numpy()))
    meta = dataclasses.replace(trace.meta, time_range_ns=(span.start_ns, span.end_ns))
    return dataclasses.replace(
        trace, meta=meta, api=api, graph_work=graph_work, gpu_ops=_of(trace.gpu_ops, calls),
        syncs=_of(trace.syncs, calls), event_records=_of(trace.event_records, calls),
        nvtx=nvtx, collectives=_of(trace.collectives, calls))


def _of(df: pd.DataFrame, calls: CallRows) -> pd.DataFrame:
    """The rows of a per-call table (``proc``, ``corr_id``) that ``calls`` keeps."""
    if df.empty:
        return df
    return _rows(df, calls.keeps(df["proc"].to_numpy(), df["corr_id"].to_numpy()))


def _rows(df: pd.DataFrame, keep: np.ndarray) -> pd.DataFrame:
    """``df``'s rows where ``keep`` holds, numbered from 0. Tables come sorted by time, so a
    window's rows are mostly one run of them: then a slice, which copies nothing (a process
    analysing a window of a forked trace shares its columns instead)."""
    if not keep.any():
        return df.iloc[:0].reset_index(drop=True)
    first, last = int(keep.argmax()), len(keep) - int(keep[::-1].argmax())
    if keep[first:last].all():
        return df.iloc[first:last].reset_index(drop=True)
    return df[keep].reset_index(drop=True)
