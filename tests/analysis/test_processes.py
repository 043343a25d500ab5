"""The per-process table's GPU busy time (``nsysscope.analysis.processes``), summed over the
busy intervals a stretch of rows at a time, is the overlap of every interval of the process's
device with the span of its steady replays: on the two-engine sample (two processes, both
calling their GPU device 0, their intervals interleaved in one table)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nsysscope.analysis import processes
from nsysscope.analysis.launches import device_busy_intervals


def overlap_ns(busy: pd.DataFrame, launches: pd.DataFrame, proc: int, device: int) -> float:
    """The busy time of ``proc``'s ``device`` over its steady replays' span, all at once."""
    own = busy[(busy["proc"] == proc) & (busy["device"] == device)]
    work = launches[(launches["proc"] == proc) & launches["steady"]].dropna(
        subset=["gpu_start_ns"])
    t0, t1 = work["gpu_start_ns"].min(), work["gpu_end_ns"].max()
    return float((np.minimum(own["end_ns"], t1) - np.maximum(own["start_ns"], t0))
                 .clip(lower=0).sum())


@pytest.mark.parametrize("chunk", [processes._CHUNK, 7, 1])
def test_busy_time_in_stretches_is_the_whole_overlap(analysed, monkeypatch, chunk):
    a = analysed("twoproc")
    busy = device_busy_intervals(a.trace, a.launches)
    assert len(busy) > 7 * 100  # so that a stretch of 7 rows cuts it in many places
    monkeypatch.setattr(processes, "_CHUNK", chunk)
    table = processes.process_table(a.trace, a.launches, busy)
    assert len(table) == 2
    for row in table.itertuples():
        assert row.busy_ns == overlap_ns(busy, a.launches, row.proc, row.device) > 0
    # whole nanoseconds: the sums are exact, so the shares are the summary's own
    assert dict(zip(table["pid"], table["gpu_busy"], strict=True)) == \
        {p.pid: p.gpu_busy for p in a.summary.processes}
