"""A server under real load (issue 56): the H100 captures of the engine as a server
(sample_traces/server/, ``capture_serving.sh``): start-up inside the capture (15 bucket graphs,
each replayed once and synchronised), three bursts of requests with 500 ms of idle after each,
the batch packed into the smallest bucket, eager prefill between decode steps, pinned host
buffers allocated every step; healthy, case 1, healthy with other bursts (300 ms idle), and
speculative decoding (3 draft replays and a verify a step, the accepted lengths read back).

Before: the check replays were steady ``other_stall`` launches past the 5 warm-up ones, the
launch before each idle period a ``gpu_to_cpu`` stall charged the idle time, and GPU busy and
the launch rate were measured over the idle time.
"""

from __future__ import annotations

import pytest

from nsysscope.analysis.idle import IDLE_STEPS

SERVERS = ["srv_healthy", "srv_case1", "srv_healthy_b2", "srv_spec"]


@pytest.fixture(scope="module")
def launches(analysed):
    return lambda name: analysed(name).launches


@pytest.mark.parametrize("name, checks", [("srv_healthy", 15), ("srv_case1", 15),
                                          ("srv_healthy_b2", 15), ("srv_spec", 45)])
def test_start_up_is_recognised_and_left_out(analysed, engine_metrics, name, checks):
    """Every bucket's graph is replayed once and waited on right after its capture (draft,
    first draft and verify graphs with speculative decoding): those launches are start-up,
    not steady and not warm-up; warm-up is counted from the launches after them."""
    a = analysed(name)
    s, df = a.summary, a.launches
    assert s.startup is not None and s.startup.launches == s.startup.graphs == checks
    assert len(engine_metrics(name)["graph_sizes"]) * (3 if name == "srv_spec" else 1) == checks
    up = df[df["startup"]]
    assert list(up.index) == list(range(checks))  # a prefix of the launches
    assert (up["klass"] == "other_stall").all() and not up["steady"].any()
    assert up["graph_exec"].is_unique  # each the first replay of its exec
    # warm-up: max(5, 2 %) of the launches after start-up, right after it
    assert s.warmup_launches == max(5, int(0.02 * (len(df) - checks)))
    assert df.loc[checks:checks + s.warmup_launches - 1, "warmup"].all()
    # the start-up span: weights, warm-up passes, capture; more than the engine's own
    # start-up timer (torch's import and CUDA's initialisation come before it)
    assert s.startup.span_us / 1e6 > engine_metrics(name)["startup_s"]
    # no steady launch stalls in a sync that is a check
    steady = df[df["steady"]]
    assert not (steady["klass"] == "other_stall").any()


@pytest.mark.parametrize("name", SERVERS)
def test_idle_periods_are_reported_and_left_out(analysed, engine_metrics, name):
    """Each burst is followed by idle time (500 ms, 300 ms for srv_healthy_b2) the engine
    slept polling an empty queue: the trace's idle periods are those between two launches
    (the last one ends the capture: not counted), within 2 % of what the engine timed (the
    quiet gap also holds the drain of the burst's last step); the launch before each is not
    judged and not a stall."""
    a, m = analysed(name), engine_metrics(name)
    s, df = a.summary, a.launches
    n = len(m["bursts"])
    assert m["idle_periods"] == n and s.idle is not None and s.idle.periods == n - 1
    assert s.idle.total_us / 1e6 == pytest.approx(m["idle_s"] * (n - 1) / n, rel=0.02)
    assert s.idle.threshold_us == pytest.approx(IDLE_STEPS * s.idle.step_us[1], rel=0.01)
    before = df[df["idle_ns"].notna()]
    assert len(before) == s.idle.periods
    assert (before["klass"] == "last").all() and not before["stall"].any()
    assert not before["steady"].any()
    # idle is no launch-bound gap and no GPU idle gap of the steady state
    assert s.gpu_gap_us.p90 is not None and s.gpu_gap_us.p90 * IDLE_STEPS < s.idle.threshold_us
    # GPU busy over serving time, and over the span with the idle periods in it
    assert s.gpu_busy_capture is not None and s.gpu_busy is not None
    assert s.gpu_busy_capture < 0.6 < s.gpu_busy


@pytest.mark.parametrize("name", ["srv_healthy", "srv_healthy_b2"])
def test_healthy_servers_read_healthy(analysed, name):
    """0 stalls, overlap healthy, GPU busy over 90 % of serving time. (The headline still
    names the launch-bound gaps: the first burst's prefills load new kernels, about 4 % of
    the GPU's time; README, "A server under real load".)"""
    s = analysed(name).summary
    assert sum(s.stalls.values()) == 0 and s.overlap_ok
    assert s.verdict.startswith("overlap healthy")
    assert s.gpu_busy >= 0.9
    late = analysed(name).launches
    late = late[late["steady"] & (late["klass"] == "launch_bound")]
    assert len(late) <= 0.11 * s.steady_launches


def test_case1_server_names_the_readback(analysed):
    s = analysed("srv_case1").summary
    assert s.stalls["gpu_to_cpu"] == s.steady_launches == 137
    assert s.headline.klass == "gpu_to_cpu" and s.headline.where == "phase 'sample'"
    assert s.headline.text.startswith("OVERLAP BROKEN: a GPU→CPU readback at phase 'sample'")


def test_speculative_decoding_is_a_readback_per_step(analysed):
    """Four launches a step (the first draft, two drafts, the verify) are one step; the
    accepted lengths read back after the verify stall nearly every one of them, a case-1
    stall with its cost."""
    s = analysed("srv_spec").summary
    b = s.bursts
    assert b is not None and b.launches_p50 == 4 and b.several
    assert b.stalled / b.steady > 0.95
    top = s.sites[0]
    assert top.klass == "gpu_to_cpu" and top.phase == "sample"
    assert top.lost_us > 0 and top.speedup_if_fixed > 1.02
    assert "tolist" not in (top.api_chain or "") and "DtoH" in top.api_chain
    assert not s.overlap_ok


@pytest.mark.parametrize("name, execs", [("srv_healthy", 10), ("srv_case1", 10),
                                         ("srv_healthy_b2", 11)])
def test_buckets_are_the_graph_execs(analysed, engine_metrics, name, execs):
    """One entry per graph exec replayed in the steady state: the engine's batch buckets;
    bigger buckets take longer on the GPU (the KV cache read grows with the batch)."""
    s, m = analysed(name).summary, engine_metrics(name)
    used = {int(k) for k, v in m["steps_per_bucket"].items() if v}
    assert len(s.graphs) == execs <= len(used)
    assert sum(g.steady for g in s.graphs) == s.steady_launches
    gpu = [g.gpu_us for g in s.graphs]
    assert gpu == sorted(gpu, reverse=True) and gpu[0] > 1.5 * gpu[-1]
    if name == "srv_case1":
        assert all(g.stalls == g.steady for g in s.graphs)


def test_pinned_allocator_queries_are_no_polling_wait(analysed):
    """The engine allocates pinned buffers every step: torch's caching host allocator
    queries the events of the blocks it freed (1,000-odd queries, most finding the work
    done). Not one makes a polling loop, nor a stall."""
    a = analysed("srv_healthy")
    api = a.trace.api
    queries = api[api["name"] == "cudaEventQuery"]
    assert len(queries) > 1000 and (queries["status"] == 0).mean() > 0.7
    assert not (a.blocks["polls"] > 0).any()


def test_the_gate_passes_two_healthy_servers_with_other_bursts(analysed):
    """Other bursts, other loads: the launch rate differs by a quarter, idle and start-up
    differ, and the gate passes both ways (its checks are of the steady state)."""
    from nsysscope.gate import compare

    a, b = analysed("srv_healthy").summary, analysed("srv_healthy_b2").summary
    for base, cand in ((a, b), (b, a)):
        r = compare(base, cand)
        assert r.passed, r.verdict
        assert not [c for c in r.checks if c.status == "fail"]


def test_the_gate_reports_what_it_left_out_and_each_bucket(analysed):
    """The notes say what start-up and idle left out of the checks, and how each graph exec
    (bucket) changed: the same engine captures its execs in the same order, so an exec is
    the same bucket in both runs, with the same GPU time per replay (within 2 %)."""
    from nsysscope.gate import compare

    r = compare(analysed("srv_healthy").summary, analysed("srv_healthy_b2").summary)
    left = [n for n in r.notes if n.startswith("start-up and idle periods are left out")]
    assert left and "15 start-up launches, 2 idle periods" in left[0]
    per = [n for n in r.notes if n.startswith("per graph exec")]
    assert len(per) == 1 and "exec 14: 40 -> 27 steady" in per[0]
    a = {g.graph_exec: g for g in analysed("srv_healthy").summary.graphs}
    b = {g.graph_exec: g for g in analysed("srv_healthy_b2").summary.graphs}
    for e in set(a) & set(b):
        assert a[e].gpu_us == pytest.approx(b[e].gpu_us, rel=0.02)


def test_the_gate_fails_a_server_that_reads_back(analysed):
    from nsysscope.gate import compare

    r = compare(analysed("srv_healthy").summary, analysed("srv_case1").summary)
    assert not r.passed
    assert {c.name for c in r.checks if c.status == "fail"} >= {"stalls.gpu_to_cpu"}


def test_the_projection_against_the_healthy_server(analysed):
    """Case 1's projected launch rate with the readback fixed, against the healthy capture of
    the same schedule: within 16 % (the healthy server is itself 8 % short of GPU-bound:
    its first burst's prefills and per-step host time, which the model of a fixed host that
    keeps ahead does not see)."""
    healthy = analysed("srv_healthy").summary.launches_per_s
    fixed = analysed("srv_case1").summary.if_fixed.launches_per_s
    assert fixed == pytest.approx(healthy, rel=0.16)
    assert fixed > healthy
