"""Golden snapshots, byte for byte: the text, Markdown and JSON reports of the healthy, case1
and case2 samples, their HTML pages (normalised: the figures' pixels and the version left
out), the gate of case1 against healthy in every format, and the many-trace report of the
three in every format.

A change in what a report says shows up here as a diff of ``tests/golden/``. When the change
is intended, regenerate the files and commit them with it::

    NSYSSCOPE_UPDATE_GOLDEN=1 python -m pytest tests/render/test_golden.py

A run that regenerates reports each file as skipped, not passed (it compared nothing), and
CI (``$CI`` set) refuses to regenerate. The figures in the files are the analysis's; they are
checked against the engine's own measurements in ``tests/analysis/test_report_samples.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from pathlib import Path

import pytest

import nsysscope.render  # noqa: F401 - registers the renderers
from nsysscope.batch import aggregate, analyze_one
from nsysscope.gate import GateThresholds, compare
from nsysscope.model import BatchResult, Summary, registry
from nsysscope.util.version import __version__

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
SAMPLES = ("healthy", "case1", "case2")
FORMATS = {"text": "txt", "markdown": "md", "json": "json"}
UPDATE = os.environ.get("NSYSSCOPE_UPDATE_GOLDEN") == "1"


#: what an HTML page holds that is not what it says: the figures' pixels (matplotlib's and
#: its fonts'), and the version that wrote it
_PIXELS = re.compile(r"data:image/(png|svg\+xml);base64,[A-Za-z0-9+/=]+")


def normalised_html(page: str) -> str:
    return _PIXELS.sub(r"data:image/\1;base64,...", page).replace(
        f"nsysscope {__version__}", "nsysscope VERSION")


def _as_in_readme(s: Summary, path: Path) -> Summary:
    """``s`` with the trace's path as the README's command gives it, not this checkout's
    absolute path."""
    return dataclasses.replace(s, trace=dataclasses.replace(
        s.trace, path=f"sample_traces/{path.name}"))


def _matches(out: str, golden: Path) -> None:
    if UPDATE:
        assert not os.environ.get("CI"), "CI compares the golden files; it never rewrites them"
        golden.write_text(out, encoding="utf-8")
        pytest.skip(f"regenerated {golden.name}: review its diff before committing it")
    assert golden.exists(), f"{golden} missing: run with NSYSSCOPE_UPDATE_GOLDEN=1"
    assert out == golden.read_text(encoding="utf-8"), (
        f"{golden.name} differs from what is made now; if intended, regenerate with "
        "NSYSSCOPE_UPDATE_GOLDEN=1 python -m pytest tests/render/test_golden.py")


@pytest.mark.parametrize("fmt", [*FORMATS, "html"])
@pytest.mark.parametrize("name", SAMPLES)
def test_report_matches_its_golden_file(analysed, sample_path, name, fmt):
    s = _as_in_readme(analysed(name).summary, sample_path(name))
    out = registry.render("report", fmt, s)
    ext = FORMATS.get(fmt, fmt)
    _matches(normalised_html(out) if fmt == "html" else out, GOLDEN / f"{name}.{ext}")


GATE_FORMATS = {"text": "txt", "markdown": "md", "json": "json", "junit": "xml",
                "html": "html"}


@pytest.mark.parametrize("fmt", GATE_FORMATS)
def test_gate_matches_its_golden_file(analysed, sample_path, fmt):
    """case1 against healthy, with the default thresholds (not a pyproject's)."""
    base, cand = (_as_in_readme(analysed(n).summary, sample_path(n)) for n in ("healthy", "case1"))
    r = compare(base, cand, GateThresholds(), baseline_label=base.trace.path,
                candidate_label=cand.trace.path)
    out = registry.render("gate", fmt, r, baseline=base, candidate=cand)
    _matches(normalised_html(out) if fmt == "html" else out,
             GOLDEN / f"gate_case1.{GATE_FORMATS[fmt]}")


@pytest.fixture(scope="module")
def batch(sample_path) -> BatchResult:
    """The three samples as ``nsysscope report sample_traces/h200_{healthy,case1,case2}_300...``
    reads them, from the repository root, without wall times."""
    with contextlib.chdir(GOLDEN.parents[1]):
        results = [analyze_one(f"sample_traces/{sample_path(n).name}") for n in SAMPLES]
    for r in results:
        r.seconds = None
    return BatchResult(traces=results, aggregate=aggregate(results))


@pytest.mark.parametrize("fmt", FORMATS)
def test_batch_matches_its_golden_file(batch, fmt):
    _matches(registry.render("batch", fmt, batch), GOLDEN / f"batch.{FORMATS[fmt]}")
