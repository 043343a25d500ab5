"""What a new user tripped over (issue 13): every refusal is one line with a documented exit
code, checked before the analysis where it can be; formats follow file names; the cache has a
cap and a command; ``--version`` is fast."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from nsysscope.cli import cli
from nsysscope.errors import EXIT_CODES, NothingSteady
from nsysscope.render.json_ import render as summary_json


def run(*args: object, **kw):
    return CliRunner().invoke(cli, [str(a) for a in args], **kw)


def one_error_line(r, code: int) -> str:
    """The result's single stderr line, after checking the exit code and that it is one line."""
    assert r.exit_code == code, (r.exit_code, r.output, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("nsysscope: error: ")
    assert "Traceback" not in r.output
    return lines[0]


@pytest.fixture(autouse=True)
def _empty_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no pyproject.toml above changes the gate's thresholds


# -- click's usage errors: one line, exit 2 ----------------------------------------------------

@pytest.mark.parametrize("args, words", [
    (["report"], "Missing argument 'TRACE...'"),
    (["report", "--bogus", "x"], "No such option '--bogus'"),
    (["bogus"], "No such command 'bogus'"),
    (["report", "--warmup", "abc", "x"], "'abc' is not a valid integer"),
    (["report", "--warmup", "-3", "x"], "-3 is not in the range x>=0"),
    (["report", "--launch-bound-us", "-5", "x"], "-5.0 is not in the range x>0"),
    (["report", "--launch-bound-us", "0", "x"], "0.0 is not in the range x>0"),
    # NaN passes the range check: no gap was launch-bound, and the JSON held a bare NaN
    (["report", "--launch-bound-us", "nan", "x"], "nan is not a finite number"),
    (["report", "--format", "pdf", "x"], "'pdf' is not one of"),
    (["gate", "a.json"], "Missing argument 'CANDIDATE'"),
    (["summarize", "--warmup", "-1", "x"], "-1 is not in the range x>=0"),
    (["report", "--source-root", "/nonexistent-nsysscope", "x"],
     "Directory '/nonexistent-nsysscope' does not exist"),
])
def test_usage_errors_are_one_line(args, words):
    line = one_error_line(run(*args), 2)
    assert words in line and "--help" in line


def test_a_bug_is_one_line_and_exit_70_with_the_traceback_on_request(sample_path, monkeypatch):
    import nsysscope.cli.report as report_module

    def boom(*args, **kw):
        raise RuntimeError("planted")
    monkeypatch.setattr(report_module, "analyze_file", boom)
    line = one_error_line(run("report", sample_path("case1")), 70)
    assert line == ("nsysscope: error: internal error: RuntimeError: planted (set "
                    "NSYSSCOPE_DEBUG=1 for the traceback)")
    monkeypatch.setenv("NSYSSCOPE_DEBUG", "1")
    r = run("report", sample_path("case1"))
    assert isinstance(r.exception, RuntimeError) and str(r.exception) == "planted"


def test_a_reader_that_stops_early_ends_the_report_quietly(sample_path):
    """``nsysscope report ... | head``: the pipe closes while the report is written (the
    long sample's JSON, 134 KB, is more than a pipe holds): exit 0, nothing on stderr."""
    p = subprocess.Popen([sys.executable, "-m", "nsysscope", "report",
                          str(sample_path("healthy_long")), "--format", "json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    assert p.stdout.read(100).startswith(b"{")
    p.stdout.close()
    assert p.wait(timeout=300) == 0
    assert p.stderr.read() == b""


def test_bare_command_shows_help_with_every_exit_code():
    r = run()
    assert r.exit_code == 2 and "Commands:" in r.output
    r = run("--help")
    assert r.exit_code == 0
    for code, text in EXIT_CODES:
        assert f" {code:>2}  {text}\n" in r.output


def test_gate_help_lists_every_exit_code():
    r = run("gate", "--help")
    for code in (0, 1, 2, 3, 4, 5, 6, 7, 8, 70):  # 70: an internal error, which it can be
        assert f"\n    {code} {dict(EXIT_CODES)[code]}\n" in r.output, code
    # the description is wrapped as prose: no runs of spaces left from the docstring's
    # indentation ("JSON from   'nsysscope summarize'"), no blank line inside the codes
    description = r.output.split("Exit codes:")[0]
    assert "   " not in description.split("\n\n", 1)[1].replace("\n  ", " ")
    assert "Exit codes:\n    0 ok" in r.output


# -- nothing steady to judge: exit 8, and no summary written -----------------------------------

def test_warmup_past_the_launches_is_nothing_steady(sample_path, tmp_path):
    trace = sample_path("case1")
    line = one_error_line(run("report", trace, "--warmup", "400"), NothingSteady.exit_code)
    assert line.endswith("nothing steady to judge: --warmup 400 leaves no steady launch (300 "
                         "graph launches, 300 of them warm-up; the last on each stream is never "
                         "judged); lower --warmup or capture more steps")
    out = tmp_path / "s.json"
    one_error_line(run("summarize", trace, "--warmup", "400", "-o", out), 8)
    assert not out.exists()
    # no warm-up left to lower: it said "lower --warmup" all the same
    line = one_error_line(run("report", trace, "--warmup", "0", "--from", "6.038", "--to",
                              "6.039"), 8)
    assert line.endswith("(1 graph launch, 0 of them warm-up; the last on each stream is never "
                         "judged); capture more steps")
    assert NothingSteady.exit_code == 8 and 8 in dict(EXIT_CODES)


# -- outputs: checked before analysing, failures are one line ----------------------------------

@pytest.mark.parametrize("args", [
    ("report", "{a}", "-o", "{a}"), ("report", "{a}", "-o", "{b}"),
    ("report", "{a}", "--perfetto", "{a}"), ("report", "{a}", "--per-launch", "{a}"),
    ("report", "{a}", "--per-launch", "{b}"), ("summarize", "{a}", "-o", "{a}"),
    ("export", "{a}", "--perfetto", "{b}"), ("gate", "{a}", "{b}", "--json", "{b}"),
    ("gate", "{a}", "{b}", "-o", "{a}"), ("report", "{a}", "-o", "{rep}"),
])
def test_outputs_never_write_over_a_trace(sample_path, tmp_path, args):
    """An output named as an input, or as any nsys export or report, is refused before the
    analysis, and the file is left as it was (before: overwritten with the report; an export
    named by --per-launch got nsysscope's tables added, then the write failed)."""
    from nsysscope.trace import resolve
    from nsysscope.trace.files import REPORT_MAGIC
    a, b, rep = tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "old.nsys-rep"
    for p in (a, b):
        shutil.copyfile(resolve(sample_path("case1")), p)
    rep.write_bytes(REPORT_MAGIC + bytes(100))
    before = {p: p.read_bytes() for p in (a, b, rep)}
    names = {"a": a, "b": b, "rep": rep}
    line = one_error_line(run(*(x.format(**names) for x in args)), 2)
    target = Path(args[-1].format(**names))
    assert line.startswith(f"nsysscope: error: {args[-2]} {target}: is ")
    assert line.endswith(": name another file")
    assert all(p.read_bytes() == content for p, content in before.items())


@pytest.mark.parametrize("args,kind", [
    (("report", "{a}", "-o", "{xz}"), "a compressed SQLite file"),
    (("summarize", "{a}", "-o", "{gz}"), "a compressed SQLite file"),
    (("gate", "{a}", "{a}", "--json", "{xz}"), "a compressed SQLite file"),
    (("export", "{a}", "--perfetto", "{kineto}"), "a torch.profiler trace"),
    (("report", "{a}", "-o", "{kineto}"), "a torch.profiler trace"),
])
def test_outputs_never_write_over_a_compressed_or_torch_profiler_trace(sample_path, tmp_path,
                                                                       args, kind):
    """Traces that are not themselves SQLite: an .xz or .gz export, a torch.profiler JSON.
    Each was overwritten with the report (exit 0) by every output option."""
    import gzip

    from nsysscope.trace import resolve
    a = tmp_path / "a.sqlite"
    shutil.copyfile(resolve(sample_path("case1")), a)
    xz, gz = tmp_path / "b.sqlite.xz", tmp_path / "c.sqlite.gz"
    shutil.copyfile(sample_path("case1"), xz)
    gz.write_bytes(gzip.compress(a.read_bytes()[:1 << 16]))  # its head is enough to tell
    kineto = tmp_path / "k.pt.trace.json.gz"
    shutil.copyfile(Path(__file__).resolve().parents[2] / "sample_traces" / "kineto" /
                    "h200_kineto_healthy_60.pt.trace.json.gz", kineto)
    before = {p: p.read_bytes() for p in (xz, gz, kineto)}
    names = {"a": a, "xz": xz, "gz": gz, "kineto": kineto}
    line = one_error_line(run(*(x.format(**names) for x in args)), 2)
    assert line.endswith(f"{args[-2]} {args[-1].format(**names)}: is {kind}; nsysscope never "
                         "writes over a trace: name another file")
    assert all(p.read_bytes() == content for p, content in before.items())


@pytest.mark.parametrize("args", [("report", "{a}", "-o", "{fifo}"),
                                  ("summarize", "{a}", "-o", "{fifo}"),
                                  ("export", "{a}", "--perfetto", "{fifo}"),
                                  ("scrub", "-f", "{a}", "{fifo}")])
def test_an_output_that_is_no_regular_file_is_refused(sample_path, tmp_path, args):
    """A FIFO (or a device): identifying it opened it for reading, and the run waited for a
    writer forever; a device was replaced by the renamed temporary file (as root, /dev/full
    was). Refused, before any analysis."""
    from nsysscope.trace import resolve
    a, fifo = tmp_path / "a.sqlite", tmp_path / "fifo"
    shutil.copyfile(resolve(sample_path("case1")), a)
    os.mkfifo(fifo)
    r = subprocess.run([sys.executable, "-m", "nsysscope",
                        *(x.format(a=a, fifo=fifo) for x in args)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert f"{fifo}: not a regular file (a device, a FIFO or a socket); name a file" in r.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode)


@pytest.mark.parametrize("args,line", [
    (("report", "{a}", "-o", "out.csv", "--format", "text", "--per-launch", "out.csv"),
     "-o and --per-launch both name out.csv"),
    (("report", "{a}", "-o", "out.json", "--perfetto", "./out.json"),
     "-o and --perfetto both name ./out.json"),
    (("gate", "{a}", "{a}", "-o", "g.json", "--json", "g.json"), "-o and --json both name g.json"),
])
def test_two_outputs_of_one_run_naming_one_file_are_refused(sample_path, tmp_path, monkeypatch,
                                                            args, line):
    """The second written replaced the first without a word (the per-launch table or the
    timeline lost)."""
    monkeypatch.chdir(tmp_path)
    a = sample_path("case1")
    got = one_error_line(run(*(x.format(a=a) for x in args)), 2)
    assert got == f"nsysscope: error: {line}; give each output a file of its own"
    assert not list(tmp_path.iterdir())  # refused before anything was written


def test_an_output_named_as_a_trace_of_a_folder_is_refused(tmp_path):
    """Several traces named by their folder: an output named as one of them (a torch.profiler
    JSON, which is no SQLite file) is refused too, before any is read."""
    folder = tmp_path / "traces"
    folder.mkdir()
    kineto = folder / "h200_kineto_healthy_60.pt.trace.json.gz"
    shutil.copyfile(Path(__file__).resolve().parents[2] / "sample_traces" / "kineto" /
                    kineto.name, kineto)
    shutil.copyfile(kineto, folder / "other.pt.trace.json.gz")
    before = kineto.read_bytes()
    line = one_error_line(run("report", folder, "-j", "1", "-o", kineto), 2)
    assert line.endswith(f"-o {kineto}: is a torch.profiler trace; nsysscope never writes "
                         "over a trace: name another file")
    other = tmp_path / "out.txt"  # a name that is no trace, but one of the folder's: refused
    (folder / "x.sqlite").symlink_to(other)
    other.write_text("not a trace")
    line = one_error_line(run("report", folder, "-j", "1", "-o", other), 2)
    assert line.endswith(f"-o {other}: is the input {folder / 'x.sqlite'}; nsysscope never "
                         "writes over its input: name another file")
    assert kineto.read_bytes() == before


def test_per_launch_adds_to_its_own_database(sample_path, tmp_path):
    """An SQLite file that is not an nsys export, the per-launch database of an earlier run,
    is still written into."""
    import sqlite3
    for name in ("launches.db", "launches.sqlite3"):  # every database name --per-launch takes
        db = tmp_path / name
        for _ in range(2):
            assert run("report", sample_path("case1"), "--per-launch", db).exit_code == 0
        with sqlite3.connect(db) as c:
            assert c.execute("SELECT COUNT(*) FROM launches").fetchone()[0] == 300


def test_per_launch_to_a_missing_folder_is_exit_2(sample_path, tmp_path, monkeypatch):
    import nsysscope.cli.report as report

    def no_analysis(*a, **k):  # the path is checked before any analysis
        raise AssertionError("analysed before checking the output path")
    monkeypatch.setattr(report, "analyze_file", no_analysis)
    line = one_error_line(run("report", sample_path("case1"), "--per-launch",
                              tmp_path / "missing" / "x.csv"), 2)
    assert line.endswith(f"--per-launch {tmp_path / 'missing' / 'x.csv'}: cannot write: no such "
                         f"folder {tmp_path / 'missing'}")
    line = one_error_line(run("report", sample_path("case1"), "-o",
                              tmp_path / "missing" / "r.txt"), 2)
    assert "cannot write: no such folder" in line
    one_error_line(run("report", sample_path("case1"), "--per-launch", tmp_path / "x.tsv"), 2)


def test_per_launch_write_failure_is_exit_2(sample_path, tmp_path, monkeypatch):
    def fail(*a, **k):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(pd.DataFrame, "to_csv", fail)
    line = one_error_line(run("report", sample_path("case1"), "--per-launch", tmp_path / "x.csv"),
                          2)
    assert line.endswith("x.csv: cannot write: Permission denied")


def test_parquet_without_pyarrow_fails_first_naming_the_extra(sample_path, tmp_path,
                                                              monkeypatch):
    import importlib.util

    import nsysscope.cli.report as report
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("pyarrow", "fastparquet")
                        else real(name, *a))
    monkeypatch.setattr(report, "analyze_file", lambda *a, **k: pytest.fail("analysed first"))
    line = one_error_line(run("report", sample_path("case1"), "--per-launch",
                              tmp_path / "x.parquet"), 2)
    assert "writing parquet needs pyarrow: pip install 'nsysscope[parquet]'" in line


def test_per_launch_table_names_processes_threads_and_copy_kinds(sample_path, tmp_path):
    out = tmp_path / "launches.csv"
    r = run("report", sample_path("case2"), "--per-launch", out, "-o", tmp_path / "r.txt")
    assert r.exit_code == 0, r.output
    df = pd.read_csv(out)
    cols = list(df.columns)
    assert cols[cols.index("tid") + 1: cols.index("tid") + 3] == ["pid", "os_tid"]
    assert (df["pid"] == (df["tid"] // (1 << 24)) % (1 << 24)).all()
    assert (df["os_tid"] == df["tid"] % (1 << 24)).all()
    # times, bytes and thread ids are whole numbers, blank where a launch has none (they were
    # written as 131666051.0, and cause_tid then matched no tid as text)
    text = pd.read_csv(out, dtype=str, keep_default_na=False)
    whole = [c for c in cols if c.endswith("_ns")] + ["cause_bytes", "cause_tid"]
    assert not [c for c in whole if text[c].str.contains(".", regex=False).any()]
    paired = text[text["cause_tid"] != ""]
    assert len(paired) > 250 and (paired["cause_tid"] == paired["tid"]).all()
    stalls = df[df["klass"] == "cpu_to_gpu"]
    assert set(stalls["cause_copy_kind"]) == {"HtoD"}
    assert set(stalls["cause_src_kind"]) == {"pageable"}
    assert set(stalls["cause_dst_kind"]) == {"device"}
    documented = Path(__file__).resolve().parents[2] / "docs" / "per-launch.md"
    text = documented.read_text(encoding="utf-8")
    missing = [c for c in cols if f"`{c}`" not in text]
    assert not missing, f"columns not in docs/per-launch.md: {missing}"


@pytest.mark.parametrize("name, fmt, starts", [
    ("r.html", "html", "<!DOCTYPE html>"), ("r.json", "json", "{"),
    ("r.md", "markdown", "## nsysscope"), ("r.txt", "text", "nsysscope report: "),
])
def test_report_format_follows_the_file_name(name, fmt, starts, tmp_path):
    out = tmp_path / name
    r = run("report", _trace("case1"), "-o", out)
    assert r.exit_code == 0, r.stderr
    assert out.read_text(encoding="utf-8").startswith(starts)
    other = "json" if fmt != "json" else "text"
    line = one_error_line(run("report", _trace("case1"), "-o", out, "--format", other), 2)
    assert f"-o {out} names" in line and f"but --format {other} was given" in line
    assert run("report", _trace("case1"), "-o", out, "--format", fmt).exit_code == 0


def test_an_extension_that_names_no_format_is_refused(summary_file, tmp_path):
    """``-o launches.csv`` (where ``--per-launch`` was meant) or ``-o r.pdf`` wrote the text
    report into that file and exited 0. Now a usage error (nothing written) unless --format
    says what to write; no extension, ``.log`` and ``.out`` are text, and so is a dotted date."""
    out = tmp_path / "launches.csv"
    line = one_error_line(run("report", _trace("case1"), "-o", out), 2)
    assert line.startswith(
        f"nsysscope: error: -o {out}: .csv names no report format (.txt, .json, .md, .html); "
        "name one of those, or pass --format to write one to this file (the per-launch table "
        "is --per-launch FILE.csv)")
    assert not out.exists()
    one_error_line(run("gate", summary_file("healthy"), summary_file("case1"), "-o",
                       tmp_path / "g.pdf"), 2)
    assert run("report", _trace("case1"), "-o", out, "--format", "text").exit_code == 0
    for name in ("r", "r.log", "r.out", "r.2026-12-01"):
        assert run("report", _trace("case1"), "-o", tmp_path / name).exit_code == 0
        assert (tmp_path / name).read_text(encoding="utf-8").startswith("nsysscope report: ")


def test_gate_format_follows_the_file_name_and_writes_several(summary_file, tmp_path):
    base, cand = summary_file("healthy"), summary_file("case2")
    r = run("gate", base, cand, "-o", tmp_path / "g.xml")
    assert r.exit_code == 1
    assert (tmp_path / "g.xml").read_text().startswith("<?xml")
    assert r.stdout.startswith("nsysscope gate: REGRESSION")
    one_error_line(run("gate", base, cand, "-o", tmp_path / "g.xml", "--format", "markdown"), 2)
    one_error_line(run("gate", base, cand, "--junit", tmp_path / "g.md"), 2)
    r = run("gate", base, cand, "--markdown", tmp_path / "g.md", "--junit", tmp_path / "j.xml",
            "--html", tmp_path / "g.html", "--json", tmp_path / "g.json")
    assert r.exit_code == 1
    assert r.stdout.startswith("nsysscope gate: REGRESSION") and "metric" in r.stdout
    assert (tmp_path / "g.md").read_text().startswith("<!-- nsysscope-gate -->")
    assert (tmp_path / "j.xml").read_text().startswith("<?xml")
    assert (tmp_path / "g.html").read_text().startswith("<!DOCTYPE html>")
    assert json.loads((tmp_path / "g.json").read_text())["exit_code"] == 1


# -- misleading messages -------------------------------------------------------------------------

def test_summary_with_only_a_schema_key(tmp_path, summary_file):
    bad = tmp_path / "only.json"
    bad.write_text('{"schema": "nsysscope.summary/1"}')
    line = one_error_line(run("gate", bad, summary_file("healthy")), 2)
    assert line == (f"nsysscope: error: {bad}: an incomplete nsysscope summary: no trace, "
                    "verdict, overlap_ok, launches and 12 more; write it with 'nsysscope "
                    "summarize TRACE -o FILE.json'")


def test_nsys_that_is_not_nsys(tmp_path):
    rep = tmp_path / "tiny.nsys-rep"
    shutil.copy(Path(__file__).resolve().parents[1] / "data" / "nsys2025.3_tiny_redacted.nsys-rep",
                rep)
    true = shutil.which("true")
    line = one_error_line(run("report", rep, "--nsys", true), 6)
    assert f"{true} does not look like nsys" in line and "unknown" not in line


def test_existing_export_beside_the_report_is_used(tmp_path, sample_path, monkeypatch):
    rep = tmp_path / "run.nsys-rep"
    shutil.copy(Path(__file__).resolve().parents[1] / "data" / "nsys2025.3_tiny_redacted.nsys-rep",
                rep)
    monkeypatch.setenv("PATH", str(tmp_path))  # no nsys anywhere
    monkeypatch.delenv("NSYS", raising=False)
    one_error_line(run("report", rep), 6)
    from nsysscope.trace import resolve
    export = tmp_path / "run.sqlite"
    shutil.copy(resolve(sample_path("case1")), export)
    old = time.time() - 3600
    os.utime(export, (old, old))  # older than the report: not used, and the message says so
    line = one_error_line(run("report", rep), 6)
    assert "run.sqlite beside it is older than the report" in line
    os.utime(export)
    r = run("report", rep)
    assert r.exit_code == 0, r.stderr
    assert r.stderr.strip() == ("nsysscope: note: reading run.sqlite, the export beside "
                                "run.nsys-rep (newer than the report)")
    assert "OVERLAP BROKEN" in r.stdout


def test_single_trace_with_batch_options_says_so(sample_path):
    r = run("report", sample_path("case1"), "-j", "4")
    assert r.exit_code == 0
    assert r.stderr.strip() == ("nsysscope: note: -j applies to several traces; one trace is "
                                "analysed here, in this process")
    assert r.stdout.startswith("nsysscope report: ")  # the one-trace report, not the table


def test_unreachable_scheduler_fails_fast(sample_path, monkeypatch):
    """Nothing listens: a socket probe says so at once, before Dask's client, which would
    retry for its whole connect timeout, is ever made."""
    distributed = pytest.importorskip("dask.distributed")

    def no_client(*args, **kw):
        raise AssertionError("a Dask client was made for an address nothing listens at")
    monkeypatch.setattr(distributed, "Client", no_client)
    line = one_error_line(run("report", sample_path("case1"), sample_path("case2"),
                              "--scheduler", "tcp://127.0.0.1:9"), 2)
    assert "cannot reach the Dask scheduler (127.0.0.1:9: Connection refused)" in line


# -- the cache -----------------------------------------------------------------------------------

def test_cache_cap_info_clear_and_no_cache(sample_path, tmp_path, monkeypatch):
    from nsysscope.trace import cache
    folder = tmp_path / "cache"
    monkeypatch.setenv("NSYSSCOPE_CACHE", str(folder))
    r = run("cache", "info")
    assert r.exit_code == 0 and "files:   0" in r.output and "limit:   2.0 GB" in r.output
    # a file of the user's in the folder: neither counted, evicted nor cleared, though it
    # is an SQLite file over the cap on its own
    folder.mkdir()
    theirs = folder / "my_export.sqlite"
    theirs.write_bytes(b"SQLite format 3\x00" + bytes(11 << 20))
    # named by a hash as the cache's entries once were: cache clear removed it
    hashed = folder / "run-0123456789abcdef.sqlite"
    hashed.write_bytes(b"SQLite format 3\x00")
    # one decompressed sample is ~7.5 MB: a 10 MB cap keeps one (the other last used an hour
    # ago: one used in the last ten minutes may be another run's, and stays)
    monkeypatch.setenv("NSYSSCOPE_CACHE_MAX", "10M")
    for name in ("healthy", "case1"):
        for c in cache.entries(folder):
            os.utime(c.path, ns=(time.time_ns() - 3600 * 10**9,) * 2)
        assert run("summarize", sample_path(name), "-o", tmp_path / f"{name}.json").exit_code == 0
    names = [c.path.name for c in cache.entries(folder)]
    assert len(names) == 1 and names[0].startswith("h200_case1_300-")
    r = run("cache", "info")
    assert "files:   1" in r.output and "limit:   10.0 MB" in r.output
    r = run("cache", "clear")
    assert r.exit_code == 0 and r.output.startswith("removed 1 file (")
    assert cache.entries(folder) == []
    assert theirs.stat().st_size == 16 + (11 << 20) and hashed.is_file()
    # --no-cache leaves the cache folder alone (a subprocess: the switch lasts a process)
    p = subprocess.run([sys.executable, "-m", "nsysscope", "summarize", "--no-cache",
                        str(sample_path("healthy")), "-o", str(tmp_path / "h.json")],
                       capture_output=True, text=True, env={**os.environ}, timeout=300)
    assert p.returncode == 0, p.stderr
    assert cache.entries(folder) == []
    assert run("report", sample_path("case1")).exit_code == 0  # an entry: the next is a hit
    monkeypatch.setenv("NSYSSCOPE_CACHE_MAX", "lots")
    one_error_line(run("cache", "info"), 2)
    # refused on a cache hit too, before any work (only a miss read it, after writing)
    one_error_line(run("report", sample_path("case1")), 2)
    monkeypatch.setenv("NSYSSCOPE_CACHE_MAX", "9" * 400 + "T")  # an OverflowError: exit 70
    assert cache.max_bytes() is None and run("cache", "info").exit_code == 0


def test_cache_files_of_the_old_naming_are_the_default_folder_s(tmp_path, monkeypatch):
    """Cache files were named NAME-<16 hex>.sqlite before: in the default folder (nsysscope's
    own) they stayed forever, never counted, evicted or cleared. In a folder NSYSSCOPE_CACHE
    names (maybe the user's traces) such a name is left alone."""
    from nsysscope.trace import cache
    monkeypatch.delenv("NSYSSCOPE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    folder = cache.cache_dir()
    folder.mkdir(parents=True)
    old = folder / "h200_case1_300-8b391c870d154d38.sqlite"
    old.write_bytes(b"SQLite format 3\x00" + bytes(1000))
    assert [c.path for c in cache.entries()] == [old]
    assert cache.clear() == (1, 1016) and not old.exists()
    old.write_bytes(b"SQLite format 3\x00")
    monkeypatch.setenv("NSYSSCOPE_CACHE", str(folder))
    assert cache.entries() == [] and cache.clear() == (0, 0) and old.exists()


# -- --version is fast: no pandas, numpy or matplotlib ------------------------------------------

def test_version_imports_nothing_heavy():
    code = ("import sys; from nsysscope.cli import main; sys.argv = ['nsysscope', '--version']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('pandas', 'numpy', 'matplotlib') if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip().splitlines()[-1] == "[]", p.stdout + p.stderr


_SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def _trace(name: str) -> Path:
    return _SAMPLES / {"case1": "h200_case1_300.sqlite.xz"}[name]


@pytest.fixture(scope="module")
def summary_file(analysed, tmp_path_factory):
    folder = tmp_path_factory.mktemp("summaries")

    def get(name: str) -> Path:
        out = folder / f"{name}.json"
        if not out.exists():
            out.write_text(summary_json(analysed(name).summary), encoding="utf-8")
        return out
    return get


# -- the README says what the commands do --------------------------------------------------------

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_docs_list_every_exit_code_and_the_ci_snippet_every_gate_code():
    """Moved with their content out of the README (issue 55, item 18): the exit codes to
    docs/troubleshooting.md, the CI job to docs/gate.md."""
    codes = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    for code, _ in EXIT_CODES:
        assert f"\n| {code} | " in codes, code
    gate_doc = (DOCS / "gate.md").read_text(encoding="utf-8")
    snippet = gate_doc[gate_doc.index("name: overlap-gate"):
                       gate_doc.index("**Pull requests from forks")]
    comments = " ".join(line.strip().lstrip("#") for line in snippet.splitlines()
                        if line.strip().startswith("#"))
    for code in range(9):
        assert f"{code} " in comments, code
    assert "pip install nsysscope" not in README and "git+https://" in snippet
    assert "<!-- nsysscope-gate -->" in snippet and "--edit-last" not in snippet
    assert "--markdown gate.md --junit gate.xml --html gate.html" in snippet


def test_every_python_name_the_docs_give_exists():
    """A name like `nsysscope.export.per_launch_table` in the README or docs/ resolves: the
    per-launch doc named a module that does not exist (nsysscope.render.per_launch)."""
    import importlib
    import re
    root = Path(__file__).resolve().parents[2]
    texts = [README] + [p.read_text(encoding="utf-8") for p in (root / "docs").glob("*.md")]
    names = {m for text in texts
             for m in re.findall(r"`(nsysscope(?:\.[A-Za-z_]\w*)+)(?![\w/.])", text)}
    assert "nsysscope.export.per_launch_table" in names and len(names) > 8
    for name in sorted(names):
        parts = name.split(".")
        for i in range(len(parts), 0, -1):  # the longest importable module, then attributes
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            for attr in parts[i:]:
                assert hasattr(obj, attr), name
                obj = getattr(obj, attr)
            break


def test_readme_starts_with_a_quick_start_then_capture_and_documents_the_extras():
    """Issue 55, item 18: a ten-line quick start first (a virtual environment, the install,
    one report, the tests with the CPU torch, a picture), then how to capture; reference
    material in docs/, linked."""
    sections = [line for line in README.splitlines() if line.startswith("## ")]
    assert sections[:2] == ["## Quick start", "## Capture your engine"]
    quick = README[README.index("## Quick start"):README.index("## Capture your engine")]
    block = quick[quick.index("```bash\n") + 8:quick.index("\n```", quick.index("```bash"))]
    commands = block.splitlines()
    assert len(commands) <= 10
    assert commands[0].startswith("python3 -m venv .venv")
    assert any(c.startswith("nsysscope report sample_traces/") for c in commands)
    assert any("--extra-index-url https://download.pytorch.org/whl/cpu" in c for c in commands)
    assert any(c.startswith('python -m pytest -q -m "not slow"') for c in commands)
    assert any("savefig(" in c for c in commands)
    assert "15 to 40 minutes" in quick and "first five lines" in quick
    for extra in ("[parquet]", "[notebook]", "[dask]"):
        assert f"`{extra}`" in README
    assert "--capture-range=cudaProfilerApi" in README and "--delay" in README
    assert "`cuda_memcpy_async`" in README and "`cuda_api_sync`" in README
    for doc in ("report", "json", "gate", "database", "troubleshooting", "architecture"):
        assert f"](docs/{doc}.md)" in README, doc
    assert len(README.splitlines()) < 300  # reads in ten minutes (it was 1,539 lines)


def test_the_quick_start_shows_the_report_s_first_five_lines(sample_path, monkeypatch):
    """The lines the quick start explains are the report's, as the sample gives them."""
    repo = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(repo)
    shown = README[README.index("The report's first five lines"):]
    shown = shown[shown.index("```\n") + 4:shown.index("\n```", shown.index("```\n"))]
    r = run("report", "sample_traces/h200_case1_300.sqlite.xz", env={"COLUMNS": "80"})
    assert r.exit_code == 0 and r.stdout.splitlines()[:5] == shown.splitlines()


def test_cache_evicts_the_least_recently_used(tmp_path, monkeypatch):
    from nsysscope.trace import cache
    monkeypatch.setenv("NSYSSCOPE_CACHE", str(tmp_path))
    files = []
    for i, name in enumerate(("a", "b", "c")):
        f = tmp_path / f"{name}-{i:016x}.nsysscope-cache.sqlite"  # named as the cache names
        # its files
        f.write_bytes(b"x" * 1024)
        os.utime(f, ns=(10**18 + i * 10**9, 10**18 + i * 10**9))
        files.append(f)
    mtime = files[0].stat().st_mtime_ns
    cache.touch(files[0])  # a cache hit: "a" is now the most recently used ...
    assert files[0].stat().st_mtime_ns == mtime  # ... and its content time is kept
    os.utime(files[0], ns=(10**18 + 5 * 10**9, mtime))  # (used after the others, long ago)
    removed = cache.evict(keep=files[2], limit=2048)
    assert [c.path.name for c in removed] == [files[1].name]
    assert sorted(p.name for p in tmp_path.iterdir()) == [files[0].name, files[2].name]


def test_cache_keeps_what_another_run_may_be_reading(tmp_path, monkeypatch):
    """Eviction removed the entry the gate's other side, or another batch worker, had just
    written and was about to open again ("cannot open as SQLite"): entries used in the last
    ten minutes stay, over the cap; a dead run's temporary file untouched as long goes."""
    from nsysscope.trace import cache
    monkeypatch.setenv("NSYSSCOPE_CACHE", str(tmp_path))
    now = time.time_ns()
    old = tmp_path / f"old-{0:016x}.nsysscope-cache.sqlite"
    fresh = tmp_path / f"fresh-{1:016x}.nsysscope-cache.sqlite"
    dead, live = tmp_path / f".{old.name}.abc123.tmp", tmp_path / f".{fresh.name}.def456.tmp"
    for f in (old, fresh, dead, live):
        f.write_bytes(b"x" * 1024)
    for f, age_s in ((old, 3600), (fresh, 60), (dead, 3600), (live, 5)):
        os.utime(f, ns=(now - age_s * 10**9,) * 2)
    removed = cache.evict(limit=1)
    assert [c.path for c in removed] == [old]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([fresh.name, live.name])


@pytest.mark.parametrize("args, names", [
    # before: -o "" and --per-launch "" wrote to stdout and nowhere, exit 0; a trace named ""
    # was read as the current folder ("no trace files in this folder")
    (("report", "{t}", "-o", ""), "'-o' / '--output'"),
    (("report", "{t}", "--per-launch", ""), "'--per-launch'"),
    (("report", "{t}", "--perfetto", ""), "'--perfetto'"),
    (("report", ""), "'TRACE...'"),
    (("summarize", "{t}", "-o", ""), "'-o' / '--output'"),
    (("gate", "{t}", "{t}", "--junit", ""), "'--junit'"),
    (("gate", "{t}", ""), "'CANDIDATE'"),
    (("export", "{t}", "--perfetto", ""), "'--perfetto'"),
    (("scrub", "{t}", ""), "'[DST]'"),
])
def test_an_empty_file_name_is_a_usage_error(sample_path, args, names):
    """``-o "$OUT"`` with OUT unset, say: one line, exit 2, nothing on stdout."""
    r = run(*(a.format(t=sample_path("case1")) for a in args))
    assert one_error_line(r, 2).startswith(f"nsysscope: error: Invalid value for {names}: an "
                                           "empty file name (see '")
    assert r.stdout == ""


def test_a_trace_named_twice_is_one_trace_s_report(sample_path, tmp_path):
    """Issue 55, item 17: `report T T` gave the many-trace table for one trace."""
    t = str(sample_path("case1"))
    r = run("report", t, t)
    assert r.exit_code == 0
    assert r.stdout == run("report", t).stdout  # the one-trace report, byte for byte
    assert r.stderr == f"nsysscope: note: {t}: named more than once; analysed once\n"
    # a folder stays a table, however many traces it holds (scripts read its JSON)
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "rank0.sqlite.xz").symlink_to(t)
    r = run("report", tmp_path / "one", "--format", "json", "-j", "1")
    assert json.loads(r.stdout)["schema"] == "nsysscope.many/1"


def test_report_says_what_it_wrote(sample_path, tmp_path):
    """Issue 55, item 10: `report -o FILE`, `--perfetto` and `--per-launch` wrote in silence,
    where summarize, export and scrub say what they wrote."""
    t = str(sample_path("case1"))
    out, timeline, table = tmp_path / "r.md", tmp_path / "r.json.gz", tmp_path / "r.csv"
    r = run("report", t, "-o", out, "--perfetto", timeline, "--per-launch", table)
    assert r.exit_code == 0 and r.stdout == ""
    size = out.stat().st_size
    assert r.stderr.splitlines() == [
        f"per-launch table of {t} written to {table} (300 rows)",
        f"Perfetto timeline of {t} written to {timeline} (15119 events); open it in "
        "https://ui.perfetto.dev",
        f"report of {t} written to {out} (markdown, 293 steady launches, {size / 1024:.0f} KB): "
        "OVERLAP BROKEN: a GPU→CPU readback at phase 'sample' costs 37.8% of the GPU's time; "
        "fixing it -> up to ~1.58x launches/s (191.9 -> ~302.5)"]
    db = tmp_path / "all.db"
    r = run("report", t, "--per-launch", db)
    assert r.stderr == f"300 launches of {t} added to the per-launch database {db}\n"
    # stdout, /dev/stdout: nothing said
    assert run("report", t, "-o", "/dev/stdout").stderr == ""


def test_scrub_refuses_a_missing_destination_before_importing_pandas(tmp_path):
    """Issue 55, item 12: `scrub SRC` without DST took 3-4 s to be refused (1.5 s on an idle
    machine), importing pandas and the analysis first; its arguments are now checked first.
    Not timed: what it imports is what it costs."""
    src = tmp_path / "a.sqlite"
    src.write_bytes(b"x")
    code = ("import sys\nsys.argv = ['nsysscope', 'scrub', sys.argv[1]]\n"
            "from nsysscope.cli import main\n"
            "try:\n    main()\nexcept SystemExit as e:\n"
            "    print(e.code, 'pandas' in sys.modules, 'numpy' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code, str(src)], capture_output=True, text=True,
                       timeout=120)
    assert p.stdout.split() == ["2", "False", "False"], p.stdout + p.stderr
    assert p.stderr == ("nsysscope: error: give DST, or --in-place to replace SRC (see "
                        "'nsysscope scrub --help')\n")
