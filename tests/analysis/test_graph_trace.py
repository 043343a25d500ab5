"""Traces captured with nsys's default ``--cuda-graph-trace=graph``: each replay is one row of
``CUPTI_ACTIVITY_KIND_GRAPH_TRACE`` and its kernels, copies and memsets are not recorded.

Most users profile with nsys's defaults, so this is the shape of their traces; the other
samples trace every node. ``sample_traces/graph/`` holds graph-traced captures of the engine
and node-traced twins of the same commands from the same device session (device run G in
sample_traces/README.md), so the two modes compare within one run.
"""

from __future__ import annotations

import sqlite3

import pytest

from nsysscope.trace import resolve

GRAPH = ["graph_healthy", "graph_case1", "graph_case2", "graph_both", "graph_outcopy_case1"]
STEADY_SHARE = 0.95  # as test_report_samples: the mode's class in >= 95 % of steady launches
MODE_CLASS = {"healthy": "healthy", "case1": "gpu_to_cpu", "case2": "cpu_to_gpu"}


@pytest.mark.parametrize("name", GRAPH)
def test_each_replay_is_read_from_its_graph_trace_row(analysed, sample_path, name):
    """The export has one graph-trace row per cudaGraphLaunch and no node rows; every launch
    takes its GPU span from its own row, to the nanosecond, as one op."""
    with sqlite3.connect(resolve(sample_path(name))) as c:
        rows = dict(((corr), (start, end)) for corr, start, end in c.execute(
            'SELECT correlationId, start, "end" FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE'))
        launches = c.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds "
                             "s ON s.id = r.nameId WHERE s.value LIKE 'cudaGraphLaunch%'"
                             ).fetchone()[0]
        node_rows = sum(c.execute(f"SELECT count(*) FROM {t} WHERE graphNodeId IS NOT NULL")
                        .fetchone()[0] for t in ("CUPTI_ACTIVITY_KIND_KERNEL",
                                                 "CUPTI_ACTIVITY_KIND_MEMCPY",
                                                 "CUPTI_ACTIVITY_KIND_MEMSET"))
    assert launches == len(rows) == 200 and node_rows == 0
    a = analysed(name)
    assert a.trace.meta.graph_trace == "graph"
    L = a.launches
    assert len(L) == 200 and (L["n_ops"] == 1).all()
    spans = [rows[corr] for corr in L["corr_id"]]
    assert list(zip(L["gpu_start_ns"], L["gpu_end_ns"], strict=True)) == spans


@pytest.mark.parametrize("mode", ["healthy", "case1", "case2"])
def test_the_verdict_and_sites_match_the_node_traced_twin(analysed, mode):
    """The same command traced per graph and per node, in one session: the same class for
    >= 95 % of steady launches, and the same stall sites (class, phase, call chain, count:
    read off both traces, 194 case-1 and 193 case-2 launches in each)."""
    graph, node = analysed(f"graph_{mode}").summary, analysed(f"node_twin_{mode}").summary
    for s in (graph, node):
        assert s.classes[MODE_CLASS[mode]] / s.steady_launches >= STEADY_SHARE
    assert graph.overlap_ok == node.overlap_ok == (mode == "healthy")

    def stall_sites(s):
        return [(t.klass, t.phase, t.api_chain, t.count) for t in s.sites
                if t.klass != "launch_bound"]
    assert stall_sites(graph) == stall_sites(node)
    assert len(stall_sites(graph)) == (mode != "healthy")


@pytest.mark.parametrize("mode", ["healthy", "case1", "case2"])
def test_a_replay_traced_whole_runs_shorter_than_one_traced_per_node(analysed, mode):
    """Tracing each of a replay's 222 nodes costs GPU time: on the H200 the node-traced twin's
    median replay was 2.5 % longer (3.24 ms against 3.16 ms in all three modes). The graph
    trace must read shorter, and within 5 % (a replay that read as the whole step, or only
    its launch, would be far outside)."""
    def median_replay_ns(name):
        L = analysed(name).launches
        steady = L[L["steady"]]
        return (steady["gpu_end_ns"] - steady["gpu_start_ns"]).median()
    graph, node = median_replay_ns(f"graph_{mode}"), median_replay_ns(f"node_twin_{mode}")
    assert 0.95 * node < graph < node


def test_side_stream_output_copy_is_followed_in_a_graph_trace(analysed):
    """The vLLM-style copy stream waits on the replay through an event: without node rows the
    wait is still followed to the replay (as on the node-traced sample of device run A)."""
    s = analysed("graph_outcopy_case1").summary
    assert s.stalls["gpu_to_cpu"] == s.steady_launches == 194
    assert s.sites[0].api_chain == "cudaMemcpyAsync DtoH 1024 B \u2192 cudaEventSynchronize"
    assert s.sites[0].phase == "sample"


def test_both_is_dominated_by_the_readback_in_a_graph_trace(analysed):
    s = analysed("graph_both").summary
    assert s.classes["gpu_to_cpu"] / s.steady_launches >= STEADY_SHARE


@pytest.fixture(scope="module")
def graph_form(sample_path, tmp_path_factory):
    """The graph-traced form of a node-traced sample (tests/graph_traced.py), analysed."""
    from graph_traced import as_graph_traced

    from nsysscope.analysis import analyze
    from nsysscope.trace import load
    folder = tmp_path_factory.mktemp("graph_form")

    def get(name):
        dst = as_graph_traced(resolve(sample_path(name)), resolve(sample_path("graph_case1")),
                              folder / f"{name}.sqlite")
        return analyze(load(dst))
    return get


SAME_PER_LAUNCH = ["launch", "proc", "corr_id", "gpu_start_ns", "gpu_end_ns", "gpu_gap_ns",
                   "block_name", "block_start_ns", "block_polls", "window_ns", "klass",
                   "api_chain", "phase", "steady"]


@pytest.mark.parametrize("name", ["case1", "case2", "outcopy_case1", "poll_case1", "twoproc"])
def test_the_graph_traced_form_of_a_capture_reads_the_same_launches(analysed, graph_form, name):
    """One replay's node rows folded into its graph-trace row: every launch keeps its GPU span,
    wait, window, class, chain and phase, to the nanosecond (single and two-process captures,
    a side-stream copy, a polled wait); only the op count becomes 1."""
    node, graph = analysed(name).launches, graph_form(name).launches
    assert (graph["n_ops"] == 1).all() and (node["n_ops"] > 1).all()
    assert graph[SAME_PER_LAUNCH].equals(node[SAME_PER_LAUNCH])


def test_a_graph_traced_tensor_parallel_capture_says_peer_waits_are_unseen(analysed, graph_form):
    """Rank 1 of the rank-0 readback capture waits 1.32 ms per step in its graph's all-reduce
    for rank 0: per node, the verdict says so; traced whole, the all-reduce is not recorded.
    Rank 0's stalls read the same, and a note says what a graph-level trace cannot show (the
    node-traced report has no such note)."""
    from nsysscope.model import Note
    from nsysscope.render.notes import note_text
    GRAPH_TRACED_RANKS = note_text(Note("graph_traced_ranks"))
    node, graph = analysed("tp2_case1_rank0").summary, graph_form("tp2_case1_rank0").summary
    assert "waits 1.32 ms per step in all-reduce for rank 0 (pid 1150)" in node.verdict
    assert "all-reduce" not in graph.verdict
    assert graph.verdict == node.verdict.split("; rank 1 (pid 1151) waits")[0]
    assert GRAPH_TRACED_RANKS in graph.notes and GRAPH_TRACED_RANKS not in node.notes
    assert graph.stalls == node.stalls
