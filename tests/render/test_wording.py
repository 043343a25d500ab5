"""How the reports read (issue 13): every line fits the terminal, one unit style, the words
defined, launch-bound gaps apart from stalls, Markdown code spans as HTML code."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsysscope import AnalysisConfig, analyze, load
from nsysscope.cli import cli
from nsysscope.gate import compare
from nsysscope.model import Summary, registry
from nsysscope.render.html.page import inline
from nsysscope.render.report_parts import headline
from nsysscope.util.text import terminal_width, wrap
from nsysscope.util.units import plural

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["healthy", "case1", "case2", "case1_py", "both"])
def test_text_report_fits_80_columns(analysed, name):
    out = registry.render("report", "text", analysed(name))
    assert max(len(line) for line in out.splitlines()) <= 80, out
    narrow = registry.render("report", "text", analysed(name), width=60)
    too_long = [ln for ln in narrow.splitlines() if len(ln) > 60 and "/" not in ln]
    assert not too_long  # only a path longer than the width may overflow


def test_gate_text_fits_80_columns(analysed):
    r = compare(analysed("healthy"), analysed("case2"))
    out = registry.render("gate", "text", r)
    assert max(len(line) for line in out.splitlines()) <= 80, out
    assert "Each check's threshold" in out  # the table split in two to fit
    wide = registry.render("gate", "text", r, width=200)
    assert "threshold" in next(x for x in wide.splitlines() if x.lstrip().startswith("metric"))
    assert "leave host pauses out" in out  # where gate and report numbers differ, and why


def test_gate_text_of_several_processes_fits_80_columns(analysed):
    """Each process's checks follow a row naming it: the 'process0: ' prefix on every metric
    made the table 88 columns wide even split in two."""
    r = compare(analysed("tp2_healthy"), analysed("tp2_case1_rank0"))
    lines = registry.render("gate", "text", r).splitlines()
    paths = {r.baseline.trace, r.candidate.trace}  # a path longer than the width may overflow
    too_long = [ln for ln in lines if len(ln) > 80 and not any(p in ln for p in paths)]
    assert not too_long, "\n".join(lines)
    for heading in ("  all processes:", "  process0:", "  process1:"):
        assert lines.count(heading) == 2  # in the values table and in the thresholds table
    first = lines.index("  process0:")
    assert lines[first + 1].split()[:3] == ["gpu_to_cpu", "stalls", "0.0%"]


def test_cli_wraps_to_80_when_not_a_tty(sample_path, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    r = CliRunner().invoke(cli, ["report", str(sample_path("case2"))])
    assert r.exit_code == 0
    assert max(len(ln) for ln in r.stdout.splitlines()) <= 80
    assert terminal_width() == 80
    monkeypatch.setenv("COLUMNS", "120")
    assert terminal_width() == 120


def test_one_unit_style(analysed):
    """The verdict says ``1.92 ms`` (not ``1918.05 us``) in its own sentence, made in render/
    from its values, so JSON and text agree with no rewriting; an older summary's verdict
    (``244.06 us``, nsysscope.summary/1.1) is shown as it was written."""
    case2 = analysed("case2")
    assert "median overlap window 1.92 ms" in case2.summary.verdict
    out = " ".join(registry.render("report", "text", case2).split())  # unwrapped
    assert "1918.05 us" not in out and "median overlap window 1.92 ms" in out
    assert case2.summary.verdict_facts.window_us == pytest.approx(1918.05, abs=0.01)
    old = Summary.from_dict(json.loads((ROOT / "sample_traces" / "kineto" /
                                        "h200_nsys_twin2_case1_60.summary.json").read_text()))
    assert old.verdict_facts is None and old.verdict.endswith("window 244.06 us")
    assert headline(old) == old.verdict  # its first line, as written (no headline in 1.1)


def test_words(analysed):
    out = registry.render("report", "text", analysed("case2"))
    assert not re.search(r"\b1 launches", out) and "  - 1 launch, 2.46 ms GPU idle" in out
    assert "host never waited           2  (no host call waited on their GPU work)" in out
    assert plural(1, "launch", "launches") == "1 launch"
    healthy = registry.render("report", "text", analysed("healthy"))
    assert "Top stall sites" not in healthy  # its two launch-bound gaps are not stalls
    assert "Launch-bound gaps: 2 launches with no stall" in healthy
    md = registry.render("report", "markdown", analysed("healthy"))
    assert "### Stall sites" not in md and "### Launch-bound gaps" in md


def test_a_fifo_in_the_source_root_is_not_read(sample_path, tmp_path):
    """A named pipe where a source file was expected made the report wait forever for a
    writer; it is skipped like a missing file."""
    import os
    import threading

    fifo = tmp_path / "engine_under_test" / "sampler.py"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    got: list = []
    run = threading.Thread(target=lambda: got.append(analyze(
        load(sample_path("case1_py")), AnalysisConfig(source_root=str(tmp_path)))), daemon=True)
    run.start()
    run.join(120)
    if run.is_alive():
        with open(fifo, "w"):  # let the stuck read end
            pass
        pytest.fail("the analysis waited on the FIFO")
    assert got[0].summary.sites[0].source.file == "engine_under_test/sampler.py"


def test_missing_source_text_says_where_to_look(sample_path, tmp_path):
    """Each format points at the note, which says why (the advice that can work: issue 55,
    item 6, tests/analysis/test_source_lines.py)."""
    a = analyze(load(sample_path("case1_py")), AnalysisConfig(source_root=str(tmp_path)))
    assert a.summary.sites[0].source.text is None
    for fmt in ("text", "markdown", "html"):
        out = " ".join(registry.render("report", fmt, a.summary).split())
        assert "source text not found: see the notes" in out
        assert "is not under the --source-root folder" in out


def test_html_notes_show_code_spans(analysed):
    page = registry.render("report", "html", analysed("case1").summary)
    assert "<code>nsys export --type sqlite --include-json true</code>" in page
    assert "`nsys export" not in page
    assert inline("a `<b>` c") == "a <code>&lt;b&gt;</code> c"


def test_wrap_keeps_numbers_with_units_and_flags_whole():
    lines = wrap("x" * 60 + " mean block 2.75 ms and --python-sampling=true", 70)
    assert "2.75 ms" in " ".join(lines) and all("--python-sampling=true" in ln or
                                                "--python" not in ln for ln in lines)
    assert wrap("", 80, "  - ") == ["  -"]


def test_summary_renders_identically_with_a_renamed_path(analysed):
    s = analysed("case1").summary
    t = dataclasses.replace(s, trace=dataclasses.replace(s.trace, path="x.sqlite"))
    assert registry.render("report", "text", t).startswith("nsysscope report: x.sqlite  (")


def test_the_host_pause_note_says_the_quantile_in_use(analysed):
    """The note said 'above their 99th percentile' whatever --pause-quantile was, and the
    Markdown one called the idle fraction 'GPU busy'."""
    from nsysscope.gate import GateThresholds
    for q, words in ((0.95, "GPU idle gaps above the p95 of their own"),
                     (0.99, "GPU idle gaps above the p99 of their own"),
                     (1.0, "The gate keeps host pauses in its GPU idle fraction")):
        r = compare(analysed("healthy"), analysed("case2"), GateThresholds(pause_quantile=q))
        for fmt in ("text", "markdown"):
            out = " ".join(registry.render("gate", fmt, r).split())
            assert words in out and "GPU busy and launch rate" not in out, (q, fmt)


def test_a_several_process_rate_says_it_is_added(analysed):
    """TP=2: the ranks of one group step together, once: launches/s is the group's 254.1, the
    ranks' rates beside it (it read 508.1, "2 processes added", issue 55 item 2); two
    independent engines in one export add up."""
    out = " ".join(registry.render("report", "text", analysed("tp2_healthy")).split())
    assert "launches/s 254.1 (one group of 2 ranks stepping together (254.1, 254.1 " \
        "launches/s each); NVTX steps/s 507.5 over every rank)" in out
    two = registry.render("report", "text", analysed("twoproc"))
    assert "(2 processes added; NVTX steps/s" in two
    one = registry.render("report", "text", analysed("healthy"))
    assert "processes added" not in one


def test_no_window_says_why(analysed):
    """The CPU-bound sample's host never waits: its window row read 'n/a / n/a / n/a' under a
    verdict that overlap works."""
    out = registry.render("report", "text", analysed("case2_cpubound"))
    assert "overlap window p10/p50/p90  n/a: the host never waited on a launch" in out


def test_a_sites_nvtx_path_is_said_to_be_its_first_launchs(analysed):
    """A site gathers launches of every step; its NVTX path is its first launch's, and every
    format says so ("step 6 > sample" alone read as if only step 6 stalled). A site of one
    launch says nothing more."""
    s = analysed("case1").summary
    site = s.sites[0]
    assert site.count > 1 and site.nvtx_path.startswith("step ")
    said = f"{site.nvtx_path} (the first of {site.count})"
    assert said in registry.render("report", "text", s, width=200)
    assert f"<code>{site.nvtx_path.replace('>', '&gt;')}</code> (the first of {site.count})" \
        in registry.render("report", "html", s)
    one = dataclasses.replace(s, sites=[dataclasses.replace(site, count=1)])
    assert f"{site.nvtx_path}   thread" in registry.render("report", "text", one, width=200)
    assert "the first of" not in registry.render("report", "html", one)
    late = analysed("case2_cpubound").summary.sites[-1]
    assert late.klass == "launch_bound" and late.count > 1
    assert f"`{late.nvtx_path} (the first of {late.count})`" in \
        registry.render("report", "markdown", analysed("case2_cpubound").summary)


@pytest.mark.parametrize("name", ["healthy_long", "case2", "both", "tp2_case1", "pieces_case1"])
def test_every_site_listed_leaves_nothing_unsaid(analysed, name):
    """Where the list holds every site, no "more" line (its sums are the class counts)."""
    from nsysscope.render.report_parts import unlisted

    s = analysed(name).summary
    assert unlisted(s, late=False) is None and unlisted(s, late=True) is None


def test_a_capped_list_of_sites_says_how_many_it_leaves_out(sample_path):
    """Issue 55, item 8: the launch-bound list is capped (at 10 places with the stalls); 66
    gaps were counted and 51 listed, in silence. The 5000-step capture with every gap
    launch-bound (--launch-bound-us 5: 4899 in 8 places), its list cut to its first five."""
    import dataclasses

    from nsysscope import AnalysisConfig, analyze, load

    s = analyze(load(sample_path("healthy_long")), AnalysisConfig(launch_bound_gap_us=5)).summary
    late = [x for x in s.sites if x.klass == "launch_bound"]
    assert len(late) == 8 and sum(x.count for x in late) == s.classes["launch_bound"] == 4899
    cut = dataclasses.replace(s, sites=late[:5])
    left = sum(x.count for x in late[5:])
    text = " ".join(registry.render("report", "text", cut).split())
    assert text.startswith("nsysscope report") and (
        "Launch-bound gaps: 4899 launches with no stall" in text)
    assert f"- and {left} more launches at places not listed (the list holds the costliest " \
        "places only)" in text
    md = registry.render("report", "markdown", cut)
    assert f"(and {left} more launches at places not listed" in md
