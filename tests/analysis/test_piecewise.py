"""Piecewise CUDA graphs (vLLM's for mixed batches): each step is many graph launches, one per
piece, and only the step's last launch is followed by the host block that can stall.

The samples (device run P, sample_traces/README.md) run 24 layers as 24 graphs per step.
Counted per launch, case 1's stall on every step was 97 of 2351 launches (4.1 %), under the
verdict's 5 %, and the report said "overlap healthy". The verdict counts launch bursts (the
launches between two host blocks: :mod:`nsysscope.analysis.bursts`) where a burst is several
launches.
"""

from __future__ import annotations

import pytest

from nsysscope.model import STALL_CLASSES

PIECES = 24


@pytest.mark.parametrize("mode", ["healthy", "case1", "case2"])
def test_a_burst_is_one_step_of_24_launches(analysed, mode):
    """Every steady burst holds the 24 launches of one NVTX step, in one step and no other."""
    a = analysed(f"pieces_{mode}")
    b = a.summary.bursts
    assert (b.steady, b.launches_p50) == (98, PIECES)
    steady = a.launches[a.launches["steady"]]
    per_burst = steady.groupby("burst")["step"].agg(["nunique", "size", "first"])
    assert (per_burst["nunique"] == 1).all()
    assert per_burst["first"].is_unique  # one burst per step
    assert (per_burst["size"] == PIECES).sum() >= 96  # the first and last may be cut by warm-up


@pytest.mark.parametrize("mode, klass", [("case1", "gpu_to_cpu"), ("case2", "cpu_to_gpu")])
def test_a_stall_on_every_step_breaks_overlap_though_few_launches_stall(analysed, mode, klass):
    """97 of 2351 steady launches (4.1 %) stall, one per step, each its step's last launch:
    97 of 98 steps. The verdict says broken, counted in steps."""
    s = analysed(f"pieces_{mode}").summary
    assert sum(s.stalls.values()) == s.stalls[klass] == 97 and s.steady_launches == 2351
    assert sum(s.stalls.values()) / s.steady_launches < s.config["stall_fraction_broken"]
    assert not s.overlap_ok
    assert s.verdict.startswith(f"OVERLAP BROKEN: 97/98 steady steps stall ({klass} at phase ")
    assert "24 graph launches per step" in s.verdict
    assert s.bursts.stalled == 97


@pytest.mark.parametrize("mode", ["case1", "case2"])
def test_the_stalled_launch_is_its_steps_last(analysed, mode):
    L = analysed(f"pieces_{mode}").launches
    steady = L[L["steady"]].sort_values("api_start_ns")
    last = steady.groupby("burst").tail(1)
    stalled = steady[steady["klass"].isin([str(c) for c in STALL_CLASSES])]
    assert set(stalled.index) <= set(last.index) and len(stalled) == 97


def test_the_windows_of_a_step_are_those_of_its_last_launch(analysed):
    """Per launch, case 1's window p50 (561 us) mixes every piece's; the step's is its last
    launch's, the time from its launch to the readback (128 us, as the single-graph case 1
    samples' 130-230 us)."""
    s = analysed("pieces_case1").summary
    assert s.window_us.p50 > 400 and 100 < s.bursts.window_us.p50 < 250


def test_healthy_piecewise_stays_healthy(analysed):
    s = analysed("pieces_healthy").summary
    assert s.overlap_ok and s.bursts.stalled == 0
    assert s.verdict.startswith("overlap healthy")


@pytest.mark.parametrize("mode", ["healthy", "case1", "case2"])
def test_rates_and_busy_agree_with_the_engine(analysed, engine_metrics, mode):
    """As for the one-graph samples: steps/s within 3 % (the launch rate over 24 launches a
    step), GPU busy within 4 points."""
    s, m = analysed(f"pieces_{mode}").summary, engine_metrics(f"pieces_{mode}")
    assert m["graph_pieces"] == PIECES
    assert s.launches_per_s / PIECES == pytest.approx(m["steps_per_s"], rel=0.03)
    assert s.gpu_busy == pytest.approx(m["gpu_busy"], abs=0.04)


@pytest.mark.parametrize("name", ["healthy", "case1", "case2", "twoproc", "tp2_case1_rank0",
                                  "outcopy_case1_every8", "poll_healthy"])
def test_one_graph_a_step_is_judged_per_launch_as_before(analysed, name):
    """With the step in one graph a burst is one launch (poll_healthy: 83 bursts of 94
    launches, 11 with two launches the host never waited between; still one in the median),
    so the verdict counts launches, as its text says."""
    s = analysed(name).summary
    assert s.bursts.launches_p50 == 1 and not s.bursts.several
    if name != "poll_healthy":
        assert s.bursts.steady == s.steady_launches
    assert "steady steps" not in s.verdict


def test_a_host_bound_piecewise_engine_is_launch_bound_per_step(analysed, engine_metrics):
    """25 ms of host work a step: the GPU idles after each step's last launch, 58 of 1411
    launches (4.1 %, under 5 %), and the report said "overlap healthy" at 42 % GPU busy. As the
    one-graph CPU-bound sample reads "launch-bound on 293/293 launches", this reads 58/59
    steps."""
    s = analysed("pieces_hostbound").summary
    assert s.classes["launch_bound"] == 58 and s.steady_launches == 1411
    assert s.bursts.launch_bound == 58 and s.bursts.steady == 59 and s.bursts.stalled == 0
    assert s.verdict.startswith("overlap works, but the host is launch-bound on 58/59 steps")
    assert s.gpu_busy == pytest.approx(engine_metrics("pieces_hostbound")["gpu_busy"], abs=0.04)


def test_a_launching_thread_that_never_blocks_is_judged_per_launch(analysed):
    """Steps are split by the launching threads' own blocks only: without them (every block
    dropped) the whole trace is one burst, too few to judge by, and the verdict goes back to
    counting launches (the earlier, diluted one) instead of calling one step 1/1."""
    from nsysscope.analysis.bursts import burst_numbers, steady_bursts
    a = analysed("pieces_case1")
    L = a.launches.assign(burst=burst_numbers(a.launches, a.blocks.iloc[:0]))
    b = steady_bursts(L[L["steady"]])
    assert (b.steady, b.stalled) == (1, 1) and not b.several


def test_blocks_of_other_threads_do_not_split_steps(analysed):
    """A block on a thread that launches nothing (an output thread syncing its copies) right
    after every launch: counted, each step would be 24 one-launch steps and the stall share
    1/24 again."""
    import pandas as pd

    from nsysscope.analysis.bursts import burst_numbers
    a = analysed("pieces_case1")
    L, B = a.launches, a.blocks
    other = B.iloc[[0] * len(L)].assign(tid=B["tid"].max() + 1, proc=L["proc"].to_numpy(),
                                        start_ns=L["api_start_ns"].to_numpy() + 1)
    assert (burst_numbers(L, pd.concat([B, other])) == burst_numbers(L, B)).all()


def test_torch_profiler_traces_of_piecewise_graphs_count_steps_too():
    """The same engine under torch.profiler (no stacks, 40 steps): 38 of 940 steady launches
    stall (4.0 %), 38 of 40 steps; the verdict counts steps, as on the nsys captures."""
    from pathlib import Path

    import nsysscope
    trace = Path(__file__).resolve().parents[2] / "sample_traces" / "kineto" / \
        "h200_kineto_pw24_case1_40.pt.trace.json.gz"
    s = nsysscope.open(trace).summary
    assert s.trace.nsys_version == "none"  # read as a torch.profiler trace
    assert (s.stalls["gpu_to_cpu"], s.steady_launches) == (38, 940)
    assert (s.bursts.stalled, s.bursts.steady, s.bursts.launches_p50) == (38, 40, PIECES)
    assert s.verdict.startswith("OVERLAP BROKEN: 38/40 steady steps stall (gpu_to_cpu")
