"""Graph launches and their GPU side: when each replay ran, and the idle gap after it.

Output columns (one row per ``cudaGraphLaunch``, in issue order):
``launch`` (0-based index), ``tid``, ``proc``, ``corr_id``, ``api_start_ns``, ``api_end_ns``,
``gpu_start_ns``, ``gpu_end_ns`` (NaN when the GPU work is missing), ``stream``, ``device``,
``n_ops``, ``next_api_start_ns`` / ``next_gpu_start_ns`` (the next launch on the same stream),
``gpu_gap_ns`` (next replay's start minus this one's end) and ``gpu_idle_ns`` (that gap minus
any other GPU work of the same process on the device inside it), ``busy_before_start_ns`` /
``busy_before_end_ns`` (:data:`BUSY_BEFORE`: the process's busy time on the device before the
replay's start / end, counted from where the read began, then by
:func:`busy_from_first_replay` from the process's first replay on the device: the busy time
between two replays is a difference of two of them, which is how the per-process table
measures it without keeping the busy intervals).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd

from ..errors import ProfilerLostData
from ..trace.apis import LAUNCH_APIS
from ..trace.load import Trace
from .stored import RowStore

#: the launch table's columns of busy time before each replay
BUSY_BEFORE = ["busy_before_start_ns", "busy_before_end_ns"]


def launch_table(trace: Trace) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The launch table, and the busy intervals of each process's device
    (:func:`device_busy_intervals`) its idle gaps and busy times were measured with."""
    api = trace.api
    calls = api.loc[api["name"].isin(LAUNCH_APIS), ["tid", "proc", "corr_id", "start_ns", "end_ns"]]
    calls = calls.rename(columns={"start_ns": "api_start_ns", "end_ns": "api_end_ns"})
    df = calls.merge(trace.graph_work, on=["proc", "corr_id"], how="left")
    df = df.sort_values("api_start_ns", kind="stable").reset_index(drop=True)
    df.insert(0, "launch", np.arange(len(df)))
    for col in ("gpu_start_ns", "gpu_end_ns"):
        df[col] = df[col].astype("float64")
    if len(df) and df["gpu_end_ns"].isna().all():
        # every launch without GPU work: a "healthy, host never waited" report would be nonsense
        how = trace.meta.profiler.record_gpu_work
        raise ProfilerLostData(
            f"{trace.meta.path}: none of the {len(df)} graph launches has GPU work in the trace: "
            f"the profiler lost the GPU activity, or kernels were not traced; profile again with "
            f"{how}")
    df["stream"] = df["stream"].fillna(-1).astype("int64")
    df["device"] = df["device"].fillna(-1).astype("int64")
    df["n_ops"] = df["n_ops"].fillna(0).astype("int64")
    # stream ids are per process (two ranks both use stream 7): the next launch is the next
    # one of the same process on the same stream
    nxt = df.groupby(["proc", "stream"], sort=False)[
        ["api_start_ns", "api_end_ns", "gpu_start_ns"]].shift(-1)
    df["next_api_start_ns"] = nxt["api_start_ns"]
    df["next_api_end_ns"] = nxt["api_end_ns"]
    df["next_gpu_start_ns"] = nxt["gpu_start_ns"]
    df["gpu_gap_ns"] = df["next_gpu_start_ns"] - df["gpu_end_ns"]
    busy = device_busy_intervals(trace, df)
    at_start, at_end, at_next = busy_before(df, busy, ["gpu_start_ns", "gpu_end_ns",
                                                       "next_gpu_start_ns"])
    df["gpu_idle_ns"] = df["gpu_gap_ns"] - (at_next - at_end)
    df["busy_before_start_ns"], df["busy_before_end_ns"] = at_start, at_end
    return df, busy


def busy_from_first_replay(launches: RowStore) -> Iterator[dict[str, np.ndarray]]:
    """Per part of ``launches`` (:meth:`~.stored.RowStore.update_parts`), the
    :data:`BUSY_BEFORE` columns counted from each process's first replay on each device (0 at
    its start). A read counts them from where it began, which is not the same for the whole
    trace and its windows (a window's read holds no GPU work whose call is missing from the
    trace): their differences are, and so are these. Busy time only grows, so the first
    replay's count is the least."""
    keys = ["proc", "device"]
    origin = pd.concat([part.groupby(keys)[BUSY_BEFORE[0]].min()
                        for part in launches.chunks([*keys, BUSY_BEFORE[0]])])
    origin = origin.groupby(level=[0, 1]).min()
    for part in launches.chunks([*keys, *BUSY_BEFORE]):
        least = origin.reindex(pd.MultiIndex.from_frame(part[keys])).to_numpy()
        yield {c: part[c].to_numpy(dtype=np.float64) - least for c in BUSY_BEFORE}


def device_busy_intervals(trace: Trace, launches: pd.DataFrame) -> pd.DataFrame:
    """Merged intervals during which each process's device ran anything:
    ``proc, device, start_ns, end_ns``.

    Keyed by process as well as device: with ``CUDA_VISIBLE_DEVICES`` two processes on two
    GPUs both call theirs device 0, and a process's overlap is about its own GPU work."""
    work = launches.dropna(subset=["gpu_start_ns"])
    ops = trace.gpu_ops
    proc = np.concatenate([work["proc"].to_numpy(), ops["proc"].to_numpy()])
    device = np.concatenate([work["device"].to_numpy(), ops["device"].to_numpy()])
    start = np.concatenate([work["gpu_start_ns"].to_numpy(dtype=np.float64),
                            ops["start_ns"].to_numpy(dtype=np.float64)])
    end = np.concatenate([work["gpu_end_ns"].to_numpy(dtype=np.float64),
                          ops["end_ns"].to_numpy(dtype=np.float64)])
    order = np.lexsort((start, device, proc))
    proc, device, start, end = proc[order], device[order], start[order], end[order]
    if not len(start):
        return pd.DataFrame({"proc": proc, "device": device, "start_ns": start, "end_ns": end})
    # per (process, device), consecutive rows: a run of overlapping spans starts where a span
    # begins after every earlier one has ended, and ends at its latest end
    group = np.flatnonzero(np.r_[True, (proc[1:] != proc[:-1]) | (device[1:] != device[:-1])])
    run_end = np.concatenate([np.maximum.accumulate(end[a:z]) for a, z in
                              zip(group, np.r_[group[1:], len(end)], strict=True)])
    new_run = np.r_[True, start[1:] > run_end[:-1]]
    new_run[group] = True
    first = np.flatnonzero(new_run)
    return pd.DataFrame({"proc": proc[first], "device": device[first],
                         "start_ns": np.fmin.reduceat(start, first),
                         "end_ns": np.fmax.reduceat(run_end, first)})


def busy_before(launches: pd.DataFrame, busy: pd.DataFrame,
                times: list[str]) -> list[np.ndarray]:
    """For each of the ``times`` columns of ``launches``: the busy time of each launch's
    process on its device before that time (NaN for a NaN time, or a device with no busy
    interval). ``busy`` as :func:`device_busy_intervals` gives it: each device's intervals one
    run of rows."""
    out = [np.full(len(launches), np.nan) for _ in times]
    of_proc, of_device = launches["proc"].to_numpy(), launches["device"].to_numpy()
    for (proc, device), (s, e, cum) in _runs(busy):
        rows = np.flatnonzero((of_device == device) & (of_proc == proc))
        for o, col in zip(out, times, strict=True):
            o[rows] = busy_until(launches[col].to_numpy()[rows], s, e, cum)
    return out


def busy_before_time(busy: pd.DataFrame, t: float) -> dict[tuple[int, int], float]:
    """Each process's busy time on each device before time ``t`` (``busy`` as for
    :func:`busy_before`)."""
    at = np.array([t], dtype=np.float64)
    return {key: float(busy_until(at, s, e, cum)[0]) for key, (s, e, cum) in _runs(busy)}


#: a device's busy intervals: starts, ends, and the busy time before each
_Run = tuple[np.ndarray, np.ndarray, np.ndarray]


def _runs(busy: pd.DataFrame) -> list[tuple[tuple[int, int], _Run]]:
    """``busy``'s intervals of each (process, device): their starts, ends and the cumulative
    busy time before each (what :func:`busy_until` reads)."""
    proc, device = busy["proc"].to_numpy(), busy["device"].to_numpy()
    starts, ends = busy["start_ns"].to_numpy(), busy["end_ns"].to_numpy()
    cut = np.flatnonzero((proc[1:] != proc[:-1]) | (device[1:] != device[:-1])) + 1
    out: list[tuple[tuple[int, int], _Run]] = []
    for a, z in zip(np.r_[0, cut], np.r_[cut, len(proc)], strict=True):
        if z == a:
            continue
        s, e = starts[a:z], ends[a:z]
        out.append(((int(proc[a]), int(device[a])),
                    (s, e, np.concatenate([[0.0], np.cumsum(e - s)]))))
    return out


def busy_until(t: np.ndarray, starts: np.ndarray, ends: np.ndarray, cum: np.ndarray) -> np.ndarray:
    """Total busy time of sorted disjoint intervals before each time ``t`` (NaN stays NaN)."""
    i = np.searchsorted(starts, np.nan_to_num(t, nan=-np.inf), side="right")  # intervals started
    prev = np.maximum(i - 1, 0)
    partial = np.where(i > 0, np.clip(t - starts[prev], 0, ends[prev] - starts[prev]), 0.0)
    full = cum[prev]
    result = np.where(i > 0, full + partial, 0.0)
    return np.where(np.isnan(t), np.nan, result)
