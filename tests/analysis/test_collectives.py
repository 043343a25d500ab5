"""Ranks waiting for ranks: table-driven tests of :mod:`nsysscope.analysis.collectives` on
hand-built kernel tables, and the two-rank H200 captures' kernels laid over each other as
two tensor-parallel groups of one export (their reports are tested in
test_server_traces.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nsysscope.analysis.alignment import SAME_GROUP, match, sequences
from nsysscope.analysis.collectives import (
    ABSENT,
    RankWaits,
    attach_waits,
    collective_waits,
    communicators,
)

US = 1_000


def kernels(rows):
    """``(proc, corr, start_us, end_us)`` rows as the loader's ``collectives`` table."""
    return pd.DataFrame([dict(proc=p, corr_id=c, start_ns=s * US, end_ns=e * US, stream=7,
                              device=0, name="ncclDevKernel_AllReduce_Sum_bf16_RING_LL")
                         for p, c, s, e in rows])


def test_the_early_rank_waits_for_the_late_one():
    # step 1: rank 0 (proc 10) arrives 2 ms late at the first all-reduce; rank 1 spins.
    # step 2: both on time. Kernels of one collective end within a few us of each other
    # (the clocks agree: their ends differ by -1, 1 and 0 us).
    w = collective_waits(kernels([
        (10, 5, 3000, 3020), (11, 5, 1000, 3021),   # rank 1 waited 2000 us for rank 0
        (10, 5, 3100, 3115), (11, 5, 3098, 3114),   # second all-reduce of the step: 2 us
        (10, 6, 6000, 6020), (11, 6, 5990, 6020),   # next step: 10 us
    ])).set_index(["proc", "start_ns"])
    assert w.loc[(11, 1000 * US), "wait_ns"] == 2000 * US
    assert w.loc[(11, 1000 * US), "waited_for"] == 10
    assert w.loc[(10, 3000 * US), "wait_ns"] == 0 and w.loc[(10, 3000 * US), "waited_for"] == -1
    assert w.loc[(11, 3098 * US), "wait_ns"] == 2 * US
    assert w.loc[(11, 5990 * US), "wait_ns"] == 10 * US


def test_a_single_process_waits_for_nobody():
    w = collective_waits(kernels([(10, 5, 0, 20), (10, 6, 100, 120)]))
    assert (w["wait_ns"] == 0).all() and (w["waited_for"] == -1).all()


def test_a_rank_without_peers_waits_what_its_kernels_took_beyond_their_own_time(analysed):
    """Rank 1 of the capture where rank 0 stalls, alone (its peer's trace not given): its
    kernels' time beyond their name's p10 is its wait, for a rank not in the input; per
    step 1.33 ms (p50), where the two ranks together measure 1.32 ms."""
    a = analysed("tp2_case1_rank0")
    c = a.trace.collectives
    late = int(c["proc"].max())
    w = RankWaits.of(c[c["proc"] == late]).per_launch
    with_peer = RankWaits.of(c).per_launch.loc[w.index]
    steady = a.launches[a.launches["steady"] & (a.launches["proc"] == late)]
    keys = pd.MultiIndex.from_arrays([steady["proc"], steady["corr_id"]])
    alone = w["collective_wait_ns"].reindex(keys)
    both = with_peer["collective_wait_ns"].reindex(keys)
    assert abs(alone.median() - both.median()) < 0.01 * both.median()
    assert (w["waited_for"].reindex(keys) == ABSENT).all()


def test_back_to_back_collectives_of_one_rank_are_not_merged():
    # two collectives ending 5 us apart: each rank's second kernel opens a new collective
    w = collective_waits(kernels([(10, 5, 0, 100), (11, 5, 40, 101),
                                  (10, 5, 101, 105), (11, 5, 102, 104)]))
    assert sorted(w["wait_ns"]) == [0, 0, 1 * US, 40 * US]


def test_waits_are_summed_per_launch_and_name_the_peer():
    ranks = RankWaits.of(kernels([(10, 5, 3000, 3020), (11, 5, 1000, 3022),
                                  (10, 5, 3100, 3115), (11, 5, 3098, 3114)]))
    launches = pd.DataFrame({"proc": [10, 11], "corr_id": [5, 5]})
    out = attach_waits(launches, ranks)
    assert list(out["collective_wait_ns"]) == [0, 2002 * US]
    assert list(out["waited_for"]) == [-1, 10]


def _two_groups(a, b, shift_ns):
    """The collective kernels of the two-rank captures ``a`` and ``b`` as one export of two
    tensor-parallel groups would hold them: ``b``'s ranks renamed apart from ``a``'s and its
    timeline moved to start ``shift_ns`` after ``a``'s (the groups run independently)."""
    move = a["start_ns"].min() - b["start_ns"].min() + shift_ns
    b = b.assign(proc=b["proc"] + (1 << 20), start_ns=b["start_ns"] + move,
                 end_ns=b["end_ns"] + move)
    return pd.concat([a, b], ignore_index=True)


def _ordered(w):
    return w.sort_values(["proc", "corr_id", "start_ns"], kind="stable").reset_index(drop=True)


@pytest.mark.parametrize("shift_us", [0, 3, 1000])
def test_two_tensor_parallel_groups_in_one_export_are_matched_apart(analysed, shift_us):
    """Two real two-rank H200 captures (case 1 and healthy) laid over each other: each group's
    waits are what its own capture gives, to the nanosecond. Matched by end time alone, 302-474
    of the case-1 group's 5670 kernels were matched with the other group's (a wait of
    +2.9-4.1 ms over 263.7 ms in all, with the other group's ranks named as the latecomers)."""
    a = analysed("tp2_case1").trace.collectives
    b = analysed("tp2_healthy").trace.collectives
    both = _two_groups(a, b, shift_us * 1000)
    groups = communicators(both)
    assert groups.loc[sorted(a["proc"].unique())].nunique() == 1
    assert groups.loc[sorted(b["proc"].unique() + (1 << 20))].nunique() == 1
    assert groups.nunique() == 2
    w = collective_waits(both)
    for own in (a, b.assign(proc=b["proc"] + (1 << 20))):
        got = _ordered(w[w["proc"].isin(own["proc"].unique())])
        alone = _ordered(collective_waits(own))
        assert got["wait_ns"].tolist() == alone["wait_ns"].tolist()
        assert got["waited_for"].tolist() == alone["waited_for"].tolist()


def test_ranks_of_one_group_agree_and_other_groups_do_not(analysed):
    """The numbers behind SAME_GROUP, from the two-rank captures: matched k-th with k-th, every
    kernel of a rank ends nearer its peer's than the peer's neighbours (share 1.0); a rank of
    another capture laid over it, at any shift, 0.9 % of its kernels (the old rule, ends within
    5 us, took 2.4-4.3 % of them)."""
    a = analysed("tp2_case1").trace.collectives
    b = analysed("tp2_healthy").trace.collectives
    for one in (a, b):
        ref, peer = sequences(one)
        assert match(ref, peer).agree == 1.0 and match(ref, peer).shift == 0
    for shift_us in (0, 3, 100, 1000, 50_000):
        theirs = sequences(_two_groups(a, b, shift_us * 1000))
        ours = [s for s in theirs if s.proc in set(a["proc"])]
        for other in (s for s in theirs if s.proc not in set(a["proc"])):
            share = match(ours[0], other).agree
            assert share < 0.02 < SAME_GROUP, (shift_us, share)


def test_a_rank_whose_capture_covers_less_is_still_its_group_s(analysed):
    """A rank whose kernel records start later (or whose last ones were lost) shares only part
    of its peer's kernels: counted over the whole capture it was a group of its own, and no
    kernel of either rank had a peer (waits 0). The share is counted while both ran."""
    c = analysed("tp2_case1").trace.collectives
    late = c["proc"].max()
    cut = c.loc[c["proc"] == late, "end_ns"].quantile(0.25)
    part = c[(c["proc"] != late) | (c["end_ns"] > cut)]
    assert communicators(part).nunique() == 1
    w = collective_waits(part)
    assert (w["waited_for"] >= 0).sum() > 0.5 * len(part[part["proc"] == late])


def test_no_collectives_and_kernels_of_no_known_process():
    """A Trace built with its default, column-less collectives table made the analysis fail
    (KeyError 'proc'); kernels without a process (-1) are no group (-1 means 'none')."""
    assert communicators(pd.DataFrame()).empty
    k = kernels([(-1, 5, 0, 20), (3, 5, 0, 20), (4, 5, 1, 20)])
    groups = communicators(k)
    assert groups.to_dict() == {3: 3, 4: 3}


def test_a_rank_of_one_kernel_joins_no_group(analysed):
    """Counted only while both ran, a process with one NCCL kernel agreed with any rank that
    had a kernel end near it, and joined the two groups into one (2502 of 8001 kernels then
    named the other group's rank). Lined up k-th with k-th, it shares one kernel with a
    reference of thousands: too few to join any."""
    a = analysed("tp2_case1").trace.collectives
    b = analysed("tp2_healthy").trace.collectives
    both = _two_groups(a, b, 0)
    theirs = np.sort(both.loc[~both["proc"].isin(a["proc"].unique()), "end_ns"].to_numpy())
    ours = a["end_ns"].to_numpy()
    at = np.clip(np.searchsorted(theirs, ours), 0, len(theirs) - 1)
    meeting = ours[np.abs(theirs[at] - ours) <= 2_000][0]  # a chance meeting of both
    one = both.iloc[:1].assign(proc=1 << 30, start_ns=meeting - 1000, end_ns=meeting)
    groups = communicators(pd.concat([both, one], ignore_index=True))
    assert groups.nunique() == 3 and groups[1 << 30] == 1 << 30
    assert groups.loc[sorted(a["proc"].unique())].nunique() == 1


def test_negative_pids_of_a_torch_profiler_trace_are_processes():
    """Only -1 means 'no process known'; Kineto keeps the pid it was given."""
    k = kernels([(-5, 5, 0, 20), (-6, 5, 1, 20), (-5, 6, 100, 120), (-6, 6, 101, 121)])
    assert communicators(k).to_dict() == {-6: -6, -5: -6}
