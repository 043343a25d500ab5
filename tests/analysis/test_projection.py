"""The projected gain of fixing each stall site (analysis/projection.py), checked against the
throughput the engine really reached once fixed: the healthy capture of the same device
session. The issue's target is 15 %; every pair we have lands within 6 %."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nsysscope import analyze, load
from nsysscope.analysis.stored import FrameRows
from nsysscope.gate.sides import read_summary

KINETO = Path(__file__).resolve().parents[2] / "sample_traces" / "kineto"

TARGET = 0.15  # the bound on |projected - measured healthy| / measured healthy

# (broken capture, healthy capture(s) of the same device session)
PAIRS = [
    ("case1", ["healthy"]), ("case2", ["healthy"]), ("both", ["healthy"]),
    ("case1_tolist_every4", ["healthy"]), ("case1_aten", ["healthy"]),
    ("runs_case1", [f"run{i}" for i in range(1, 6)]),
    ("runs_case2", [f"run{i}" for i in range(1, 6)]),
    ("runs_both", [f"run{i}" for i in range(1, 6)]),
    ("poll_case1", ["poll_healthy"]), ("poll_async_case1", ["poll_healthy"]),
    ("outcopy_case1", ["outcopy_healthy"]),
    ("tp2_case1", ["tp2_healthy"]), ("tp2_case1_rank0", ["tp2_healthy"]),
]


@pytest.mark.parametrize("broken,healthy", PAIRS, ids=[p[0] for p in PAIRS])
def test_projection_lands_near_the_healthy_capture(analysed, broken, healthy):
    s = analysed(broken).summary
    measured = float(np.mean([analysed(h).summary.launches_per_s for h in healthy]))
    projected = s.if_fixed.launches_per_s
    assert s.if_fixed.speedup > 1.01  # there is something to gain (case 2: ~3-5 %)
    assert abs(projected - measured) / measured < TARGET, \
        f"{broken}: projected {projected:.1f}/s, the healthy capture measured {measured:.1f}/s"


@pytest.mark.parametrize("broken", ["case1", "case2", "outcopy_case1"])
def test_projection_from_a_later_session_and_from_torch_profiler(broken):
    """Device run D: the nsys captures (kept as their summaries) and the torch.profiler captures
    without stacks of the same commands, each projected onto the nsys healthy capture's rate."""
    measured = read_summary(KINETO / "h200_nsys_twin2_healthy_60.summary.json").launches_per_s
    nsys = read_summary(KINETO / f"h200_nsys_twin2_{broken}_60.summary.json")
    kineto = analyze(load(KINETO / f"h200_kineto_nostack_{broken}_60.pt.trace.json.gz")).summary
    for s in (nsys, kineto):
        assert s.if_fixed.speedup > 1.01
        assert abs(s.if_fixed.launches_per_s - measured) / measured < TARGET


def test_the_case1_process_of_two_engines_projects_the_healthy_ones_rate(analysed):
    s = analysed("twoproc").summary
    healthy, stalled = sorted(s.processes, key=lambda p: sum(p.stalls.values()))
    assert healthy.if_fixed.speedup == 1.0
    err = abs(stalled.if_fixed.launches_per_s - healthy.launches_per_s) / healthy.launches_per_s
    assert err < TARGET


@pytest.mark.parametrize("name", ["healthy", "healthy_long", "run1", "tp2_healthy", "poll_healthy",
                                  "outcopy_healthy"])
def test_a_healthy_trace_projects_no_gain(analysed, name):
    """No stall, nothing to fix: the projection keeps every measured rate (a tensor-parallel
    group moves at its slowest rank's: tp2_healthy's ranks run 254.07 and 254.08/s, so its
    projection is 0.01/s under the sum)."""
    s = analysed(name).summary
    assert sum(s.stalls.values()) == 0 and s.if_fixed.speedup == 1.0
    assert s.if_fixed.launches_per_s == pytest.approx(s.launches_per_s, abs=0.015)


def test_fixing_rank0_also_frees_the_waiting_rank(analysed):
    """Rank 1 waits for rank 0 in all-reduce: the group's projected rate moves together."""
    s = analysed("tp2_case1_rank0").summary
    r0, r1 = sorted(s.processes, key=lambda p: -sum(p.stalls.values()))
    assert r0.if_fixed.launches_per_s == r1.if_fixed.launches_per_s
    assert r1.if_fixed.speedup > 1.2
    assert s.sites[0].speedup_if_fixed == pytest.approx(s.if_fixed.speedup, rel=1e-3)


def test_sites_come_biggest_gain_first(analysed):
    for name in ("case1", "case2", "both", "case1_tolist_every4"):
        gains = [x.speedup_if_fixed for x in analysed(name).summary.sites
                 if x.klass != "launch_bound"]
        assert gains == sorted(gains, reverse=True)


def test_the_same_stall_on_every_rank_is_one_site_fixed_everywhere(analysed):
    """tp2_case1: both ranks read back at the same line. That is one site, whose fix (in the
    code both ranks run) buys what fixing every stall does; each rank's own list names it with
    that gain too (before: two sites, each claiming ~1.3x on its own)."""
    s = analysed("tp2_case1").summary
    assert len(s.sites) == 1 and s.sites[0].count == s.stalls["gpu_to_cpu"] == 188
    assert s.sites[0].speedup_if_fixed == s.if_fixed.speedup > 1.2
    assert [p.sites[0].speedup_if_fixed for p in s.processes] == [s.if_fixed.speedup] * 2


def test_fixing_one_of_two_stalled_ranks_buys_nothing(analysed):
    """The ranks meet in every all-reduce: with rank 0's stalls fixed, rank 1 still stalls
    every step, and the group moves at its pace (the model counted rank 1's own stall block
    as host time it would save, and projected ~1.3x)."""
    from nsysscope.analysis.processes import groups_of
    from nsysscope.analysis.projection import project
    a = analysed("tp2_case1")
    L, rates = a.launches, {int(p): r for p, r in zip(
        a.processes["proc"], a.processes["launches_per_s"], strict=True)}
    first = L["proc"] == L["proc"].min()
    one = project(L, rates, L["steady"] & L["stall"] & first, groups_of(a.processes))
    both = project(L, rates, L["steady"] & L["stall"], groups_of(a.processes))
    assert one.speedup == pytest.approx(1.0, abs=0.005) and both.speedup > 1.2


def test_a_part_of_a_tp_trace_with_nothing_steady_projects_nothing(sample_path):
    """2 % of tp2_case1's span holds a few warm-up launches of each rank and no steady one:
    the ranks' group has no projected rate to take the slowest of (it raised, exit 70). No
    rate measured, none projected (it said 1.0x)."""
    from nsysscope.trace.time_range import TimeRange
    whole = load(sample_path("tp2_case1"))
    launches = whole.api[whole.api["name"] == "cudaGraphLaunch"]
    t0, t1 = int(launches["start_ns"].min()), int(launches["end_ns"].max())
    part = TimeRange(t0 + int((t1 - t0) * 0.3), t0 + int((t1 - t0) * 0.32))
    s = analyze(load(sample_path("tp2_case1"), time_range=part)).summary
    assert s.launches > 0 and s.steady_launches == 0 and s.launches_per_s is None
    assert (s.if_fixed.launches_per_s, s.if_fixed.speedup) == (None, None)


@pytest.mark.parametrize("broken", ["case1", "poll_case1", "outcopy_case1", "tp2_case1"])
def test_a_site_that_is_every_stall_projects_the_total(analysed, broken):
    """Where one site holds every stall, fixing it is fixing everything: its projected rate
    is the total's, to the digit (case 1 printed ~302.6 for the site and ~302.5 for the total:
    the site's rate was the rate times its speed-up rounded to 3 digits)."""
    s = analysed(broken).summary
    stalls = [x for x in s.sites if x.klass != "launch_bound"]
    assert len(stalls) == 1
    assert stalls[0].launches_per_s_if_fixed == s.if_fixed.launches_per_s
    assert stalls[0].speedup_if_fixed == s.if_fixed.speedup


def test_no_measured_rate_projects_nothing(sample_path):
    """One steady launch (a range of the case-1 trace): no launch rate was measured, so none
    is projected. It read 0.0 launches/s and 1.0x ("nothing to fix") for a stall that idled
    the GPU 2 ms."""
    from nsysscope import AnalysisConfig, TimeRange

    a = analyze(load(sample_path("case1"), time_range=TimeRange.parse("6.038", "6.045")),
                AnalysisConfig(warmup_launches=0))
    s = a.summary
    assert s.steady_launches == 1 and sum(s.stalls.values()) == 1 and s.launches_per_s is None
    assert (s.if_fixed.launches_per_s, s.if_fixed.speedup) == (None, None)
    assert [(x.speedup_if_fixed, x.launches_per_s_if_fixed) for x in s.sites] == [(None, None)]


def _rates(a):
    return {int(p): r for p, r in zip(a.processes["proc"], a.processes["launches_per_s"],
                                      strict=True)}


def test_a_projection_from_too_few_steps_is_withheld(analysed):
    """Issue 53: a torch.profiler trace with one stalled step among six projected "~0.89x"
    from a queue gap measured on that one step. Six steady steps of the every-4th-step
    readback capture, one stalled: too few to tell how closely the GPU runs queued replays,
    so no figure, and why."""
    from nsysscope.analysis.projection import project
    a = analysed("case1_tolist_every4")
    L = a.launches
    steady = np.flatnonzero(L["steady"].to_numpy())
    stall = steady[L["stall"].to_numpy()[steady]][2]
    keep = steady[(steady >= stall - 3) & (steady <= stall + 2)]  # (stalls come every 4th)
    part = L.iloc[keep].copy()
    part["steady"] = True
    assert len(part) == 6 and int(part["stall"].sum()) == 1
    p = project(part.reset_index(drop=True), _rates(a), part["stall"].to_numpy(), [])
    assert p.speedup is None and p.total_launches_per_s is None
    assert p.withheld.startswith("too few steps to tell how closely the GPU runs queued")
    whole = project(L, _rates(a), L["steady"] & L["stall"], [])
    assert whole.withheld is None and whole.speedup > 1.05


@pytest.mark.parametrize("over,withheld", [(1.01, False), (1.10, True)])
def test_a_fix_never_slows_a_run(analysed, over, withheld):
    """The healthy steps' GPU work made so long that the model's GPU time of the fixed run is
    ``over`` times the measured run: by 1 % (within the noise between captures), the
    projection is clamped at 1.0x, never below; by 10 %, the model contradicts the trace and
    is withheld."""
    from nsysscope.analysis.projection import project, queue_gaps
    a = analysed("case1_tolist_every4")
    L = a.launches.copy()
    steps = L["steady"] & L["period_ns"].notna()
    q = next(iter(queue_gaps(FrameRows(L)).values())).ns
    stalled = float((L.loc[steps & L["stall"], "gpu_work_ns"] + q).sum())
    healthy = steps & ~L["stall"]
    need = over * float(L.loc[steps, "period_ns"].sum()) - stalled  # the healthy steps' share
    work = need / healthy.sum() - q
    L["gpu_work_ns"] = np.where(healthy, work, L["gpu_work_ns"])
    p = project(L, _rates(a), L["steady"] & L["stall"], [])
    if withheld:
        assert p.speedup is None and "exceeds the measured steps" in p.withheld
    else:
        assert p.withheld is None and p.speedup == 1.0


def test_ranks_of_one_group_at_different_rates_are_not_projected(analysed):
    """Issue 53: two ranks that all-reduce every step projected at 290 and 178 launches/s. The
    ranks of a group step together; measured at different rates, the trace cannot be
    projected as one group, and says so."""
    from nsysscope.analysis.processes import groups_of
    from nsysscope.analysis.projection import project
    a = analysed("tp2_case1_rank0")
    L, rates = a.launches, _rates(a)
    groups = groups_of(a.processes)
    assert groups == [set(rates)]
    fair = project(L, rates, L["steady"] & L["stall"], groups)
    assert fair.withheld is None and fair.speedup > 1.3
    late = max(rates)
    skewed = {**rates, late: rates[late] * 178 / 290}
    p = project(L, skewed, L["steady"] & L["stall"], groups)
    assert p.speedup is None and "ranks of one group measured at different rates" in p.withheld


def test_a_tp_group_steps_once(analysed):
    """Issue 55, item 2: two ranks of one group at ~190 launches/s each were "launches/s 379.7
    (2 processes added)". The group steps once: the servers' rate is the ranks' mean, per
    rank beside it; two engines of one export (no collectives) add up; two groups of one
    export (data parallel over tensor parallel) add up, each counted once."""
    s = analysed("tp2_case1_rank0").summary
    each = [p.launches_per_s for p in s.processes]
    assert s.server_launches_per_s == pytest.approx(np.mean(each), abs=0.01)
    assert s.launches_per_s == pytest.approx(sum(each), abs=0.01)
    assert {p.group for p in s.processes} == {1150}
    two = analysed("twoproc").summary
    assert two.server_launches_per_s == two.launches_per_s
    assert {p.group for p in two.processes} == {None}
    from nsysscope.render.report_parts import metrics_rows
    row = dict(metrics_rows(s))["launches/s"]
    assert row.startswith(f"{s.server_launches_per_s:.1f}  (one group of 2 ranks stepping "
                          "together (190.1, 189.6 launches/s each)")


def test_dp_over_tp_adds_the_groups_once_each(dp2_tp2, analysed):
    from nsysscope import analyze, load
    s = analyze(load(dp2_tp2)).summary
    groups = {p.group for p in s.processes}
    assert len(groups) == 2
    rate = sum(np.mean([p.launches_per_s for p in s.processes if p.group == g])
               for g in groups)
    assert s.server_launches_per_s == pytest.approx(rate, abs=0.02)


def test_replays_after_a_stall_measured_against_back_to_back_ones(analysed):
    """On the every-4th-step readback capture a replay after a stalled step takes as long as
    one back to back (0.999): nothing to correct. Planted 12 % shorter after each stall (as
    on issue 53's H200 pairs), the ratio is found; a capture where every step stalls cannot
    say, and its gain is a range whose upper end is the uncorrected figure."""
    from nsysscope.analysis.after_idle import SLOWER_BACK_TO_BACK, idle_factors
    a = analysed("case1_tolist_every4")
    L = a.launches
    proc = int(L["proc"].iloc[0])
    assert idle_factors(FrameRows(L)) == {proc: 1.0}
    after = np.r_[False, L["stall"].to_numpy()[:-1]]
    planted = L.assign(gpu_end_ns=np.where(
        after, L["gpu_start_ns"] + (L["gpu_end_ns"] - L["gpu_start_ns"]) * 0.88,
        L["gpu_end_ns"]))
    assert idle_factors(FrameRows(planted))[proc] == pytest.approx(1 / 0.88, rel=0.01)
    assert idle_factors(FrameRows(analysed("case1").launches)) == {}
    f = analysed("case1").summary.if_fixed
    assert f.speedup_low < f.speedup and f.speedup == 1.577
    assert 1.577 / f.speedup_low < SLOWER_BACK_TO_BACK  # (the host bounds some steps)


@pytest.mark.parametrize("broken,healthy", [
    ("case1", ["healthy"]), ("runs_case1", [f"run{i}" for i in range(1, 6)]),
    ("graph_case1", ["graph_healthy"]), ("node_twin_case1", ["node_twin_healthy"]),
    ("twin_case1", ["twin_healthy"])])
def test_the_range_of_case1_holds_the_healthy_rate_at_its_upper_end(analysed, broken, healthy):
    """The case-1 captures beside a healthy one of the same session: the upper end (no slower
    back to back: what these H200 captures show) within 6 % of the healthy rate, the lower end
    (12 % slower: another machine's H200 pairs) 11-14 % below it."""
    s = analysed(broken).summary
    measured = float(np.mean([analysed(h).summary.launches_per_s for h in healthy]))
    f = s.if_fixed
    assert abs(f.launches_per_s - measured) / measured < 0.06
    assert -0.14 < (f.launches_per_s_low - measured) / measured < -0.11
