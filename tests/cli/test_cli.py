"""The command layer: its commands, their formats from the renderer registry, the version."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

import nsysscope
from nsysscope.cli import cli
from nsysscope.model import registry


def test_commands_and_version():
    r = CliRunner().invoke(cli, ["--help"])
    assert r.exit_code == 0
    for command in ("report", "summarize", "gate", "scrub"):
        assert command in r.output
    r = CliRunner().invoke(cli, ["--version"])
    assert r.output.strip() == f"nsysscope, version {nsysscope.__version__}"


def test_format_choices_come_from_the_registry():
    for command, kind in (("report", "report"), ("gate", "gate")):
        r = CliRunner().invoke(cli, [command, "--help"])
        assert "|".join(registry.names(kind)) in r.output.replace("\n", "").replace(" ", "")


def test_open_is_there_but_not_exported_by_star():
    assert callable(nsysscope.open) and "open" not in nsysscope.__all__
    ns: dict = {}
    exec("from nsysscope import *", ns)
    assert "open" not in ns


def test_python_m_runs_the_command():
    p = subprocess.run([sys.executable, "-m", "nsysscope", "--help"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and "report" in p.stdout
