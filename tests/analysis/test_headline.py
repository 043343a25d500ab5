"""The headline (analysis/headline.py): the report's first line names the cause that costs the
GPU most idle time, with its share of the GPU's time and its projected gain, and says plainly
when that gain is not worth chasing first (issue 55, item 1)."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsysscope import AnalysisConfig, analyze, load
from nsysscope.analysis.headline import NOT_WORTH_BELOW, LateCost, headline
from nsysscope.analysis.verdict import verdict_line
from nsysscope.cli import cli
from nsysscope.render.verdict import verdict_text

ROOT = Path(__file__).resolve().parents[2]
TWIN_CASE2 = ROOT / "sample_traces" / "kineto" / "h200_nsys_twin_case2_60.sqlite.xz"


def first_lines(path: Path, n: int = 5) -> list[str]:
    with contextlib.chdir(ROOT):
        r = CliRunner().invoke(cli, ["report", str(path.relative_to(ROOT))])
    assert r.exit_code == 0, r.output
    return r.stdout.splitlines()[:n]


def test_case1_names_the_readback_its_cost_and_gain_first(analysed, sample_path):
    h = analysed("case1").summary.headline
    assert (h.klass, h.where, h.launches, h.worth_chasing) == \
        ("gpu_to_cpu", "phase 'sample'", 293, True)
    # 577.6 ms of GPU idle over the steady span: 1 - GPU busy (62.3 %) less the healthy gaps
    assert h.idle_frac == pytest.approx(0.378, abs=0.002)
    assert h.speedup == pytest.approx(1.577, abs=0.002)
    assert first_lines(sample_path("case1"))[3:5] == [
        "OVERLAP BROKEN: a GPU→CPU readback at phase 'sample' costs 37.8% of the GPU's",
        "  time; fixing it -> up to ~1.58x launches/s (191.9 -> ~302.5)"]


def test_a_cheap_case2_says_it_is_not_worth_chasing_first():
    """The 60-step case 2: overlap broken on every step, yet the fix buys 1.5 % (the healthy
    capture of its session measured 123.2/s, the projection 123.0/s)."""
    s = analyze(load(TWIN_CASE2)).summary
    h = s.headline
    assert not s.overlap_ok and h.klass == "cpu_to_gpu" and not h.worth_chasing
    assert h.speedup == pytest.approx(1.015, abs=0.003) and h.idle_frac < 0.025
    line = " ".join(" ".join(first_lines(TWIN_CASE2, 7)[3:]).split())
    assert line.startswith("OVERLAP BROKEN: a CPU→GPU copy from pageable memory at phase "
                           "'launch' costs 2.1% of the GPU's time; fixing it -> ~1.01x "
                           "launches/s (121.2 -> ~123.0): not worth chasing first")


def test_case2_at_300_steps_is_worth_chasing(analysed):
    h = analysed("case2").summary.headline
    assert h.klass == "cpu_to_gpu" and h.worth_chasing and h.speedup == pytest.approx(1.031)
    assert "not worth" not in h.text


def test_a_launch_bound_host_is_named_with_an_upper_bound_near_the_healthy_rate(analysed):
    """Launch-bound gaps taken together: the projection with a host that keeps ahead is an
    upper bound, and lands near what the healthy engine measures: the 300-step CPU-bound
    capture 309.1/s against the healthy capture's 304.8/s (+1.4 %), the piecewise host-bound
    one 1942.5/s against 1938.2/s (+0.2 %)."""
    for broken, healthy in (("case2_cpubound", "healthy"), ("pieces_hostbound", "pieces_healthy")):
        s = analysed(broken).summary
        h = s.headline
        assert h.klass == "launch_bound" and h.where is None and h.worth_chasing
        assert h.text.startswith("LAUNCH-BOUND: a host slower than the GPU costs ")
        measured = analysed(healthy).summary.launches_per_s
        assert abs(h.launches_per_s_if_fixed - measured) / measured < 0.03
    h = analysed("case2_cpubound").summary.headline
    assert h.idle_frac == pytest.approx(0.48, abs=0.005) and h.launches == 293
    assert "(293/293 steady launches came after the GPU went idle)" in h.text
    # piecewise graphs: counted in steps, as the verdict counts them
    assert "(58/59 steady steps came after" in analysed("pieces_hostbound").summary.headline.text


HEALTHY = ["healthy", "healthy_long", "healthy_py", "outcopy_healthy", "poll_healthy",
           "tp2_healthy", *(f"run{i}" for i in range(1, 6)), "node_twin_healthy",
           "pieces_healthy", "twin_healthy"]


@pytest.mark.parametrize("name", HEALTHY)
def test_no_healthy_capture_has_anything_worth_chasing(analysed, name):
    """The threshold's premise, on every bundled healthy capture (five device sessions): what
    the GPU idles anyway stays below NOT_WORTH_BELOW, and the headline is the verdict."""
    s = analysed(name).summary
    h = s.headline
    assert not h.worth_chasing and h.text == s.verdict
    assert (h.speedup or 1.0) - 1 < NOT_WORTH_BELOW / 2
    assert (h.idle_frac or 0.0) < NOT_WORTH_BELOW


def test_the_tensor_parallel_trace_counts_both_gpus(analysed):
    s = analysed("tp2_case1").summary
    h = s.headline
    assert h.text.startswith("OVERLAP BROKEN in 2 of 2 processes: a GPU→CPU readback at phase "
                             "'sample' costs 23.6% of the 2 processes' GPU time; fixing it -> "
                             "up to ~1.33x launches/s")
    assert h.lost_us == pytest.approx(sum(x.lost_us for x in s.sites), rel=1e-3)


def test_launch_bound_gaps_that_cost_more_than_the_stalls_are_named_first(analysed):
    """The issue's trace: launch-bound gaps 81.7 ms of GPU idle, its stalls 43.2 ms; the
    headline named only the stalls. Cost decides, whatever the class (case 2's summary with
    those numbers)."""
    s = analysed("case2").summary
    site = dataclasses.replace(s.sites[0], lost_us=43_200.0)
    s = dataclasses.replace(s, sites=[site, *s.sites[1:]])
    span_us = 1e6
    late = headline(s, LateCost(66, 81_700.0, 1.09, 318.4), span_us)
    assert late.klass == "launch_bound" and late.lost_us == 81_700.0
    assert late.text.startswith("LAUNCH-BOUND: a host slower than the GPU costs 8.2% of the "
                                "GPU's time (66/293 steady launches came after the GPU went "
                                "idle); a host that keeps ahead -> up to ~1.09x")
    stall = headline(s, LateCost(66, 40_000.0, 1.09, 318.4), span_us)
    assert stall.klass == "cpu_to_gpu" and stall.lost_us == 43_200.0


def test_the_verdict_names_the_class_of_the_costliest_site_not_the_most_launches(analysed):
    """A trace whose top site (by gain) is gpu_to_cpu said "other_stall" because more launches
    had that class."""
    s = analysed("case1").summary
    s = dataclasses.replace(s, stalls={**s.stalls, "gpu_to_cpu": 100, "other_stall": 193})
    ok, v = verdict_line(s, AnalysisConfig())
    line = verdict_text(v, s)
    assert not ok and (v.case, v.klass, v.site) == ("stalls", "gpu_to_cpu", 0)
    assert "(gpu_to_cpu at phase 'sample')" in line and "other_stall" not in line


def test_json_markdown_and_html_lead_with_the_headline(sample_path, tmp_path):
    trace = str(sample_path("case1"))
    h = "OVERLAP BROKEN: a GPU→CPU readback at phase 'sample' costs 37.8% of the GPU's time"
    for fmt, check in (("json", lambda t: f'"text": "{h}' in t),
                       ("markdown", lambda t: t.splitlines()[0].startswith(
                           f"## nsysscope: \u274c {h}")),
                       ("html", lambda t: h.replace("'", "&#x27;") in t)):
        r = CliRunner().invoke(cli, ["report", trace, "--format", fmt])
        assert r.exit_code == 0 and check(r.stdout), fmt


def test_the_gate_comment_leads_with_the_candidates_headline(sample_path, tmp_path):
    base = tmp_path / "healthy.json"
    runner = CliRunner()
    assert runner.invoke(cli, ["summarize", str(sample_path("healthy")), "-o",
                               str(base)]).exit_code == 0
    r = runner.invoke(cli, ["gate", str(base), str(sample_path("case2")), "--format", "markdown"])
    assert r.exit_code == 1
    assert r.stdout.splitlines()[3] == (
        "**Candidate:** OVERLAP BROKEN: a CPU→GPU copy from pageable memory at phase 'launch' "
        "costs 4.9% of the GPU's time; fixing it -> ~1.03x launches/s (292.1 -> ~301.3)")


def test_a_negative_overlap_window_is_explained(analysed):
    """Issue 55, item 9: a window p10 of -91 us was printed without a word. Case 1's own
    launches, three of them waited on by another thread 91, 40 and 12 us before their launch
    call returned (as the reporter's trace had them): a note says what that means."""
    from nsysscope.analysis.verdict import negative_windows_note
    from nsysscope.render.notes import note_text

    launches = analysed("case1").launches.copy()
    assert negative_windows_note(launches) is None  # none in the real capture
    at = launches.index[launches["steady"]][[10, 20, 30]]
    launches.loc[at, "window_ns"] = [-91_000, -40_000, -12_000]
    launches.loc[at[:2], "block_tid"] = launches.loc[at[:2], "tid"] + 1
    assert note_text(negative_windows_note(launches)) == (
        "3 steady launches have a negative overlap window (down to -91.0 us): the host wait "
        "on the launch began before its launch call returned, on a thread that waits on the "
        "stream while another issues the launch; 2 of them on another thread than the "
        "launching one; such a window is no overlap at all, and the percentiles above count "
        "it as it is")
