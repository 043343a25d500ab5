"""The command line holds pandas text as Python strings (``nsysscope.cli.app``: measured
faster on the light 10^5 replica than pyarrow's), and says the same as the notebook API does
where pandas holds text in pyarrow: the report's numbers, stalls and names do not depend on
how pandas stores a string."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import nsysscope.cli.report as report_cli
from nsysscope import render
from nsysscope.analysis import analyze_file
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


def _program(*args: str, importtime: bool = False) -> subprocess.CompletedProcess[str]:
    """``python -m nsysscope ARGS``: the program itself (:func:`nsysscope.cli.run`), which
    the in-process runner of the other tests does not go through."""
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run([sys.executable, *flags, "-m", "nsysscope", *args],
                          capture_output=True, text=True, timeout=300)


def test_the_program_imports_pandas_without_pyarrow_and_says_the_same():
    """pyarrow installed, the program still does not import it (``-X importtime`` lists the
    attempt, a few microseconds, but none of pyarrow's modules), and its report is the
    in-process command's, made with pandas and pyarrow both loaded."""
    path = str(SAMPLES / "h200_twoproc_healthy_case1_200.sqlite.xz")
    p = _program("report", path, "--format", "json", importtime=True)
    assert p.returncode == 0, p.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in p.stderr.splitlines()
                if line.startswith("import time:")}
    assert "pandas" in imported and "pyarrow.lib" not in imported
    assert not {m for m in imported if m.startswith("pyarrow.")}
    r = CliRunner().invoke(cli, ["report", path, "--format", "json"])
    assert r.exit_code == 0 and p.stdout == r.stdout


def test_the_programs_parquet_is_the_in_process_commands(tmp_path):
    """``--per-launch FILE.parquet`` imports pyarrow after pandas ran without it: the same
    table, cell for cell and type for type, as the in-process command writes."""
    path = str(SAMPLES / "h200_case2_300.sqlite.xz")
    ours, theirs = tmp_path / "program.parquet", tmp_path / "runner.parquet"
    p = _program("report", path, "--per-launch", str(ours))
    assert p.returncode == 0, p.stderr[-2000:]
    r = CliRunner().invoke(cli, ["report", path, "--per-launch", str(theirs)])
    assert r.exit_code == 0, r.output
    a, b = pd.read_parquet(ours), pd.read_parquet(theirs)
    assert len(a) == 300
    pd.testing.assert_frame_equal(a, b)
