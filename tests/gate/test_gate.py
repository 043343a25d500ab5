"""The regression gate on the real H200 sample traces (issue 4).

Numbers asserted here were read off the samples (sample_traces/README.md); each tolerance is
stated where used. CLI tests run from an empty temporary folder so that no pyproject.toml
above the repository changes the default thresholds.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from click.testing import CliRunner

import nsysscope
from nsysscope.cli import cli
from nsysscope.gate import (
    GateThresholds,
    compare,
    load_thresholds,
    mann_whitney_greater,
    mann_whitney_less,
    part_summary,
    read_summary,
    two_proportion_greater,
)
from nsysscope.model import CHANGED, FAIL, IMPROVED, GateResult
from nsysscope.render.json_ import render as summary_json

FA_WINDOWS = 10
#: the false-alarm rate the gate's thresholds are calibrated to stay under (docs/gate.md, "Measured
#: false-alarm rate": 0 of the 90 ordered pairs of these windows fail; 5 % is what a CI gate
#: can live with, one spurious failure in twenty runs)
FA_MAX = 0.05


@pytest.fixture(autouse=True)
def _empty_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def gate(*args: str):
    # a wide "terminal": these tests read what the report says, not how it wraps (that is
    # tests/cli/test_usability.py's)
    return CliRunner(env={"COLUMNS": "1000"}).invoke(cli, ["gate", *map(str, args)])


@pytest.fixture(scope="module")
def summary_file(analysed, tmp_path_factory):
    """``summary_file("healthy")`` -> that sample's summary JSON, as ``nsysscope summarize``
    writes it (the same function; the command itself is tested below)."""
    folder = tmp_path_factory.mktemp("summaries")

    def get(name: str):
        out = folder / f"{name}.json"
        if not out.exists():
            out.write_text(summary_json(analysed(name).summary), encoding="utf-8")
        return out
    return get


def test_summarize_command_writes_the_summary(sample_path, summary_file, tmp_path):
    out = tmp_path / "case2.json"
    r = CliRunner().invoke(cli, ["summarize", str(sample_path("case2")), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "293 steady launches" in r.stderr
    assert out.read_text() == summary_file("case2").read_text()
    r = CliRunner().invoke(cli, ["summarize", str(tmp_path / "nope.sqlite")])
    assert r.exit_code == 2 and "no such file" in r.stderr


@pytest.mark.parametrize("name, kind", [("s.md", "markdown"), ("s.txt", "text"),
                                        ("s.html", "html")])
def test_summarize_refuses_a_file_named_for_another_format(sample_path, tmp_path, name, kind):
    """It wrote its JSON into ``s.md`` (report refuses a name its format contradicts)."""
    out = tmp_path / name
    r = CliRunner().invoke(cli, ["summarize", str(sample_path("case2")), "-o", str(out)])
    assert r.exit_code == 2 and not out.exists()
    assert r.stderr.startswith(f"nsysscope: error: -o {out}: summarize writes JSON, not {kind}; "
                               "name a .json file")


def by_name(result: GateResult):
    return {c.name: c for c in result.checks}


# -- the verdicts the issue asks for -----------------------------------------------------------

def test_healthy_to_case1_fails_on_gpu_to_cpu_in_sample(sample_path):
    r = gate(sample_path("healthy"), sample_path("case1"))
    assert r.exit_code == 1, r.output
    verdict = r.stdout.splitlines()[0]
    assert verdict.startswith("nsysscope gate: REGRESSION")
    assert "gpu_to_cpu stalls 0.0% -> 100.0% at phase 'sample'" in verdict
    assert "cudaMemcpyAsync DtoH 1 B \u2192 cudaStreamSynchronize" in r.stdout
    assert "fix: Don't read GPU values on the hot path" in r.stdout


def test_a_tp2_engine_is_gated_by_its_ranks_rate(analysed):
    """The launch rate the gate compares is one process's (the per-launch values it tests
    are pooled over processes): a TP=2 engine at 254 steps/s per rank is slower than the
    single-GPU one at 306, though its two ranks launch 508 graphs a second together
    (before: +66 %, 'pass')."""
    single, tp2 = analysed("healthy").summary, analysed("tp2_healthy").summary
    ranks = [p.launches_per_s for p in tp2.processes]
    c = by_name(compare(single, tp2))["launch_rate"]
    # host pauses are taken out of both rates: within 1 % of the measured ones
    assert c.baseline == pytest.approx(single.launches_per_s, rel=0.01)
    assert c.candidate == pytest.approx(sum(ranks) / 2, rel=0.01)
    assert c.status == CHANGED and c.change_pct < -10
    assert "of one process (the mean)" in c.detail


def test_a_summary_without_per_process_rates_is_compared_by_totals(analysed):
    """A 1.0 summary (before ``processes`` were kept) of a TP=2 trace holds only the summed
    rate: set against the same trace's mean rank rate it read -50 % ('changed', or a
    REGRESSION with --fail-on-slowdown). Both sides now compare their totals, and say so."""
    tp2 = analysed("tp2_healthy").summary
    d = tp2.to_dict(with_distributions=True)
    for key in ("processes", "if_fixed", "latent"):
        d.pop(key)
    d["distributions"].pop("gpu_work_us")
    d["schema"] = "nsysscope.summary/1.0"
    old = nsysscope.Summary.from_dict(d)
    r = compare(old, tp2, GateThresholds(fail_on_slowdown_pct=10))
    c = by_name(r)["launch_rate"]
    assert r.passed and c.status == "pass" and abs(c.change_pct) < 0.5
    assert c.baseline == pytest.approx(tp2.launches_per_s, rel=0.01)  # ~508/s, both ranks
    assert "launch rates compared as totals over the processes: the baseline summary has " \
           "no per-process rates (an older nsysscope wrote it)" in r.notes
    # not "the baseline has 0 processes and the candidate 2"
    assert "the baseline's summary does not list its processes (written before nsysscope." \
           "summary/1.1): only the totals are compared; summarize it again" in r.notes


def test_a_site_is_counted_over_every_rank(analysed):
    """One rank reads back in the baseline, both ranks in the candidate: the same line, so the
    same site, 94 -> 188 launches (before, each rank's 94 was set against the baseline's 94
    and the regression named no site)."""
    r = compare(analysed("tp2_case1_rank0").summary, analysed("tp2_case1").summary)
    stalls = next(f for f in r.regressions if f.check == "stalls.gpu_to_cpu")
    assert [(s.baseline_count, s.candidate_count) for s in stalls.sites] == [(94, 188)]
    assert stalls.sites[0].api_chain == "cudaMemcpyAsync DtoH 1 B \u2192 cudaStreamSynchronize"


@pytest.mark.parametrize("base,cand,chain,steady", [
    ("poll_healthy", "poll_case1", "cudaMemcpyAsync DtoH 1 B \u2192 cudaEventQuery (polling)",
     94),
    ("poll_healthy", "poll_async_case1",
     "cudaMemcpyAsync DtoH 1 B \u2192 cudaEventQuery (polling)", 94),
    ("outcopy_healthy", "outcopy_case1",
     "cudaMemcpyAsync DtoH 1024 B \u2192 cudaEventSynchronize", 194),
])
def test_polling_and_side_stream_readbacks_fail_the_gate(analysed, base, cand, chain, steady):
    """A host that polls, and an output copy on a side stream: the readback added to every
    step fails the gate at its site, and removing it is an improvement, not a failure."""
    r = compare(analysed(base).summary, analysed(cand).summary)
    assert r.exit_code == 1 and r.regressions[0].check == "stalls.gpu_to_cpu"
    site = r.regressions[0].sites[0]
    assert (site.api_chain, site.baseline_count, site.candidate_count) == (chain, 0, steady)
    back = compare(analysed(cand).summary, analysed(base).summary)
    assert back.exit_code == 0 and back.improvements[0].check == "stalls.gpu_to_cpu"


def test_healthy_to_case1_numbers(analysed):
    r = compare(analysed("healthy").summary, analysed("case1").summary)
    c = by_name(r)
    assert not r.passed and r.exit_code == 1
    # every steady launch of case 1 stalls on the 1-byte readback in 'sample'
    assert (c["stalls.gpu_to_cpu"].baseline, c["stalls.gpu_to_cpu"].candidate) == (0.0, 100.0)
    assert c["stalls.gpu_to_cpu"].status == FAIL
    # the window collapses from ~a step (3.5 ms) to the readback's distance (< 0.5 ms) ...
    assert c["window_p50"].status == FAIL and c["window_p50"].candidate < 500
    assert 3000 < c["window_p50"].baseline < 4000
    # ... the GPU idles ~2 ms per step, and the rate drops by about a third (engine: -37 %)
    assert c["gpu_idle_p50"].status == FAIL and 1000 < c["gpu_idle_p50"].candidate < 3000
    # (reported as a change: a slower loop is the consequence, the gate fails on the causes)
    assert c["launch_rate"].status == CHANGED and -45 < c["launch_rate"].change_pct < -25
    assert c["gpu_idle_fraction"].status == FAIL and c["gpu_idle_fraction"].change > 20
    first = r.regressions[0]
    assert first.check == "stalls.gpu_to_cpu"
    assert (first.sites[0].klass, first.sites[0].phase) == ("gpu_to_cpu", "sample")
    assert (first.sites[0].baseline_count, first.sites[0].candidate_count) == (0, 293)
    assert first.fix == nsysscope.model.FIXES["gpu_to_cpu"]


def test_healthy_to_case2_fails_on_cpu_to_gpu_at_the_launch(sample_path, analysed):
    r = gate(sample_path("healthy"), sample_path("case2"))
    assert r.exit_code == 1, r.output
    assert "cpu_to_gpu stalls 0.0% -> 99.3% at phase 'launch'" in r.stdout.splitlines()[0]
    assert "cudaMemcpyAsync HtoD 5120 B \u2192 cudaStreamSynchronize" in r.stdout
    assert "pinned" in r.stdout  # the cpu_to_gpu fix
    res = compare(analysed("healthy").summary, analysed("case2").summary)
    c = by_name(res)
    assert c["stalls.cpu_to_gpu"].status == FAIL and c["stalls.cpu_to_gpu"].candidate > 95
    assert c["stalls.gpu_to_cpu"].status == "pass"
    # case 2 costs the launch slice only: the window halves, the idle gap grows ~140 us
    assert c["window_p50"].status == FAIL and -60 < c["window_p50"].change_pct < -30
    assert c["gpu_idle_p50"].status == FAIL and 100 < c["gpu_idle_p50"].change < 300
    assert c["gpu_idle_fraction"].status == FAIL
    # a total-time gate would miss it: the rate drops ~4 %, inside the 5 % tolerance
    assert c["launch_rate"].status == "pass" and -5 < c["launch_rate"].change_pct < -2
    assert res.regressions[0].sites[0].phase == "launch"


def test_fail_on_slowdown_below_the_reporting_threshold_fails_what_it_names(analysed):
    # case 2 drops the rate ~4 % (above): inside the 5 % at which a rate change is reported,
    # but beyond a --fail-on-slowdown of 3 %, which must fail it (it passed: the option was
    # only tested above 5 %)
    base, cand = analysed("healthy").summary, analysed("case2").summary
    c = by_name(compare(base, cand, GateThresholds(fail_on_slowdown_pct=3)))["launch_rate"]
    assert c.status == FAIL and c.threshold == "-3% fails" and -5 < c.change_pct < -3
    # a larger threshold than the drop still passes it, and the 5 % reporting rule holds
    for slow in (4.5, 10):
        c = by_name(compare(base, cand, GateThresholds(fail_on_slowdown_pct=slow)))
        assert c["launch_rate"].status == "pass"


def test_case1_to_healthy_passes_and_reports_the_improvement(sample_path):
    r = gate(sample_path("case1"), sample_path("healthy"))
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("nsysscope gate: PASS")
    assert "improved: gpu_to_cpu stalls 100.0% -> 0.0% at phase 'sample'" in r.stdout
    assert "Improvements" in r.stdout and "Regressions" not in r.stdout


def test_case1_to_healthy_improvements_in_the_result(analysed):
    r = compare(analysed("case1").summary, analysed("healthy").summary)
    assert r.passed and not r.regressions
    assert {f.check for f in r.improvements} == {
        "stalls.gpu_to_cpu", "gpu_idle_p50", "gpu_idle_fraction", "launch_rate"}
    # the longer overlap window is a symptom of the fix, not the user's goal (issue 55, item 3)
    assert {c.name: c.status for c in r.checks}["window_p50"] == "changed"
    assert all(c.status in ("pass", IMPROVED) for c in r.checks if c.name != "window_p50")


def test_short_and_long_healthy_captures_pass_both_ways(summary_file, analysed):
    r = gate(summary_file("healthy"), summary_file("healthy_long"))
    assert r.exit_code == 0, r.output
    assert "distributions are a sample of 4000 of 4899" in r.stdout
    # the sample keeps the capture's one host pause (a 115 ms idle gap, launch 2931 of the
    # steady ones): an even sample in launch order dropped it, and with it the note and the
    # pause's correction (the candidate read 1.5 % idle and 303.5/s)
    assert "candidate: host pauses" in r.stdout and "longest 114.79 ms" in r.stdout
    idle = read_summary(summary_file("healthy_long")).distributions.gpu_idle_us
    steady = analysed("healthy_long").launches.query("steady")
    assert max(idle) == pytest.approx(steady["gpu_idle_ns"].max() / 1e3, abs=0.01)
    back = compare(analysed("healthy_long").summary, analysed("healthy").summary)
    assert back.passed and not back.improvements
    c = by_name(back)
    # 300 vs 5000 steps of one engine: measured 0.9 % (window p50), 0.7 us (gap p50) and
    # 0.75 % (rate). The bounds are about twice those, and a fifth or less of the gate's own
    # thresholds (10 %, 20 us, 5 %): two healthy captures of one engine differ by noise only
    assert abs(c["window_p50"].change_pct) < 2 and abs(c["gpu_idle_p50"].change) < 2
    assert abs(c["launch_rate"].change_pct) < 1.5
    # the idle fraction, pause taken out: 0.83 % (300 steps) and 0.67 % (5000, sampled; the
    # whole 4899 launches give 0.82 %: the sample's one pause stands for 4899/4000 launches)
    assert abs(c["gpu_idle_fraction"].change) < 0.3


def test_a_new_latent_upload_is_named_where_the_gate_passes(analysed):
    """case1 -> both: the readback still stalls every step, and the candidate adds two
    pageable uploads at the launch that cost nothing yet (the readback comes first). The gate
    passed it as 'improved' without a word; the uploads are now in the verdict and notes."""
    r = compare(analysed("case1").summary, analysed("both").summary)
    assert r.passed and r.verdict.endswith("; 2 new patterns not yet costing overlap (notes)")
    latent = [n for n in r.notes if "not (yet) costing overlap" in n]
    assert latent == [
        f"candidate: a new cpu_to_gpu pattern, not (yet) costing overlap: cudaMemcpyAsync HtoD "
        f"{size} B (pageable) in phase 'launch' on 293/293 steady steps; it will stall once "
        "the stalls before it are fixed" for size in (5120, 1024)]
    # the other way, or against itself, nothing is new
    for base, cand in (("both", "case1"), ("both", "both")):
        assert "not yet costing" not in compare(analysed(base).summary,
                                                analysed(cand).summary).verdict


def test_both_case_fails_like_case1(analysed):
    r = compare(analysed("healthy").summary, analysed("both").summary)
    assert not r.passed and r.regressions[0].check == "stalls.gpu_to_cpu"


def test_a_readback_every_fourth_step_still_fails(analysed):
    # 25 % of steps stall: the medians barely move, the stall share and rate do
    r = compare(analysed("healthy").summary, analysed("case1_tolist_every4").summary)
    c = by_name(r)
    assert c["stalls.gpu_to_cpu"].status == FAIL and 20 < c["stalls.gpu_to_cpu"].candidate < 30
    assert c["gpu_idle_fraction"].status == FAIL and c["launch_rate"].status == CHANGED


def test_piecewise_stalls_are_gated_per_step(analysed):
    """With 24 graphs a step, case 1 stalls 97 of 2351 launches (4.1 %) but 97 of 98 steps:
    the stall check counts steps, as the verdict does."""
    r = compare(analysed("pieces_healthy").summary, analysed("pieces_case1").summary)
    c = by_name(r)["stalls.gpu_to_cpu"]
    assert c.status == FAIL and c.detail == "0/98 -> 97/98 steady steps"
    assert c.threshold == "+2 pp & +5 steps"


def test_a_piecewise_slowdown_fails_on_its_effect(analysed):
    """The launch rate fell 9.7 % (1938.2/s -> 1749.5/s) and the GPU idle fraction rose
    9.6 pp, yet both passed, even under --fail-on-slowdown 3, each beside a p < 1e-16: the
    rank test ran on per-launch periods, where the stall lengthens one launch in 24, and the
    p shown was the other direction's."""
    r = compare(analysed("pieces_healthy").summary, analysed("pieces_case1").summary,
                GateThresholds(fail_on_slowdown_pct=3))
    c = by_name(r)
    for name in ("launch_rate", "gpu_idle_fraction"):
        assert c[name].status == FAIL and c[name].p_value is None, name
        assert c[name].detail.endswith("the effect alone decides"), name
    assert round(c["launch_rate"].change_pct, 1) == -9.7
    assert round(c["gpu_idle_fraction"].change, 1) == 9.6
    # without the option the rate is reported as changed, not passed
    assert by_name(compare(analysed("pieces_healthy").summary,
                           analysed("pieces_case1").summary))["launch_rate"].status == CHANGED


def test_too_few_values_let_the_effect_decide(analysed):
    """With fewer per-launch values than min_samples, the window and gap checks were n/a
    (the window fell from 3.56 ms to 1.92 ms, the idle gap rose from 30.6 to 172.8 us, and
    the gate said 2 of 7 checks fail); the README says the effect alone decides, as it did
    for the idle fraction and the rate."""
    r = compare(analysed("healthy").summary, analysed("case2").summary,
                GateThresholds(min_samples=300))
    c = by_name(r)
    for name in ("window_p50", "gpu_idle_p50"):
        assert c[name].status == FAIL and c[name].p_value is None, name
        assert "too few values to test (need 300): the effect alone decides" in c[name].detail
    assert (c["window_p50"].baseline, c["window_p50"].candidate) == (3555.14, 1918.05)


def test_a_passed_change_shows_the_p_of_its_own_direction(analysed):
    """A change under its threshold showed the smaller p of the two directions, which beside
    a change read as if the test confirmed it: two healthy runs, launch rates 0.4/s apart,
    showed p 0.097; the test of the change's own direction gives 0.90."""
    for a, b in (("healthy", "run1"), ("run1", "healthy")):
        c = by_name(compare(analysed(a).summary, analysed(b).summary))["launch_rate"]
        assert c.status == "pass" and abs(c.change) < 1 and 0.85 < c.p_value < 0.95, (a, b)


def test_a_whole_graph_engine_against_a_piecewise_one_decides_on_the_effect(analysed):
    """+10.3 pp of GPU idle time passed with p = 1: the piecewise side's per-launch gaps are
    24 to a step."""
    c = by_name(compare(analysed("healthy").summary,
                        analysed("pieces_case1").summary))["gpu_idle_fraction"]
    assert c.status == FAIL and c.p_value is None and round(c.change, 2) == 10.27


def test_a_host_bound_piecewise_engine_fails_on_launch_bound_steps(analysed):
    """25 ms of host work a step (the engine measured 42.7 % GPU busy): the GPU idles after
    58 of 59 steps' last launches, 4.1 % of launches (under the +10 pp a launch count needs)."""
    r = compare(analysed("pieces_healthy").summary, analysed("pieces_hostbound").summary)
    c = by_name(r)["stalls.launch_bound"]
    assert c.status == FAIL and c.detail == "0/98 -> 58/59 steady steps"


def test_a_readback_on_every_third_piecewise_step_fails(analysed):
    """Case 1's summary with the readback on only every third step (33 of its 97 stalls kept,
    the rest counted healthy: the summary of such a capture, derived from the real one): 1.4 %
    of launches, under the 2 pp a launch count would need, but a third of the steps."""
    import dataclasses

    s = analysed("pieces_case1").summary
    third = dataclasses.replace(
        s, classes={**s.classes, "gpu_to_cpu": 33, "healthy": s.classes["healthy"] + 64},
        stalls={**s.stalls, "gpu_to_cpu": 33},
        bursts=dataclasses.replace(s.bursts, stalled=33))
    assert 100 * 33 / third.steady_launches < 2
    c = by_name(compare(analysed("pieces_healthy").summary, third))["stalls.gpu_to_cpu"]
    assert c.status == FAIL and c.detail == "0/98 -> 33/98 steady steps"


# -- summaries stand in for traces -------------------------------------------------------------

PAIRS = [("healthy", "case1", 1), ("healthy", "case2", 1), ("case1", "healthy", 0),
         ("healthy", "healthy_long", 0), ("healthy_long", "healthy", 0)]


@pytest.mark.parametrize("base,cand,code", PAIRS)
def test_summaries_give_the_same_verdict_as_traces(base, cand, code, analysed, summary_file):
    on_traces = compare(analysed(base).summary, analysed(cand).summary)
    on_files = compare(read_summary(summary_file(base)), read_summary(summary_file(cand)))
    assert on_traces.exit_code == on_files.exit_code == code

    def strip(r):
        return [(c.name, c.baseline, c.candidate, c.status, c.p_value, c.ci) for c in r.checks]

    assert strip(on_traces) == strip(on_files)
    assert on_traces.verdict == on_files.verdict
    r = gate(summary_file(base), summary_file(cand))
    assert r.exit_code == code, r.output


def test_a_summary_saved_from_python_is_the_summarize_file(analysed, summary_file, tmp_path):
    """``Summary.to_json()`` by default writes what ``nsysscope summarize`` writes: a
    notebook user's saved baseline was refused by the gate (no distributions)."""
    saved = tmp_path / "saved.json"
    saved.write_text(analysed("healthy").summary.to_json())
    assert json.loads(saved.read_text()) == json.loads(summary_file("healthy").read_text())
    assert gate(saved, summary_file("case1")).exit_code == 1


def test_summary_against_a_trace(summary_file, sample_path):
    assert gate(summary_file("healthy"), sample_path("case2")).exit_code == 1
    assert gate(sample_path("case1"), summary_file("healthy")).exit_code == 0


def test_summary_is_small_and_round_trips(summary_file, analysed):
    p = summary_file("healthy")
    assert p.stat().st_size < 20_000  # a few KB for a 300-step baseline
    s = read_summary(p)
    assert s.distributions.sampled_from == 293 and len(s.distributions.window_us) == 293
    assert s.trace.gpus == ("NVIDIA H200",)
    long = read_summary(summary_file("healthy_long"))
    assert len(long.distributions.klass) == 4000 and long.distributions.sampled_from == 4899
    assert summary_file("healthy_long").stat().st_size < 200_000


def test_python_api_takes_paths_analyses_and_summaries(analysed, sample_path, summary_file):
    r = nsysscope.compare(analysed("healthy"), sample_path("case1"))
    assert not r.passed
    r2 = nsysscope.compare(summary_file("healthy"), nsysscope.open(sample_path("case1")))
    assert [c.status for c in r2.checks] == [c.status for c in r.checks]


# -- output formats ----------------------------------------------------------------------------

def test_junit_has_one_testcase_per_metric_and_failures_for_regressions(sample_path, tmp_path):
    out = tmp_path / "gate.xml"
    r = gate(sample_path("healthy"), sample_path("case2"), "--format", "junit", "-o", out)
    assert r.exit_code == 1
    assert r.stdout.startswith("nsysscope gate: REGRESSION")  # the verdict still goes to stdout
    root = ET.parse(out).getroot()
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == int(suite.get("tests")) == 9
    failed = {c.get("name").split(":")[0] for c in cases if c.find("failure") is not None}
    assert failed == {"stalls.cpu_to_gpu", "window_p50", "gpu_idle_p50", "gpu_idle_fraction"}
    assert int(suite.get("failures")) == int(root.get("failures")) == 4
    msg = suite.find("testcase[@name='stalls.cpu_to_gpu: cpu_to_gpu stalls']/failure")
    assert "phase 'launch'" in msg.get("message") and "pinned" in msg.text


def test_junit_of_a_pass_has_no_failures(summary_file):
    r = gate(summary_file("healthy"), summary_file("healthy_long"), "--format", "junit")
    assert r.exit_code == 0
    root = ET.fromstring(r.stdout)
    assert root.get("failures") == "0" and not root.findall(".//failure")


def test_json_output_round_trips(sample_path):
    r = gate(sample_path("healthy"), sample_path("case1"), "--format", "json")
    assert r.exit_code == 1
    d = json.loads(r.stdout)
    assert d["schema"] == "nsysscope.gate/1.2" and d["passed"] is False and d["exit_code"] == 1
    back = GateResult.from_dict(d)
    assert json.loads(back.to_json()) == d and back == GateResult.from_dict(d)
    assert back.regressions[0].sites[0].phase == "sample"
    assert d["thresholds"] == GateThresholds().to_dict()


def test_markdown_fits_a_pr_comment(sample_path):
    r = gate(sample_path("healthy"), sample_path("case2"), "--format", "markdown")
    assert r.exit_code == 1
    md = r.stdout
    assert md.startswith("<!-- nsysscope-gate -->\n## nsysscope gate: \u274c REGRESSION: 4 of 9 "
                         "checks fail, 1 root cause\n")
    assert "| metric | baseline | candidate | change | threshold | p | result |" in md
    assert "| cpu_to_gpu stalls | 0.0% | 99.3% | +99.3 pp |" in md
    assert "### Regressions, by root cause" in md and md.count("**Fix:**") == 1
    # the four failing checks under their one root cause, no "same site as above"
    cause = md.split("### Regressions, by root cause")[1].split("### Checks")[0]
    assert cause.count("\n   - ") == 5 and "same site" not in md
    assert "1. `cpu_to_gpu` at phase 'launch': 0 \u2192 291 launches" in cause
    assert len(md) < 65_000  # GitHub's comment limit


def test_html_page_draws_both_analysed_traces(sample_path):
    """Given traces, the gate analyses each side once and the page draws from those analyses
    (no second read of the files, which would ignore --warmup)."""
    r = gate(sample_path("case1"), sample_path("healthy"), "--format", "html", "--warmup", "10")
    assert r.exit_code == 0
    assert r.stdout.startswith("<!DOCTYPE html>") or r.stdout.lstrip().startswith("<")
    assert "PASS" in r.stdout and r.stdout.count("data:image/png;base64,") >= 1
    assert "analysed again with default settings" not in r.stdout


# -- thresholds --------------------------------------------------------------------------------

def test_pyproject_thresholds_are_honoured(summary_file, tmp_path, monkeypatch):
    # healthy_long's GPU runs 0.75 % slower than healthy's: with slowdowns gated at 0.1 % and
    # reported beyond 0.1 %, its per-step GPU work fails (Mann-Whitney p 0.008 < 0.01)
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.nsysscope.gate]\nrate-pct = 0.01\n'
        'fail-on-slowdown-pct = 0.01\nwindow_us = 50\n')
    sub = tmp_path / "sub"
    sub.mkdir()
    for cwd in (tmp_path, sub):  # found from the cwd upwards
        monkeypatch.chdir(cwd)
        r = gate(summary_file("healthy"), summary_file("healthy_long"))
        assert r.exit_code == 1, r.output
        assert "GPU work per launch p50: 3.24 ms -> 3.24 ms" in r.stdout
        assert f"thresholds from {tmp_path / 'pyproject.toml'}" in r.stdout
        assert "-max(50 us, 10%)" in r.stdout
        # nsysscope.compare takes them as the command does (it ran on the defaults, passed)
        result = compare(summary_file("healthy"), summary_file("healthy_long"))
        assert not result.passed and result.exit_code == 1
        assert f"thresholds from {tmp_path / 'pyproject.toml'}" in result.notes
    # an option beats the pyproject value
    r = gate(summary_file("healthy"), summary_file("healthy_long"), "--fail-on-slowdown", "0")
    assert r.exit_code == 0, r.output


def test_compare_reads_a_broken_table_before_analysing_anything(tmp_path, monkeypatch, sample_path):
    """compare() analysed both traces (minutes on a server's) before it found the table
    broken; nsysscope gate fails at once."""
    import sys

    from nsysscope.errors import UnreadableInput
    gate_compare = sys.modules["nsysscope.gate.compare"]  # the module, not its function
    (tmp_path / "pyproject.toml").write_text("[tool.nsysscope.gate]\nalpha = 2\n")
    monkeypatch.chdir(tmp_path)

    def never(*a, **k):
        raise AssertionError("a side was analysed before the thresholds were read")
    monkeypatch.setattr(gate_compare, "summary_of", never)
    with pytest.raises(UnreadableInput, match="'alpha' must lie strictly between 0 and 1"):
        compare(sample_path("healthy"), sample_path("case1"))


def test_explicit_config_file_and_defaults(tmp_path):
    cfg = tmp_path / "gate.toml"
    cfg.write_text("[tool.nsysscope.gate]\nstall-pp = 5\nstall-min-launches = 10\n")
    t, src = load_thresholds(cfg)
    assert (t.stall_pp, t.stall_min_launches, src) == (5.0, 10, cfg)
    t, src = load_thresholds(start=tmp_path)  # no pyproject.toml anywhere up from tmp
    assert t == GateThresholds() and src is None


@pytest.mark.parametrize("toml", ["[tool.nsysscope.gates]\nstall-pp = 200\n",
                                  "[tool.nsysscope]\nstall-pp = 200\n", "stall-pp = 200\n", ""])
def test_a_config_named_that_sets_no_threshold_is_exit_2(tmp_path, summary_file, toml):
    """--config FILE whose thresholds are not in [tool.nsysscope.gate] (a misspelled table,
    bare keys, an empty file): the gate ran on its defaults without a word. A pyproject.toml
    found on the way up may have no table: that one is not named."""
    cfg = tmp_path / "gate.toml"
    cfg.write_text(toml)
    r = gate(summary_file("healthy"), summary_file("case1"), "--config", str(cfg))
    assert r.exit_code == 2
    assert r.stderr == (f"nsysscope: error: {cfg}: no threshold in a [tool.nsysscope.gate] "
                        "table (see the README's 'Regression gate')\n")


@pytest.mark.parametrize("toml,words", [
    ("[tool.nsysscope.gate]\nstall-percent = 3\n", "unknown gate threshold 'stall-percent'"),
    ("[tool.nsysscope.gate]\nalpha = 2\n", "'alpha' must lie strictly between 0 and 1"),
    ("[tool.nsysscope.gate]\nstall-min-launches = 2.5\n", "must be an integer"),
    ("[tool.nsysscope.gate\n", "not valid TOML"),
    # a level above the gate's table that is not a table: an internal error (exit 70) before
    ("[tool]\nnsysscope = 3\n", "[tool.nsysscope] must be a table, not 3"),
    ("tool = 3\n", "[tool] must be a table, not 3"),
    ("[tool.nsysscope]\ngate = 3\n", "[tool.nsysscope.gate] must be a table, not 3"),
    # NaN passes every range check: it switched its check off (healthy -> case1 passed)
    ("[tool.nsysscope.gate]\nstall-pp = nan\n", "'stall-pp' must be a finite number, not nan"),
    ("[tool.nsysscope.gate]\npause-quantile = 0.2\n",
     "'pause-quantile' must lie in [0.5, 1] (not 0.2)"),
])
def test_bad_pyproject_is_a_usage_error(toml, words, tmp_path, summary_file):
    (tmp_path / "pyproject.toml").write_text(toml)
    r = gate(summary_file("healthy"), summary_file("case1"))
    assert r.exit_code == 2
    assert words in r.stderr and "Traceback" not in r.output


# -- refusals ----------------------------------------------------------------------------------

def test_other_gpu_is_not_comparable(summary_file, tmp_path):
    d = json.loads(summary_file("case1").read_text())
    d["trace"]["gpus"] = ["NVIDIA A100-SXM4-80GB"]
    other = tmp_path / "a100.json"
    other.write_text(json.dumps(d))
    r = gate(summary_file("healthy"), other)
    assert r.exit_code == 4
    assert r.stderr.strip() == ("nsysscope: error: different GPUs: baseline ran on NVIDIA H200, "
                                "candidate on NVIDIA A100-SXM4-80GB")


def test_no_steady_launches_is_nothing_to_judge(summary_file, tmp_path):
    d = json.loads(summary_file("healthy").read_text())
    d["steady_launches"] = d["no_wait"] = 0
    for counts in (d["classes"], d["stalls"]):
        counts.update(dict.fromkeys(counts, 0))
    d["distributions"] = {"window_us": [], "gpu_idle_us": [], "klass": [], "sampled_from": 0}
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps(d))
    r = gate(empty, summary_file("healthy"))
    assert r.exit_code == 8
    # the file the user named, not the trace the summary was made from
    assert r.stderr.startswith(f"nsysscope: error: baseline {empty} has no steady-state "
                               "launches") and len(r.stderr.strip().splitlines()) == 1


def test_unusable_inputs_exit_2(summary_file, sample_path, tmp_path):
    old_report = tmp_path / "report.json"  # an older report --format json: no distributions
    d = json.loads(summary_file("healthy").read_text())
    d.pop("distributions")
    old_report.write_text(json.dumps(d))
    r = gate(old_report, summary_file("healthy"))
    assert r.exit_code == 2 and "nsysscope summarize" in r.stderr
    assert r.stderr.startswith(f"nsysscope: error: baseline {old_report}: the summary has no ")
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    r = gate(junk, summary_file("healthy"))
    assert r.exit_code == 2 and "not valid JSON" in r.stderr
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({**json.loads(summary_file("healthy").read_text()),
                                 "schema": "nsysscope.summary/9"}))
    assert gate(newer, summary_file("healthy")).exit_code == 2
    r = gate(tmp_path / "missing.sqlite", summary_file("healthy"))
    assert r.exit_code == 2 and "no such file" in r.stderr
    assert gate(summary_file("healthy")).exit_code == 2  # usage: one side missing
    assert "Traceback" not in r.output


@pytest.mark.parametrize("text,words", [
    # before: internal errors (exit 70), RecursionError and ValueError out of json.loads
    ("[" * 100_000 + "]" * 100_000, "(JSON nested too deeply to read)"),
    ('{"schema": ' + "9" * 5000 + "}", "(a number too long to read)"),
])
def test_json_python_cannot_read_is_one_line_exit_2(summary_file, tmp_path, text, words):
    bad = tmp_path / "candidate.json"
    bad.write_text(text)
    r = gate(summary_file("healthy"), bad)
    assert r.exit_code == 2
    assert r.stderr == f"nsysscope: error: {bad}: not an nsysscope summary {words}\n"


@pytest.mark.parametrize("edit,words", [
    # before: internal errors (exit 70) deep in the comparison, or read as is
    (lambda d: d["distributions"].update(gpu_idle_us="x"),
     "('gpu_idle_us' is 'x', not a list (each item a number or null))"),
    (lambda d: d["distributions"].update(window_us=["a", "b"]),
     "('window_us' is ['a', 'b'], not a list (each item a number or null))"),
    (lambda d: d.update(launches_per_s="fast"),
     "('launches_per_s' is 'fast', not a number or null)"),
    (lambda d: d.update(launches="abc"), "('launches' is 'abc', not an integer)"),
    (lambda d: d["processes"][0].update(steady_launches=True),
     "('steady_launches' is True, not an integer)"),
    (lambda d: d.update(stalls="abc"), "('stalls' is 'abc', not an object (each value an "
                                       "integer))"),
    (lambda d: d["classes"].update(healthy="many"),
     "('classes' is {'gpu_to_cpu': 0, 'cpu_to_gpu': 0, 'other_stall': 0, 'lau..., not an "
     "object (each value an integer))"),  # a long value is cut at 60 characters
    # the right types, but values no analysis writes: each was a crash (exit 70, a square
    # root of a negative variance) or read as is (the GPU name split into letters)
    (lambda d: d.update(steady_launches=-5), "('steady_launches' is -5, below 0)"),
    (lambda d: d["classes"].update(gpu_to_cpu=600),
     "('classes.gpu_to_cpu' is 600, not a count of the 293 steady launches)"),
    (lambda d: d["classes"].update(launch_bound=-50),
     "('classes.launch_bound' is -50, not a count of the 293 steady launches)"),
    (lambda d: d["trace"].update(gpus="NVIDIA H200"),
     "('gpus' is 'NVIDIA H200', not a list (each item text))"),
    (lambda d: d.update(gpu_busy=float("nan")), "('gpu_busy' is nan, not a fraction from 0 to 1)"),
    (lambda d: d.update(gpu_busy=5), "('gpu_busy' is 5, not a fraction from 0 to 1)"),
    (lambda d: d.update(launches_per_s=-5),
     "('launches_per_s' is -5, not a rate (a finite number >= 0))"),
    (lambda d: d["processes"][0].update(launches_per_s=float("inf")),
     "('launches_per_s' is inf, not a rate (a finite number >= 0))"),
    (lambda d: d["distributions"].update(window_us=d["distributions"]["window_us"][:5]),
     "('window_us' has 5 values for 293 launches (klass))"),
    (lambda d: d["distributions"]["gpu_idle_us"].__setitem__(3, float("inf")),
     "('gpu_idle_us' holds inf, not a time)"),
    # read as is: a class no analysis has, and launches of a class the counts say are none
    (lambda d: d["distributions"]["klass"].__setitem__(3, "bogus"),
     "('klass' holds 'bogus', not a launch class)"),
    (lambda d: d["distributions"].update(klass=["gpu_to_cpu"] * 293),
     "('classes.gpu_to_cpu' is 0, but 'distributions.klass' holds 293 of it)"),
    # read as 0 launches (a candidate that lost its stalls passed) or as a class of its own
    (lambda d: d["stalls"].pop("gpu_to_cpu"), "('stalls' has no count of gpu_to_cpu)"),
    (lambda d: d["processes"][0]["classes"].pop("healthy"),
     "('classes' has no count of healthy)"),
])
def test_a_summary_with_a_wrong_value_is_exit_2(summary_file, tmp_path, edit, words):
    d = json.loads(summary_file("healthy").read_text())
    edit(d)
    bad = tmp_path / "edited.json"
    bad.write_text(json.dumps(d))
    r = gate(bad, summary_file("case1"))
    assert r.exit_code == 2
    assert r.stderr.strip() == f"nsysscope: error: {bad}: not an nsysscope summary {words}"


def test_a_gate_result_is_not_a_gate_side(summary_file, tmp_path):
    out = tmp_path / "gate.json"
    assert gate(summary_file("healthy"), summary_file("case1"), "--json", out).exit_code == 1
    r = gate(out, summary_file("case1"))
    assert r.exit_code == 2 and r.stderr.strip() == (
        f"nsysscope: error: {out}: not an nsysscope summary, but another result of "
        "nsysscope's (schema nsysscope.gate/1.2)")


@pytest.mark.parametrize("args,line", [
    (("--rate-pct", "-3"), "--rate-pct: must not be negative (not -3)"),
    (("--stall-pp", "nan"), "--stall-pp: must be a finite number, not nan"),
    (("--gap-us", "inf"), "--gap-us: must be a finite number, not inf"),
    (("--fail-on-slowdown", "-1"), "--fail-on-slowdown: must not be negative (not -1)"),
    (("--alpha", "2"), "--alpha: must lie strictly between 0 and 1 (not 2)"),
    (("--pause-quantile", "-1"), "--pause-quantile: must lie in [0.5, 1] (not -1)"),
])
def test_a_bad_threshold_option_is_named(summary_file, args, line):
    r = gate(summary_file("healthy"), summary_file("case1"), *args)
    assert r.exit_code == 2 and r.stderr.strip() == f"nsysscope: error: {line}"


def test_report_json_is_a_gate_side(sample_path, summary_file, tmp_path):
    """report --format json and summarize write the same summary, so either file gates."""
    report_json = tmp_path / "report.json"
    assert CliRunner().invoke(cli, ["report", str(sample_path("case1")), "--format", "json",
                                    "-o", str(report_json)]).exit_code == 0
    summary = tmp_path / "summary.json"
    assert CliRunner().invoke(cli, ["summarize", str(sample_path("case1")), "-o",
                                    str(summary)]).exit_code == 0
    assert report_json.read_bytes() == summary.read_bytes()
    r = gate(summary_file("healthy"), report_json)
    assert r.exit_code == 1 and "gpu_to_cpu stalls" in r.stdout


def test_exit_codes_through_python_m(summary_file):
    args = [sys.executable, "-m", "nsysscope", "gate"]
    p = subprocess.run([*args, str(summary_file("healthy")), str(summary_file("case1")),
                        "--format", "markdown"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "REGRESSION" in p.stdout and not p.stderr


# -- the noise model ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def long_windows(analysed):
    """healthy_long's steady launches in FA_WINDOWS consecutive windows (~490 launches each)."""
    a = analysed("healthy_long")
    edges = np.linspace(0, a.summary.steady_launches, FA_WINDOWS + 1).astype(int)
    return [part_summary(a, lo, hi) for lo, hi in zip(edges[:-1], edges[1:], strict=True)]


def test_false_alarm_rate_on_windows_of_one_healthy_capture(long_windows, capsys):
    assert all(489 <= w.steady_launches <= 490 for w in long_windows)
    pairs = list(itertools.permutations(range(FA_WINDOWS), 2))
    results = {(i, j): compare(long_windows[i], long_windows[j]) for i, j in pairs}
    alarms = [(i, j, r.verdict) for (i, j), r in results.items() if not r.passed]
    rate = len(alarms) / len(pairs)
    with capsys.disabled():
        print(f"\ngate false-alarm rate, {FA_WINDOWS} windows of healthy_long, all "
              f"{len(pairs)} ordered pairs: {len(alarms)}/{len(pairs)} = {rate:.1%}")
    assert rate <= FA_MAX, alarms
    # and every check keeps a margin: the biggest adverse change is well inside its threshold
    t = GateThresholds()
    worst_window = min(c.change_pct for r in results.values() for c in r.checks
                       if c.name == "window_p50")
    worst_rate = min(c.change_pct for r in results.values() for c in r.checks
                     if c.name == "launch_rate")
    assert worst_window > -t.window_pct / 2 and worst_rate > -t.rate_pct / 2


def test_windows_detect_the_sample_regressions(long_windows, analysed):
    """The same windows as baselines catch case 1 and case 2 every time."""
    for cand in ("case1", "case2"):
        s = analysed(cand).summary
        assert all(not compare(w, s).passed for w in long_windows)


def test_a_host_pause_does_not_fail_the_gate(long_windows):
    """Window 5 holds one 115 ms host pause: a plain rate/idle comparison would call it a
    7 % slowdown; the pause-robust estimate does not, and says so in a note."""
    base, paused = long_windows[0], long_windows[5]
    assert paused.launches_per_s < 0.95 * base.launches_per_s  # what the raw numbers say
    r = compare(base, paused)
    assert r.passed
    assert any("host pauses" in n and "longest 114.79 ms" in n for n in r.notes)
    # without the pause correction the idle fraction grows by more than its 2 pp, but the
    # per-launch idle gaps are the same distribution: the rank test keeps it from failing
    naive = compare(base, paused, GateThresholds(pause_quantile=1.0))
    idle = {c.name: c for c in naive.checks}["gpu_idle_fraction"]
    assert naive.passed and idle.change > 2 and idle.p_value > 0.01


# -- the statistics ----------------------------------------------------------------------------

def test_mann_whitney_matches_scipy():
    from scipy import stats  # the test extra's: an implementation independent of ours

    rng = np.random.default_rng(7)
    x = rng.integers(0, 20, 300).astype(float)  # many ties
    y = rng.integers(0, 20, 200).astype(float) - 1
    for ours, alt in ((mann_whitney_less, "less"), (mann_whitney_greater, "greater")):
        want = stats.mannwhitneyu(y, x, alternative=alt, method="asymptotic").pvalue
        assert ours(x, y) == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("name", ["healthy_long", "case1", "poll_case1"])
def test_bootstrap_medians_are_numpys_medians_of_the_same_resamples(analysed, name):
    """The bootstrap's medians, found from each resample's sorted ranks, are exactly
    ``np.median`` of the resampled values (the gate's intervals did not move): on the real
    samples' windows and GPU gaps (values to 0.01 us, with ties), odd and even sizes."""
    from nsysscope.gate.stats import _boot_medians
    d = analysed(name).summary.distributions
    for values in (d.window_us, d.gpu_idle_us):
        v = np.array([x for x in values if x is not None], dtype=float)
        for part in (v, v[:-1]):
            want = np.median(part[np.random.default_rng(5).integers(0, len(part), size=(300, len(
                part)))], axis=1)
            np.testing.assert_array_equal(_boot_medians(part.tobytes(), 300, 5), want)


def test_statistics_sanity():
    x = np.arange(100, dtype=float)
    assert mann_whitney_less(x, x) == pytest.approx(0.5, abs=0.02)
    assert mann_whitney_less(x, x - 50) < 1e-10 and mann_whitney_greater(x, x - 50) > 0.99
    assert mann_whitney_less(np.ones(30), np.ones(30)) == 1.0  # all tied: no evidence
    assert two_proportion_greater(0, 300, 0, 300) == 1.0
    assert two_proportion_greater(2, 300, 30, 300) < 1e-5


@pytest.mark.parametrize("args,line", [
    # the option is the format: no --format was given (it said "but --format junit was
    # given; drop --format")
    (("--junit", "r.md"), "--junit r.md names a Markdown file, but --junit writes a JUnit XML "
                          "file; name a .xml file"),
    (("--markdown", "r.json"), "--markdown r.json names a JSON file, but --markdown writes a "
                               "Markdown file; name a .md file"),
    (("--format", "json", "-o", "r.md"), "-o r.md names a Markdown file, but --format json was "
                                         "given; drop --format (the extension decides) or name "
                                         "a .json file"),
])
def test_an_output_named_for_another_format_is_a_usage_error(summary_file, args, line):
    r = gate(summary_file("healthy"), summary_file("case1"), *args)
    assert r.exit_code == 2 and r.stderr.strip().startswith(f"nsysscope: error: {line}")


def test_analysis_options_with_summary_sides_are_said(summary_file, sample_path):
    """--warmup and --launch-bound-us analyse traces: with two summary files they changed
    nothing and said nothing (--warmup 400 passed, where a trace side exits 8); with one, the
    summary keeps its own settings, now said in a note."""
    r = gate(summary_file("healthy"), summary_file("case2"), "--warmup", "400")
    assert r.exit_code == 2 and r.stderr.strip().startswith(
        "nsysscope: error: --warmup sets how a trace is analysed, and both sides are summary "
        "files, written with their own settings")
    r = gate(summary_file("healthy"), sample_path("case2"), "--launch-bound-us", "5")
    note = (f"--launch-bound-us analysed the trace side only: the summary "
            f"{summary_file('healthy')} keeps the settings it was written with")
    assert note in " ".join(r.stdout.split())
    assert "analysed the trace side only" not in gate(summary_file("healthy"),
                                                      sample_path("case2")).stdout


def test_the_readme_example_is_what_the_gate_prints(summary_file, sample_path, tmp_path,
                                                     monkeypatch):
    """The README's gate example, as far as it goes ("  ..."), is this version's output: it
    had drifted (8 checks where there are 9, a threshold column from before)."""
    from pathlib import Path
    readme = (Path(__file__).resolve().parents[2] / "docs" / "gate.md").read_text(
        encoding="utf-8")
    command = "$ nsysscope gate baseline.json sample_traces/h200_case2_300.sqlite.xz\n"
    start = readme.index(command) + len(command)
    shown = readme[start:readme.index("  ...\n```", start)]
    (tmp_path / "baseline.json").write_text(summary_file("healthy").read_text())
    (tmp_path / "sample_traces").mkdir()
    (tmp_path / "sample_traces" / "h200_case2_300.sqlite.xz").symlink_to(sample_path("case2"))
    monkeypatch.chdir(tmp_path)
    r = CliRunner(env={"COLUMNS": "80"}).invoke(
        cli, ["gate", "baseline.json", "sample_traces/h200_case2_300.sqlite.xz"])
    assert r.exit_code == 1 and r.stdout.startswith(shown)


def test_a_rank_that_waits_for_its_stalling_peer_is_not_an_improvement(analysed):
    """TP=2, only rank 0 reads back: rank 1's host blocks later because its GPU spins in the
    all-reduce waiting for rank 0, so its overlap window grew (4.26 -> 5.40 ms). The gate
    listed that under Improvements and never named the wait."""
    r = compare(analysed("tp2_healthy").summary, analysed("tp2_case1_rank0").summary)
    assert not r.passed
    window = {c.name: c for c in r.checks}["process1/window_p50"]
    assert window.status == "changed" and window.change > 1000
    assert window.detail.startswith("process1, rank 1 (pid 1151), now waits 1.32 ms per step")
    assert not [f for f in r.improvements if "window" in f.check]
    assert ("process1, rank 1 (pid 1151), now waits 1.32 ms per step in all-reduce for rank 0 "
            "(pid 1150): its longer overlap window is that wait, not an improvement") in r.notes


def test_each_process_of_a_piecewise_server_is_gated_in_its_own_steps(sample_path, tmp_path):
    """Two piecewise engines in one export (tests/merged.py: the real captures, one clock
    shifted): engine 1 goes from healthy to case 1 while engine 2 stays case 2. Its stall
    check counts its own 98 steps; it counted the whole trace's 196."""
    from merged import merge_exports

    from nsysscope.analysis import analyze
    from nsysscope.trace import load, resolve
    side = {}
    for name, first in (("base", "pieces_healthy"), ("cand", "pieces_case1")):
        dst = merge_exports(resolve(sample_path(first)), resolve(sample_path("pieces_case2")),
                            tmp_path / f"{name}.sqlite")
        side[name] = analyze(load(dst)).summary
    assert [p.bursts.steady for p in side["cand"].processes] == [98, 98]
    checks = {c.name: c for c in compare(side["base"], side["cand"]).checks}
    mine = next(c for n, c in checks.items()
                if n.endswith("stalls.gpu_to_cpu") and n != "stalls.gpu_to_cpu")
    assert mine.status == FAIL and mine.detail == "0/98 -> 97/98 steady steps"


def test_python_api_arguments_of_the_wrong_type_say_what_to_pass(sample_path):
    """A tuple of seconds for a time range, a TOML file's name for thresholds: they failed
    deep inside (AttributeError: 'tuple' object has no attribute 'whole', 'str' object has
    no attribute 'stall_pp')."""
    import nsysscope as ns

    with pytest.raises(TypeError, match=r"^time_range: a TimeRange, not tuple \(TimeRange\."
                                        r"parse\('5.5', '6.0'\) for seconds"):
        ns.open(sample_path("case1"), time_range=(5.5, 6.0))
    with pytest.raises(TypeError, match=r"^time_range: a TimeRange, not tuple"):
        ns.load(sample_path("case1"), time_range=(5.5, 6.0))
    with pytest.raises(TypeError, match=r"^thresholds: a GateThresholds, a dict of them or "
                                        r"None, not str \(from a TOML file: nsysscope\.gate\."
                                        r"load_thresholds\(path\)\[0\]\)$"):
        ns.compare(sample_path("case1"), sample_path("case1"), thresholds="pyproject.toml")


def test_the_markdown_headline_counts_new_patterns_as_the_verdict_does(analysed):
    """Case 1 against 'both' (the readback, plus a pageable upload that does not cost overlap
    yet): every output's verdict ended "2 new patterns not yet costing overlap (notes)"; the
    pull-request comment's headline said only "PASS: no overlap regression"."""
    from nsysscope.render.gate_markdown import headline

    r = compare(analysed("case1").summary, analysed("both").summary)
    assert r.passed and r.new_patterns == 2
    assert r.verdict.endswith("; 2 new patterns not yet costing overlap (notes)")
    assert headline(r).endswith("; 2 new patterns not yet costing overlap")
    assert GateResult.from_dict(json.loads(r.to_json())).new_patterns == 2


def test_a_symptom_that_moved_the_good_way_is_changed_not_improved(sample_path):
    """Issue 55, item 3: the 16-layer engine against the 6-layer one (two healthy captures):
    the GPU's work per launch is 60 % shorter and was listed under Improvements. Only the
    user's goals (stalls, GPU idle, the launch rate) improve; the rest is 'changed'."""
    twin = sample_path("twin_healthy")
    r = compare(twin, sample_path("healthy"))
    c = by_name(r)
    assert c["gpu_work_p50"].status == "changed" and c["gpu_work_p50"].change_pct < -50
    assert c["launch_rate"].status == "improved"
    assert {f.check for f in r.improvements} == {"launch_rate"}
    assert "gpu_work" not in r.verdict


def test_a_rate_drop_is_never_drawn_green(analysed):
    """The HTML page drew a 'changed' check (case 1's -37 % launch rate) in the pass colour."""
    from nsysscope.render.html.gate import gate_page

    r = compare(analysed("healthy").summary, analysed("case1").summary)
    rate = by_name(r)["launch_rate"]
    assert rate.status == "changed" and rate.change_pct < -30
    page = gate_page(r)
    row = page[page.index("launch rate (launches/s)"):]
    row = row[:row.index("</tr>")]
    assert '<td class="changed">changed</td>' in row and 'class="pass"' not in row
    assert ".changed{color:#555" in page
