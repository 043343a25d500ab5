"""The command line holds pandas text as Python strings (``nsysscope.cli.app``: measured
faster on the light 10^5 replica than pyarrow's), and says the same as the notebook API does
where pandas holds text in pyarrow: the report's numbers, stalls and names do not depend on
how pandas stores a string."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import nsysscope.cli.report as report_cli
from nsysscope import render
from nsysscope.analysis.windows import analyze_file
from nsysscope.cli.app import cli

pytest.importorskip("pyarrow")  # without it pandas holds text as Python strings anyway
if int(pd.__version__.split(".")[0]) < 3:  # pandas 2 holds text as objects by default
    pytest.skip("pandas 3's text columns", allow_module_level=True)

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


@pytest.mark.parametrize("name", ["h200_twoproc_healthy_case1_200.sqlite.xz",
                                  "kineto/h200_kineto_outcopy_case1_60.pt.trace.json.gz"])
def test_the_cli_report_equals_the_api_report_with_pyarrow_strings(monkeypatch, name):
    path = SAMPLES / name
    seen = []

    def spied(*args, **kwargs):
        seen.append(pd.get_option("mode.string_storage"))
        return analyze_file(*args, **kwargs)

    monkeypatch.setattr(report_cli, "analyze_file", spied)
    r = CliRunner().invoke(cli, ["report", str(path), "--format", "json"])
    assert r.exit_code == 0, r.output
    assert seen == ["python"]
    assert pd.get_option("mode.string_storage") == "auto"  # as it was, after the command
    with pd.option_context("mode.string_storage", "pyarrow"):
        a = analyze_file(path, events="none")
        assert a.launches.select_dtypes("str").dtypes.map(lambda d: d.storage).eq(
            "pyarrow").all()
        assert r.stdout == render.render("report", "json", a)
