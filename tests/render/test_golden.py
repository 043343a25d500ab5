"""Golden snapshots: the text, Markdown and JSON reports of the healthy, case1 and case2
samples, byte for byte.

A change in what a report says shows up here as a diff of ``tests/golden/``. When the change
is intended, regenerate the files and commit them with it::

    NSYSSCOPE_UPDATE_GOLDEN=1 python -m pytest tests/render/test_golden.py

A run that regenerates reports each file as skipped, not passed (it compared nothing), and
CI (``$CI`` set) refuses to regenerate. The figures in the files are the analysis's; they are
checked against the engine's own measurements in ``tests/analysis/test_report_samples.py``.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

import nsysscope.render  # noqa: F401 - registers the renderers
from nsysscope.model import registry

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
SAMPLES = ("healthy", "case1", "case2")
FORMATS = {"text": "txt", "markdown": "md", "json": "json"}
UPDATE = os.environ.get("NSYSSCOPE_UPDATE_GOLDEN") == "1"


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", SAMPLES)
def test_report_matches_its_golden_file(analysed, sample_path, name, fmt):
    s = analysed(name).summary
    # the trace's path as the README's command gives it, not this checkout's absolute path
    s = dataclasses.replace(s, trace=dataclasses.replace(
        s.trace, path=f"sample_traces/{sample_path(name).name}"))
    out = registry.render("report", fmt, s)
    golden = GOLDEN / f"{name}.{FORMATS[fmt]}"
    if UPDATE:
        assert not os.environ.get("CI"), "CI compares the golden files; it never rewrites them"
        golden.write_text(out, encoding="utf-8")
        pytest.skip(f"regenerated {golden.name}: review its diff before committing it")
    assert golden.exists(), f"{golden} missing: run with NSYSSCOPE_UPDATE_GOLDEN=1"
    assert out == golden.read_text(encoding="utf-8"), (
        f"{fmt} report of {name} differs from {golden}; if intended, regenerate with "
        "NSYSSCOPE_UPDATE_GOLDEN=1 python -m pytest tests/render/test_golden.py")
