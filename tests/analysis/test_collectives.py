"""Ranks waiting for ranks: table-driven tests of :mod:`nsysscope.analysis.collectives` on
hand-built kernel tables (the real two-rank captures are tested in test_server_traces.py)."""

from __future__ import annotations

import pandas as pd

from nsysscope.analysis.collectives import attach_waits, collective_waits

US = 1_000


def kernels(rows):
    """``(proc, corr, start_us, end_us)`` rows as the loader's ``collectives`` table."""
    return pd.DataFrame([dict(proc=p, corr_id=c, start_ns=s * US, end_ns=e * US, stream=7,
                              device=0, name="ncclDevKernel_AllReduce_Sum_bf16_RING_LL")
                         for p, c, s, e in rows])


def test_the_early_rank_waits_for_the_late_one():
    # step 1: rank 0 (proc 10) arrives 2 ms late at the first all-reduce; rank 1 spins.
    # step 2: both on time. Kernels of one collective end within a few us of each other.
    w = collective_waits(kernels([
        (10, 5, 3000, 3020), (11, 5, 1000, 3022),   # rank 1 waited 2000 us for rank 0
        (10, 5, 3100, 3115), (11, 5, 3098, 3116),   # second all-reduce of the step: 2 us
        (10, 6, 6000, 6020), (11, 6, 5990, 6021),   # next step: 10 us
    ])).set_index(["proc", "start_ns"])
    assert w.loc[(11, 1000 * US), "wait_ns"] == 2000 * US
    assert w.loc[(11, 1000 * US), "waited_for"] == 10
    assert w.loc[(10, 3000 * US), "wait_ns"] == 0 and w.loc[(10, 3000 * US), "waited_for"] == -1
    assert w.loc[(11, 3098 * US), "wait_ns"] == 2 * US
    assert w.loc[(11, 5990 * US), "wait_ns"] == 10 * US


def test_a_single_process_waits_for_nobody():
    w = collective_waits(kernels([(10, 5, 0, 20), (10, 6, 100, 120)]))
    assert w.empty


def test_back_to_back_collectives_of_one_rank_are_not_merged():
    # two collectives ending 5 us apart: each rank's second kernel opens a new collective
    w = collective_waits(kernels([(10, 5, 0, 100), (11, 5, 40, 101),
                                  (10, 5, 101, 105), (11, 5, 102, 106)]))
    assert sorted(w["wait_ns"]) == [0, 0, 1 * US, 40 * US]


def test_waits_are_summed_per_launch_and_name_the_peer():
    w = collective_waits(kernels([(10, 5, 3000, 3020), (11, 5, 1000, 3022),
                                  (10, 5, 3100, 3115), (11, 5, 3098, 3116)]))
    launches = pd.DataFrame({"proc": [10, 11], "corr_id": [5, 5]})
    out = attach_waits(launches, w)
    assert list(out["collective_wait_ns"]) == [0, 2002 * US]
    assert list(out["waited_for"]) == [-1, 10]
