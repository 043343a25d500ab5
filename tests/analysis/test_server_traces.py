"""Real server-shaped H200 captures (sample_traces/README.md): several processes and TP ranks
in one export, output copies on a side stream, hosts that poll events.

Every expectation comes from how the engine was run (which process or rank reads back, on
which steps), not from nsysscope's own output: a stalled process stalls on every steady
launch, a healthy one on none; ``--stall-every 8`` stalls exactly the steps divisible by 8.
Times are checked against the trace's own scale (a step is ~3.3 ms of GPU work on this
engine; a readback's window is the few hundred microseconds of host work between the launch
and the readback), with the tolerances stated at each assertion."""

from __future__ import annotations

import dataclasses

import pytest

from nsysscope.analysis import AnalysisConfig, analyze
from nsysscope.analysis.calls import ThreadCalls
from nsysscope.analysis.polling import polling_blocks
from nsysscope.trace.apis import QUERY_APIS

STALL_KEYS = ("gpu_to_cpu", "cpu_to_gpu", "other_stall")


def by_status(a):
    return {p.status: p for p in a.summary.processes}


def test_two_engines_in_one_report_are_kept_apart(analysed):
    """One healthy and one case-1 engine on two GPUs, both calling theirs device 0; before
    processes were told apart the healthy one was called stalled too (525 stalls for ~298)."""
    s = analysed("twoproc").summary
    assert len(s.processes) == 2
    assert {p.device for p in s.processes} == {0}  # CUDA_VISIBLE_DEVICES: both see device 0
    healthy, stalled = sorted(s.processes, key=lambda p: sum(p.stalls.values()))
    assert sum(healthy.stalls.values()) == 0 and healthy.status == "healthy"
    assert stalled.stalls["gpu_to_cpu"] == stalled.steady_launches == 194
    assert s.stalls["gpu_to_cpu"] == 194  # the totals are the sum over processes
    assert s.steady_launches == healthy.steady_launches + stalled.steady_launches
    # the healthy engine works a whole step ahead (>= 2 ms of a ~3.3 ms step); the stalled
    # one waits right after its launch (< 0.5 ms)
    assert healthy.window_us.p50 > 2000 and stalled.window_us.p50 < 500
    assert healthy.gpu_gap_us.p50 < 60 and stalled.gpu_gap_us.p50 > 1000
    assert s.verdict.startswith(f"OVERLAP BROKEN in 1 of 2 processes: pid {stalled.pid} ")


def test_tp2_healthy_ranks_wait_for_nobody(analysed):
    s = analysed("tp2_healthy").summary
    assert [p.status for p in s.processes] == ["healthy", "healthy"]
    assert sum(s.stalls.values()) == 0
    # collective skew between healthy ranks is noise: tens of microseconds per step
    assert all(p.collective_wait_us.p50 < 100 for p in s.processes)
    assert s.verdict.startswith("overlap healthy in all 2 processes")


def test_tp2_case1_on_every_rank_stalls_every_rank(analysed):
    s = analysed("tp2_case1").summary
    assert [p.status for p in s.processes] == ["stalls", "stalls"]
    assert all(p.stalls["gpu_to_cpu"] == p.steady_launches for p in s.processes)
    # the verdict names both stalled ranks (before: only the worst, as if it were alone), by
    # rank: each on its own GPU (0 and 1) of the node
    by_loss = sorted(s.processes, key=lambda p: -sum(site.lost_us for site in p.sites))
    assert [(p.rank, p.device) for p in s.processes] == [(0, 0), (1, 1)]
    assert s.verdict.startswith("OVERLAP BROKEN in 2 of 2 processes: ranks 0, 1 (pids 937, "
                                f"938); the worst, {by_loss[0].label}, 94/94 steady launches "
                                "stall")


def test_tp2_case1_on_rank0_names_its_line_and_the_waiting_rank(analysed):
    """Only rank 0 reads back: rank 0 stalls at sampler.py:58; rank 1 launches on time and
    spins in the next all-reduce, waiting for rank 0 (before: 383 stalls, no rank named)."""
    s = analysed("tp2_case1_rank0").summary
    st = by_status(analysed("tp2_case1_rank0"))
    rank0, rank1 = st["stalls"], st["waits_for_peer"]
    assert rank0.stalls["gpu_to_cpu"] == rank0.steady_launches
    assert sum(rank1.stalls.values()) == 0
    site = rank0.sites[0]
    assert (site.source.file, site.source.line) == ("engine_under_test/sampler.py", 58)
    assert site.source.text.strip() == "if is_greedy.all():"
    assert rank1.waits_for_pid == rank0.pid and rank1.waits_in == "all-reduce"
    # rank 1 waits about rank 0's stall per step: rank 0's GPU idles ~1.4 ms per step
    assert 0.5 * rank0.gpu_gap_us.p50 < rank1.collective_wait_us.p50 < 1.5 * rank0.gpu_gap_us.p50
    assert rank1.gpu_busy > 0.95  # it is busy... spinning in NCCL
    assert (rank0.rank, rank1.rank, rank1.waits_for_rank) == (0, 1, 0)
    assert f"rank 1 (pid {rank1.pid}) waits" in s.verdict and \
        f"for rank 0 (pid {rank0.pid})" in s.verdict


@pytest.mark.parametrize("name", ["tp2_healthy", "tp2_case1_rank0"])
def test_the_nccl_watchdog_queries_change_nothing(analysed, name):
    """Every rank's NCCL watchdog thread polls cudaEventQuery; with polling detection off the
    result is the same."""
    a = analysed(name)
    off = analyze(a.trace, AnalysisConfig(poll_min_queries=10**9))
    cols = ["klass", "window_ns", "block_start_ns", "block_end_ns"]
    assert a.launches[cols].equals(off.launches[cols])


@pytest.mark.parametrize("name", ["tp2_healthy", "tp2_case1_rank0"])
def test_the_nccl_watchdog_threads_are_never_polling_loops(analysed, name):
    """The watchdogs' queries come well under a microsecond apart, but almost all of them
    find their work done, and a success ends a loop: with the return codes alone hardly any
    run of three forms. Without return codes (an export that lacks them) every run of
    queries would be a loop; the watchdog threads, which only query, are left out even so."""
    trace = analysed(name).trace
    api, names = trace.api, dict(zip(trace.threads["tid"], trace.threads["thread_name"],
                                     strict=False))
    queries = api["name"].isin(QUERY_APIS)
    only_query = set(api.loc[queries, "tid"]) - set(api.loc[~queries, "tid"])
    # the premise: one watchdog per rank, each with over a thousand queries in 100 steps
    assert {names[t] for t in only_query} == {"pt_nccl_watchdg"} and len(only_query) == 2
    assert all((api["tid"] == t).sum() > 1000 for t in only_query)
    # without the return codes, nor the links of the queries to their events (which split
    # runs that query different events: issue 56's allocator queries)
    no_codes = dataclasses.replace(trace, api=api.assign(status=0),
                                   syncs=trace.syncs.assign(event_sync_id=-1))
    loops = polling_blocks(no_codes, ThreadCalls.of(no_codes.api), AnalysisConfig())
    assert len(loops) and not set(loops["tid"]) & only_query
    # those are the engine threads' teardown: 162 queries each, all finding their work done,
    # of 160 different events (a loop polls one): with the links no loop at all (issue 56)
    assert set(loops["polls"]) == {162}
    assert polling_blocks(trace, ThreadCalls.of(api), AnalysisConfig()).empty


def test_side_stream_output_copy_healthy(analysed):
    s = analysed("outcopy_healthy").summary
    assert sum(s.stalls.values()) == 0 and s.overlap_ok
    assert s.window_us.p50 > 2000  # the host waits on the copy event a step later


def test_side_stream_output_copy_case1_is_a_readback(analysed):
    """vLLM-style: the copy stream waits for the compute stream, copies the tokens DtoH and
    records an event; waiting on it right after the launch is case 1 (before: launch-bound,
    0 stalls)."""
    a = analysed("outcopy_case1")
    s = a.summary
    assert s.stalls["gpu_to_cpu"] == s.steady_launches == 194
    assert s.sites[0].api_chain == "cudaMemcpyAsync DtoH 1024 B \u2192 cudaEventSynchronize"
    assert s.sites[0].phase == "sample"


def test_side_stream_stall_every_8th_step(analysed):
    """--stall-every 8: exactly the steady steps divisible by 8 stall (before: 'healthy')."""
    a = analysed("outcopy_case1_every8")
    steady = a.launches[a.launches["steady"]]
    stalled = steady[steady["stall"]]
    assert set(stalled["klass"]) == {"gpu_to_cpu"}
    assert set(stalled["step"] % 8) == {0}
    assert len(stalled) == int((steady["step"] % 8 == 0).sum())


def test_polling_healthy_waits_a_step_ahead(analysed):
    a = analysed("poll_healthy")
    s = a.summary
    assert sum(s.stalls.values()) == 0 and s.no_wait < 0.2 * s.steady_launches
    period_us = 1e6 / s.launches_per_s
    assert 0.7 * period_us < s.window_us.p50 < 1.5 * period_us  # about a step
    waited = a.launches[a.launches["steady"] & a.launches["waited"]]
    assert (waited["block_polls"] >= 3).all()


@pytest.mark.parametrize("name", ["poll_case1", "poll_async_case1"])
def test_polling_case1_is_found(analysed, name):
    """A readback made by polling the copy's event (~2000 tight tries, or ~600 with an
    asyncio yield between them) is case 1 (before: launch-bound, 0 stalls)."""
    s = analysed(name).summary
    assert s.stalls["gpu_to_cpu"] >= 0.95 * s.steady_launches
    site = s.sites[0]
    assert site.api_chain == "cudaMemcpyAsync DtoH 1 B \u2192 cudaEventQuery (polling)"
    assert site.mean_polls > 100
    # the window is the host's sample-phase work before the readback: well under a step
    assert s.window_us.p50 < 500


@pytest.mark.parametrize("name", ["twoproc", "tp2_case1", "tp2_healthy"])
def test_steps_per_s_adds_the_processes_as_launches_per_s_does(analysed, name):
    """The engine runs one graph launch per NVTX step, so the two rates agree; both add the
    processes' own rates (before, the steps of every process were pooled over one span:
    294/s on twoproc, whose engines do 306 and 195). Within 1 %: a rate counted from ~100-200
    steps over the span between the first and last differs by about one step from the
    launches' count over their replays' span."""
    s = analysed(name).summary
    assert len(s.processes) == 2
    assert s.launches_per_s == pytest.approx(sum(p.launches_per_s for p in s.processes),
                                             abs=0.02)
    assert s.steps_per_s == pytest.approx(s.launches_per_s, rel=0.01)


def test_steps_from_a_process_that_launches_nothing_still_count(analysed):
    """A scheduler process may emit the ``step N`` ranges while workers launch the graphs:
    its steps count over the launching processes' steady span. Here case1's ranges are moved
    to another process id (its launches stay): the step rate is the same."""
    a = analysed("case1")
    nv = a.trace.nvtx
    scheduler = nv.assign(tid=nv["tid"] + (1 << 24))  # the same threads, one pid up
    moved = analyze(dataclasses.replace(a.trace, nvtx=scheduler)).summary
    assert moved.steps_per_s == a.summary.steps_per_s is not None


# -- two tensor-parallel groups in one export -------------------------------------------------

def test_two_tensor_parallel_groups_in_one_export_are_each_their_own(dp2_tp2, analysed):
    """Every rank's summary is its own capture's: status, steady launches, classes, windows,
    waits in collectives and the peer waited for. Matched by end time alone, the healthy
    group's ranks waited p50 15.4-15.9 us instead of 14.6-14.7 (p90 31.8-37.2 instead of
    ~26), their kernels matched with the other group's. Only what depends on the whole trace
    differs: the sites' example launch number and projected gain."""
    from nsysscope import analyze, load
    from nsysscope.model.schema import to_plain
    a = analyze(load(dp2_tp2))
    own = {p.pid: p for name in ("tp2_case1", "tp2_healthy")
           for p in analysed(name).summary.processes}
    assert sorted(p.pid for p in a.summary.processes) == sorted(own) and len(own) == 4
    trace_wide = {"example_launch", "speedup_if_fixed", "launches_per_s_if_fixed"}
    healthy = {p.pid for p in analysed("tp2_healthy").summary.processes}
    for p in a.summary.processes:
        got, want = to_plain(p), to_plain(own[p.pid])
        if p.pid in healthy:  # the second group's GPUs: 2 and 3, so are its ranks
            want["device"] += 2
            want["rank"] += 2
            want["waits_for_rank"] += 2
            for k in ("verdict", "status"):
                want[k] = want[k].replace("rank 1 (", "rank 3 (").replace("rank 0 (", "rank 2 (")
        for site in (*got["sites"], *want["sites"]):
            for key in trace_wide:
                site.pop(key)
        assert got == want, p.pid
    groups = a.launches.groupby("collective_group")["proc"].unique()
    assert sorted(sorted(int(x) & 0xFFFFFF for x in g) for g in groups) == [[721, 722], [937, 938]]
    assert "2 groups of ranks wait for each other in collectives (pids 721, 722; pids 937, " \
           "938)" in " ".join(a.summary.notes)
    assert not any("groups of ranks" in n for n in analysed("tp2_case1").summary.notes)


@pytest.mark.parametrize("name", ["poll_case1", "poll_async_case1", "poll_healthy"])
def test_a_polling_loop_waits_on_the_event_its_queries_name(analysed, name):
    """Every query of these captures has a sync record naming its event, so a loop is an
    exact event wait: it covers the work queued before that event's record, which the engine
    issues after the launch and before the next (before, a loop's boundary was its own first
    try: a step after the next launch in the healthy engine, which polls the previous step's
    event). The cause is the copy right before that record: this step's readback, issued
    before the next launch (before, the healthy engine's was the next step's copy)."""
    a = analysed(name)
    launches = a.launches
    waited = launches[launches["steady"] & launches["waited"]]
    blocks = a.blocks.set_index("block").loc[waited["block"]]
    assert len(waited) >= 80 and (blocks["polls"] >= 3).all()
    assert blocks["exact"].all() and set(blocks["scope"]) == {"event"}
    boundary = blocks["boundary_ns"].to_numpy()
    assert (waited["api_end_ns"].to_numpy() < boundary).all()
    assert (boundary < waited["next_api_start_ns"].to_numpy()).all()
    assert (boundary < waited["block_start_ns"].to_numpy()).all()
    cause = waited["cause_start_ns"].to_numpy()
    assert (cause < boundary).all() and (cause < waited["next_api_start_ns"].to_numpy()).all()


def test_a_polling_loop_on_another_streams_event_does_not_wait_on_the_launch(analysed):
    """The same poll_case1 capture with the polled events recorded on a stream that no graph
    runs on and no stream waits for: the loops still end when the replays do, but they wait
    on other work, so no launch is paired with them (before, loops were paired by timing
    alone, and every steady launch stayed gpu_to_cpu)."""
    trace = analysed("poll_case1").trace
    launch_streams = set(analysed("poll_case1").launches["stream"])
    elsewhere = max(launch_streams) + 1000
    moved = dataclasses.replace(trace, event_records=trace.event_records.assign(stream=elsewhere))
    s = analyze(moved).summary
    assert s.stalls["gpu_to_cpu"] == 0
    assert analysed("poll_case1").summary.stalls["gpu_to_cpu"] == s.steady_launches
