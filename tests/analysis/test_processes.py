"""The per-process table's GPU busy time (``nsysscope.analysis.processes``) is a difference of
two launches' busy-before counts (``busy_before_*_ns``, ``nsysscope.analysis.launches``), and
it is the overlap of every busy interval of the process's device with the span of its steady
replays: on the two-engine sample (two processes, both calling their GPU device 0, their
intervals interleaved in one table)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsysscope.analysis import processes
from nsysscope.analysis.launches import device_busy_intervals


def overlap_ns(busy: pd.DataFrame, proc: int, device: int, t0: float, t1: float) -> float:
    """The busy time of ``proc``'s ``device`` inside ``[t0, t1]``, from its intervals."""
    own = busy[(busy["proc"] == proc) & (busy["device"] == device)]
    return float((np.minimum(own["end_ns"], t1) - np.maximum(own["start_ns"], t0))
                 .clip(lower=0).sum())


def test_busy_time_is_the_overlap_of_the_intervals_with_the_steady_span(analysed):
    a = analysed("twoproc")
    busy = device_busy_intervals(a.trace, a.launches)
    table = processes.process_table(a.trace, a.launches)
    assert len(table) == 2
    for row in table.itertuples():
        work = a.launches[(a.launches["proc"] == row.proc) & a.launches["steady"]].dropna(
            subset=["gpu_start_ns"])
        t0, t1 = work["gpu_start_ns"].min(), work["gpu_end_ns"].max()
        assert row.busy_ns == overlap_ns(busy, row.proc, row.device, t0, t1) > 0
    # whole nanoseconds: the sums are exact, so the shares are the summary's own
    assert dict(zip(table["pid"], table["gpu_busy"], strict=True)) == \
        {p.pid: p.gpu_busy for p in a.summary.processes}


def test_busy_between_any_two_replays_is_a_difference_of_their_counts(analysed):
    """From the first replay of each process (0 at its start) to any later replay's end, on
    200 random pairs of each process's replays."""
    a = analysed("twoproc")
    busy = device_busy_intervals(a.trace, a.launches)
    rng = np.random.default_rng(7)
    for (proc, device), own in a.launches.dropna(subset=["gpu_start_ns"]).groupby(
            ["proc", "device"]):
        assert own["busy_before_start_ns"].min() == 0
        pairs = np.sort(rng.integers(0, len(own), size=(200, 2)), axis=1)
        first, last = own.iloc[pairs[:, 0]], own.iloc[pairs[:, 1]]
        counted = last["busy_before_end_ns"].to_numpy() - first["busy_before_start_ns"].to_numpy()
        expected = [overlap_ns(busy, proc, device, t0, t1) for t0, t1 in
                    zip(first["gpu_start_ns"], last["gpu_end_ns"], strict=True)]
        np.testing.assert_array_equal(counted, expected)
