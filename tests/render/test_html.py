"""The HTML report and gate page: self-contained, complete, and rendered by a real browser.

The browser test runs Debian's headless ``chromium`` (``.ci/install-debian.sh chromium
chromium`` installs it); it is skipped only when no chromium is on the machine.
"""

from __future__ import annotations

import base64
import io
import os
import re
import shutil
import subprocess
import sys
from html import escape
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from nsysscope.cli import cli
from nsysscope.model import Note
from nsysscope.render import html
from nsysscope.render.report_parts import verdict_detail

IMG = re.compile(r'<img alt="([^"]*)" src="data:image/png;base64,([A-Za-z0-9+/=]+)">')


def cli_run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def decoded_images(page: str) -> list[Image.Image]:
    out = []
    for _alt, data in IMG.findall(page):
        im = Image.open(io.BytesIO(base64.b64decode(data)))
        im.load()  # raises on a truncated or corrupt PNG
        out.append(im)
    return out


def distinct_colours(im: Image.Image) -> int:
    px = np.asarray(im.convert("RGB")).reshape(-1, 3).astype(np.int32)
    return len(np.unique((px[:, 0] << 16) | (px[:, 1] << 8) | px[:, 2]))


def assert_self_contained(page: str) -> None:
    assert page.lstrip().startswith("<!DOCTYPE html>")
    assert "<link" not in page and "<script" not in page and "@import" not in page
    for attr in re.findall(r'(?:src|href)="([^"]*)"', page):
        assert attr.startswith("data:"), f"external resource {attr[:80]}"
    assert "url(" not in page


@pytest.fixture(scope="module")
def case1_page(sample_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("html") / "case1.html"
    r = cli_run("report", str(sample_path("case1")), "--format", "html", "-o", str(out))
    assert r.exit_code == 0, r.output
    return out


def test_report_html_is_one_self_contained_page_with_everything(case1_page, analysed):
    page = case1_page.read_text(encoding="utf-8")
    assert_self_contained(page)
    s = analysed("case1").summary
    # the headline first, the verdict under it without the lead they share
    assert escape(s.headline.text) in page and escape(verdict_detail(s)) in page
    assert page.index(escape(s.headline.text)) < page.index(escape(verdict_detail(s)))
    site = s.sites[0]
    assert "gpu_to_cpu" in page and "phase &#x27;sample&#x27;" in page
    assert escape(site.fix) in page
    assert "cudaMemcpyAsync DtoH 1 B" in page
    for heading in ("Summary", "Top stall sites", "Timeline: the worst stall",
                    "Timeline: a typical step", "Distributions", "Notes"):
        assert heading in page
    # the worst stall's figure says how it was chosen: its neighbours' gaps can be longer
    assert "less what the host&#x27;s own slowness after it added" in page or \
        "less what the host's own slowness after it added" in page
    images = decoded_images(page)
    assert len(images) == 4  # worst, typical, distributions, series
    for im in images:
        assert im.size[0] >= 1000 and im.size[1] >= 300
        # measured 272 to 1334 colours (anti-aliased plots); a blank figure has a handful
        assert distinct_colours(im) > 50
    alts = [alt for alt, _ in IMG.findall(page)]
    assert any("blocked in &#x27;sample&#x27;" in a or "blocked in 'sample'" in a for a in alts)


def test_healthy_report_says_there_is_no_stall(analysed):
    page = html.report_page(analysed("healthy"))
    assert "this trace has no stalls" in page
    assert "overlap healthy" in page
    assert len(decoded_images(page)) == 4
    # the warm-up nsysscope chose (max(5, 2 % of 300)), not the setting's None
    assert "Analysis settings: <code>warmup_launches=auto (6), launch_bound_gap_us=150.0" in page


def test_summary_fragment_for_jupyter(analysed, sample_path):
    s = analysed("case2").summary
    frag = html.summary_fragment(s)
    assert escape(s.headline.text) in frag and escape(verdict_detail(s)) in frag
    assert "cpu_to_gpu" in frag
    assert "<style" not in frag and "<script" not in frag and "<img" not in frag
    import nsysscope
    t = nsysscope.open(sample_path("case2"))
    assert t._repr_html_() == html.summary_fragment(t.summary)


def test_text_is_escaped(analysed):
    from dataclasses import replace
    s = analysed("case1").summary
    evil = replace(s, verdict="<script>alert(1)</script>", note_facts=[Note.written("a < b & c")])
    frag = html.summary_fragment(evil)
    assert "<script>" not in frag and "&lt;script&gt;" in frag and "a &lt; b &amp; c" in frag


def test_a_broken_figure_becomes_a_note_not_a_failure(monkeypatch):
    def boom():
        raise RuntimeError("no luck")
    monkeypatch.delenv("NSYSSCOPE_DEBUG", raising=False)
    out = html.figure(boom, "x")
    assert "figure not drawn" in out and "no luck" in out


# -- the gate page -------------------------------------------------------------------------------

def test_gate_html_embeds_the_comparison(analysed, tmp_path):
    gate = pytest.importorskip("nsysscope.gate")
    from nsysscope.render.json_ import render as summary_json
    # the command, on two summary files: distributions and class shares, no timelines
    for name in ("healthy", "case1"):
        (tmp_path / f"{name}.json").write_text(summary_json(analysed(name).summary))
    out = tmp_path / "gate.html"
    r = cli_run("gate", str(tmp_path / "healthy.json"), str(tmp_path / "case1.json"),
                "--format", "html", "-o", str(out))
    assert r.exit_code == 1, r.output  # case 1 is a regression
    page = out.read_text(encoding="utf-8")
    assert_self_contained(page)
    assert "REGRESSION" in page and "gpu_to_cpu" in page and "Fix:" in page
    images = decoded_images(page)
    assert len(images) == 1 and images[0].size[1] < 700
    assert distinct_colours(images[0]) > 50
    # given the analyses, the page also shows both timelines on one time scale
    a, b = analysed("healthy"), analysed("case2")
    res = gate.compare(a, b)
    page = html.gate_page(res, baseline=a, candidate=b)
    assert_self_contained(page)
    images = decoded_images(page)
    assert len(images) == 1 and images[0].size[1] > 900
    assert "cpu_to_gpu" in page
    # the CI flow: a summary as baseline, a trace as candidate; the candidate's timeline stays
    summary = gate.read_summary(tmp_path / "healthy.json")
    res = gate.compare(summary, b)
    page = html.gate_page(res, baseline=summary, candidate=b)
    images = decoded_images(page)
    assert len(images) == 1 and 700 < images[0].size[1] < images_height_both(a, b)
    assert "the baseline is a summary" not in page  # said in the figure, not the page text
    # without the sides it compared, the page never reads them again: the tables, and a note
    page = html.gate_page(res)
    assert "No figure" in page and not decoded_images(page)


def images_height_both(a, b) -> int:
    """The height of the gate figure with both sides' timelines."""
    return decoded_images(html.gate_page(gate_compare(a, b), baseline=a, candidate=b))[0].size[1]


def gate_compare(a, b):
    from nsysscope.gate import compare
    return compare(a, b)


# -- a real browser ------------------------------------------------------------------------------

def chromium() -> str | None:
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def browser(args: list[str], tmp: Path) -> subprocess.CompletedProcess:
    exe = chromium()
    if exe is None:
        pytest.skip("chromium is not installed (.ci/install-debian.sh chromium chromium "
                    "installs it)")
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp / 'profile'}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp)


PROBE = ("<script>window.addEventListener('load',()=>{const im=[...document.images];"
         "document.body.setAttribute('data-images',im.length+':'+im.filter(i=>i.complete&&"
         "i.naturalWidth>0).length);document.body.setAttribute('data-height',"
         "document.documentElement.scrollHeight)});</script>")


@pytest.mark.slow  # a real browser
def test_report_renders_in_headless_chromium(case1_page, tmp_path):
    # the images load: a copy of the page with a probe reports what the browser decoded
    probe = tmp_path / "probe.html"
    probe.write_text(case1_page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"),
                     encoding="utf-8")
    r = browser(["--window-size=1200,2000", "--virtual-time-budget=10000", "--dump-dom",
                 probe.as_uri()], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    m = re.search(r'data-images="(\d+):(\d+)"', r.stdout)
    assert m, "the page did not finish loading: " + r.stdout[:500]
    assert m.group(1) == m.group(2) == "4", f"images loaded: {m.group(2)} of {m.group(1)}"
    height = int(re.search(r'data-height="(\d+)"', r.stdout).group(1))
    assert height > 3000  # summary, sites, two timelines and two distribution figures
    # it renders: a screenshot of the page itself (no probe) is not blank
    shot = tmp_path / "shot.png"
    r = browser(["--window-size=1200,2000", f"--screenshot={shot}", case1_page.as_uri()], tmp_path)
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    im = Image.open(shot).convert("RGB")
    assert im.size == (1200, 2000)
    px = np.asarray(im).reshape(-1, 3)
    # measured: 4582 colours, 9.2 % non-white pixels, 24870 vermillion ones; the floors are
    # far below, but a page that failed to render (blank, or text only) is under them all
    assert distinct_colours(im) > 200, "screenshot is (nearly) blank"
    assert (px.min(axis=1) < 200).mean() > 0.03  # a fair share of non-white pixels
    # the verdict banner's vermillion stripe (case 1 is broken) is on screen
    assert (np.abs(px.astype(int) - [0xD5, 0x5E, 0x00]).max(axis=1) < 12).sum() > 500


def test_gate_fragment_for_jupyter(analysed):
    gate = pytest.importorskip("nsysscope.gate")
    res = gate.compare(analysed("healthy"), analysed("case1"))
    frag = html.gate_fragment(res)
    assert escape(res.verdict) in frag and "FAIL" in frag and "gpu_to_cpu" in frag
    assert "<style" not in frag and "<script" not in frag
    assert frag.count("<tr>") == len(res.checks) + 1


def test_characters_the_font_lacks_leave_stderr_clean(sample_path, tmp_path):
    """A trace named in CJK and emoji (as NVTX ranges and thread names can be): DejaVu Sans
    has none of them, and matplotlib warned once per glyph and figure (48 lines for this
    page); they are drawn as boxes, quietly."""
    trace = tmp_path / "trace \u4e2d\u6587 \U0001F680.sqlite.xz"
    shutil.copyfile(sample_path("case1"), trace)
    out = tmp_path / "page.html"
    env = {**os.environ, "NSYSSCOPE_CACHE": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-m", "nsysscope", "report", str(trace), "-o", str(out)],
                       capture_output=True, text=True, env=env, check=False)
    # nothing but the line saying what was written
    assert r.returncode == 0 and r.stderr.startswith(f"report of {trace} written to {out} "), \
        r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert len(decoded_images(out.read_text())) >= 4
