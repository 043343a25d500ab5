"""Ranks lined up the way NCCL orders them (:mod:`nsysscope.analysis.alignment`): clock
offsets and noise planted into the real two-rank H200 captures.

``tp2_case1_rank0`` is the capture where only rank 0 reads back (case 1) and rank 1 spins in
its first all-reduce every step. Planted: rank 1's collective kernels moved by a constant
offset (its GPU clock off by 0 to 1 ms) plus, per kernel, normal noise on both ends (the
clock's jitter). What must hold: rank 1 waits for rank 0, and its collective wait per step is
within 15 % of the extra NCCL kernel time per step (rank 1's NCCL time per step minus rank
0's: a collective ends on both ranks at once, so what one rank spends more in it is its
wait). Under the old rule (kernels ending within 5 us of each other are one collective) a
10 us offset already left rank 1 waiting for nobody ("healthy, p50 0.0 us": issue 53)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from nsysscope import analyze
from nsysscope.analysis.alignment import align_ranks, collective_ids
from nsysscope.analysis.collectives import collective_waits

US = 1_000


def planted(collectives: pd.DataFrame, proc: int, offset_ns: int, jitter_ns: float,
            seed: int = 0) -> pd.DataFrame:
    """``collectives`` with ``proc``'s kernels moved by ``offset_ns`` plus normal noise of
    ``jitter_ns`` (one draw per kernel, both its ends: its clock's error)."""
    c = collectives.copy()
    mine = (c["proc"] == proc).to_numpy()
    noise = np.random.default_rng(seed).normal(0, jitter_ns, mine.sum()).astype(np.int64) \
        if jitter_ns else 0
    for col in ("start_ns", "end_ns"):
        c.loc[mine, col] = c.loc[mine, col].to_numpy() + offset_ns + noise
    return c


def nccl_per_step(collectives: pd.DataFrame, launches: pd.DataFrame) -> pd.Series:
    """Median NCCL kernel time per steady launch, by process (the kernels of a replay carry
    its correlation id)."""
    steady = launches[launches["steady"]]
    c = collectives
    per = (c["end_ns"] - c["start_ns"]).groupby([c["proc"], c["corr_id"]]).sum()
    time = per.reindex(pd.MultiIndex.from_arrays([steady["proc"], steady["corr_id"]]))
    return pd.Series(time.fillna(0).to_numpy(), index=steady.index).groupby(
        steady["proc"].to_numpy()).median()


@pytest.fixture(scope="module")
def rank0_case(analysed):
    a = analysed("tp2_case1_rank0")
    c = a.trace.collectives
    extra = nccl_per_step(c, a.launches)
    late, early = extra.idxmax(), extra.idxmin()  # rank 1 spends ~1.3 ms more per step
    return a.trace, late, early, extra[late] - extra[early]


@pytest.mark.parametrize("jitter_us", [0, 20])
@pytest.mark.parametrize("offset_us", [0, 10, 100, 1000, -1000])
def test_a_rank_waiting_for_a_stalled_peer_is_found_whatever_its_clock(rank0_case, offset_us,
                                                                        jitter_us):
    trace, late, early, extra = rank0_case
    c = planted(trace.collectives, late, offset_us * US, jitter_us * US)
    a = analyze(dataclasses.replace(trace, collectives=c))
    ps = {p.pid: p for p in a.summary.processes}
    waiting = ps[late & 0xFFFFFF]
    assert waiting.status == "waits_for_peer"
    assert waiting.waits_for_pid == early & 0xFFFFFF
    wait_ns = waiting.collective_wait_us.p50 * 1e3
    assert abs(wait_ns - extra) <= 0.15 * extra, (wait_ns, extra)
    row = align_ranks(c).table.loc[late]  # (the reference: rank 0, as many kernels, smaller)
    assert row["shift"] == 0 and row["group"] == early
    if abs(offset_us * US) > 2 * row["spread_ns"]:  # (an offset within the scatter of the
        # ends is not told from none: alignment.py)
        assert abs(row["offset_ns"] - offset_us * US) < 1 * US + jitter_us * US / 20


@pytest.mark.parametrize("offset_us", [10, 100, 1000])
def test_the_offset_found_is_the_planted_one_to_a_few_ns(rank0_case, offset_us):
    """Without noise the offset found is the planted one plus the capture's own median end
    difference (21 ns): the waits are the capture's own, to the nanosecond but for that."""
    trace, late, early, _ = rank0_case
    c = planted(trace.collectives, late, offset_us * US, 0)
    t = align_ranks(c).table
    assert t.loc[late, "group"] == early
    assert abs(t.loc[late, "offset_ns"] - offset_us * US) < 50
    before = collective_waits(trace.collectives).set_index(["proc", "corr_id", "start_ns"])
    after = collective_waits(c)
    after["start_ns"] -= np.where(after["proc"] == late, offset_us * US, 0)
    after = after.set_index(["proc", "corr_id", "start_ns"]).loc[before.index]
    # the 21 ns removed can only swap the latecomer of two ranks that started within it
    swapped = after["waited_for"] != before["waited_for"]
    assert (before["wait_ns"][swapped] <= 50).all() and (after["wait_ns"][swapped] <= 50).all()
    assert (after["wait_ns"] - before["wait_ns"]).abs().max() <= 50


def test_the_real_captures_keep_their_waits_to_the_nanosecond(analysed):
    """The captures' ranks end 21-93 ns apart in the median, within their ends' scatter
    (~295 ns): no offset is applied, and every wait is what matching by end time gave."""
    for name in ("tp2_case1", "tp2_healthy", "tp2_case1_rank0"):
        t = align_ranks(analysed(name).trace.collectives).table
        assert (t["offset_ns"] == 0).all() and (t["shift"] == 0).all()
        assert t["group"].nunique() == 1 and (t["agree"] == 1.0).all()
        assert (t["spread_ns"] < 400).all()


@pytest.mark.parametrize("offset_us,jitter_us", [(0, 0), (1000, 0), (1000, 20), (-300, 20)])
def test_two_groups_in_one_export_each_keep_their_own_waits(analysed, offset_us, jitter_us):
    """Two real two-rank captures laid over each other (case 1 on both ranks, healthy), one
    rank of each moved by the offset, with noise: two groups, each rank matched within its
    own, and each launch's wait what its own capture gives (within the noise's effect)."""
    a = analysed("tp2_case1").trace.collectives
    b = analysed("tp2_healthy").trace.collectives
    move = a["start_ns"].min() - b["start_ns"].min() + 1_000_000
    b = b.assign(proc=b["proc"] + (1 << 20), start_ns=b["start_ns"] + move,
                 end_ns=b["end_ns"] + move)
    both = pd.concat([a, b], ignore_index=True)
    for own in (a, b):
        both = planted(both, int(own["proc"].max()), offset_us * US, jitter_us * US)
    t = align_ranks(both).table
    assert t["group"].nunique() == 2
    assert t.loc[sorted(a["proc"].unique()), "group"].nunique() == 1
    assert t.loc[sorted(b["proc"].unique()), "group"].nunique() == 1
    w = collective_waits(both)
    for own in (a, b):
        alone = collective_waits(own).groupby(["proc", "corr_id"])["wait_ns"].sum()
        got = w[w["proc"].isin(own["proc"].unique())].groupby(["proc", "corr_id"])[
            "wait_ns"].sum().loc[alone.index]
        err = (got - alone).abs()
        # per launch (24 collectives): without noise, at most 24 times the capture's own
        # median end difference (21-93 ns) that a planted offset's estimate takes in; with
        # 20 us of noise, the short collectives' waits are capped by their ~6 us kernels
        assert err.max() <= (2.5 * US if not jitter_us else 24 * 8 * US), err.max()
        assert err.median() <= (1 * US if not jitter_us else 40 * US)


def test_eager_collectives_line_up_as_in_graph_ones(analysed):
    """Eager collectives carry a correlation id each (their own launch), graph ones their
    replay's: the matching reads neither, so the real kernels given one id each line up and
    wait as they did."""
    c = analysed("tp2_case1_rank0").trace.collectives
    eager = c.assign(corr_id=np.arange(len(c)) + 10**9)
    assert align_ranks(eager).table.equals(align_ranks(c).table)
    w, we = collective_waits(c), collective_waits(eager)
    assert (w["wait_ns"].to_numpy() == we["wait_ns"].to_numpy()).all()


@pytest.mark.parametrize("cut", [1, 2, 700])
def test_a_rank_recorded_from_a_later_collective_is_shifted(analysed, cut):
    """A rank whose first ``cut`` kernels were not recorded (its capture began later): its
    k-th kernel is its peer's ``k + cut``-th, found by the kernels' times and names, also
    with a 100 us clock offset planted."""
    c = analysed("tp2_case1_rank0").trace.collectives
    late = int(c["proc"].max())
    mine = np.flatnonzero(c["proc"].to_numpy() == late)
    cut_c = c.drop(index=c.index[mine[np.argsort(c["end_ns"].to_numpy()[mine])[:cut]]])
    for offset in (0, 100 * US):
        shifted = planted(cut_c, late, offset, 0)
        t = align_ranks(shifted).table
        assert t.loc[late, "shift"] == cut and t.loc[late, "group"] != late
        assert abs(t.loc[late, "offset_ns"] - offset) < 100
        ids, _ = collective_ids(shifted, align_ranks(shifted))
        assert (ids[shifted["proc"].to_numpy() == late] >= 0).all()


@pytest.mark.parametrize("jitter_us,share", [(20, 0.95), (50, 0.6), (80, 0.5)])
def test_noise_up_to_tens_of_us_keeps_the_ranks_one_group(analysed, jitter_us, share):
    """The numbers behind SAME_GROUP: with normal noise on one rank's clock, the share of its
    kernels that end nearer their peer's than the neighbouring collective (0.98, 0.70, 0.54);
    ranks of different captures share 0.009 (test_collectives.py)."""
    c = analysed("tp2_case1_rank0").trace.collectives
    t = align_ranks(planted(c, int(c["proc"].max()), 1000 * US, jitter_us * US)).table
    assert t["group"].nunique() == 1 and t["agree"].min() >= share
