"""The command layer: its commands, their formats from the renderer registry, the version."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
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


def test_a_new_format_is_one_registration(monkeypatch):
    """The CLI's format and extension tables are the registry's: a renderer registered with
    its extensions is chosen by a file name, and named in the messages by its own noun."""
    import click

    from nsysscope.cli.options import output_format
    from nsysscope.render.base import register

    monkeypatch.setattr(registry, "_RENDERERS", dict(registry._RENDERERS))
    register("report", "rst", (".rst", ".rest"), "a reStructuredText", lambda s: "")
    assert output_format("report", None, "out.rest") == "rst"
    with pytest.raises(click.UsageError, match="names a reStructuredText file, but --format "
                       "json was given; drop --format .* or name a .json file"):
        output_format("report", "json", "out.rst")
    with pytest.raises(click.UsageError, match=r"\.txt, \.json, \.md, \.html, \.rst\)"):
        output_format("report", None, "out.xyz")


def test_open_is_there_but_not_exported_by_star():
    assert callable(nsysscope.open) and "open" not in nsysscope.__all__
    ns: dict = {}
    exec("from nsysscope import *", ns)
    assert "open" not in ns


def test_python_m_runs_the_command():
    p = subprocess.run([sys.executable, "-m", "nsysscope", "--help"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and "report" in p.stdout


@pytest.mark.parametrize("var, ours", [("NUMPY_MADVISE_HUGEPAGE", "0"),
                                       ("OPENBLAS_NUM_THREADS", "1")])
@pytest.mark.parametrize("users", [None, "7"])
def test_the_program_sets_numpys_pages_and_threads_unless_the_user_did(var, ours, users):
    """``nsysscope`` sets NUMPY_MADVISE_HUGEPAGE=0 (on the light 10^5 replica numpy's
    huge-page requests cost 0.4 s of system time and got no huge page) and
    OPENBLAS_NUM_THREADS=1 (OpenBLAS's idle threads spun for 0.1-0.3 CPU-s of a 2-core
    box's ~5) before numpy is imported; a value the user set is kept."""
    env = {k: v for k, v in os.environ.items() if k != var}
    if users is not None:
        env[var] = users
    code = ("import atexit, os, sys; sys.argv = ['nsysscope', '--version']; "
            f"atexit.register(lambda: print('seen=' + os.environ['{var}'])); "
            "from nsysscope.cli import run; run()")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60).stdout
    assert f"seen={users or ours}" in out


def _program(args: list[str], tmp_path, **env: str) -> subprocess.CompletedProcess:
    """``python -m nsysscope ARGS`` in a process of its own (the program's own stdout, not
    click's test runner), with a cache of the test's own."""
    return subprocess.run([sys.executable, "-m", "nsysscope", *args], capture_output=True,
                          timeout=120, env={**os.environ, "NSYSSCOPE_CACHE": str(tmp_path),
                                            **env})


@pytest.mark.parametrize("encoding", ["cp1252", "latin-1"])
def test_an_output_encoding_without_the_reports_characters_writes_a_question_mark(
        sample_path, tmp_path, encoding):
    """A console that cannot show the chain's arrow (Windows' cp1252, say): '?' instead,
    exit 0 (was an internal error, exit 70)."""
    p = _program(["report", str(sample_path("case1"))], tmp_path, PYTHONIOENCODING=encoding)
    assert p.returncode == 0, p.stderr
    chain = next(line for line in p.stdout.decode(encoding).splitlines() if "chain:" in line)
    assert "cudaMemcpyAsync DtoH 1 B ? cudaStreamSynchronize" in chain


@pytest.mark.parametrize("encoding", [None, "utf-8"])
def test_a_trace_whose_name_is_not_utf8_is_reported_with_a_question_mark(
        sample_path, tmp_path, encoding):
    """A file name that is not UTF-8 (Python holds its byte in a surrogate): the cache's key
    is made of the name's bytes, and the name is shown with '?' in valid UTF-8 JSON (was an
    internal error, exit 70, with a strict stdout; raw bytes in the JSON otherwise)."""
    trace = os.path.join(os.fsencode(tmp_path), b"bad\xff.sqlite.xz")
    with open(sample_path("case1"), "rb") as src, open(trace, "wb") as dst:
        dst.write(src.read())
    env = {"PYTHONIOENCODING": encoding} if encoding else {}
    p = _program(["report", os.fsdecode(trace), "--format", "json"], tmp_path / "cache", **env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.decode("utf-8"))["trace"]["path"] == \
        f"{tmp_path}/bad?.sqlite.xz"
