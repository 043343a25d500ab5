"""The private items scrub drops by default (host process list, program output, kernel string,
session UUID), the --keep-* options, compressed and .nsys-rep input, and --force."""

from __future__ import annotations

import gzip
import lzma
import shutil
import sqlite3
from collections import Counter

import pytest
from click.testing import CliRunner
from test_scrub import PROGRAM_OUTPUT, connect, sha256, table_rows

from nsysscope.cli import cli
from nsysscope.scrub import ScrubError, find_leaks, scrub
from nsysscope.scrub import context as scrub_context

PRIVATE = {"process_list", "program_output", "kernel", "session_id"}


def private_kinds(path, **keep) -> Counter:
    return Counter(lk.kind for lk in find_leaks(path, **keep) if lk.kind in PRIVATE)


def test_check_lists_private_items(raw_like):
    kinds = private_kinds(raw_like)
    # 3 processes + their 3 threads; stdout in ProcessStreams and ANALYSIS_FILE; uname -r/-v
    assert kinds == {"process_list": 6, "program_output": 2, "kernel": 2, "session_id": 1}
    where = {(lk.table, lk.key) for lk in find_leaks(raw_like) if lk.kind in PRIVATE}
    assert ("TARGET_INFO_SYSTEM_ENV", "SoftwareReleaseVersion") in where
    assert ("TARGET_INFO_SYSTEM_ENV", "KernelVersion") in where
    assert ("META_DATA_CAPTURE", "PROFILING_SESSION_UUID") in where
    assert private_kinds(raw_like, keep_process_list=True, keep_program_output=True,
                         keep_kernel_string=True, keep_session_uuid=True) == {}
    assert private_kinds(raw_like, keep_kernel_string=True)["kernel"] == 0


def test_default_drops_them(raw_like, tmp_path):
    out = tmp_path / "out.sqlite"
    scrub(raw_like, out)
    assert private_kinds(out) == {}
    data = out.read_bytes()
    for s in (PROGRAM_OUTPUT, "gpu-cloud", "b4f12def", "alice-notebook"):
        assert s.encode() not in data, s
    with connect(out) as c:
        # the log's name stays only in nsys's own message ("see <path>/pid_N_stdout.log")
        assert c.execute("SELECT COUNT(*) FROM StringIds "
                         "WHERE value LIKE '%pid_1082_stdout%'").fetchone()[0] == 0
        for t in ("ProcessStreams", "ANALYSIS_FILE"):
            assert c.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] == 0
        env = dict(c.execute("SELECT name, value FROM TARGET_INFO_SYSTEM_ENV"))
        assert "SoftwareReleaseVersion" not in env and "KernelVersion" not in env
        assert env["OsDescription"]  # the distribution stays
        meta = dict(c.execute("SELECT name, value FROM META_DATA_CAPTURE"))
        assert "PROFILING_SESSION_UUID" not in meta


@pytest.mark.parametrize("flag,table", [("keep_process_list", "PROCESSES"),
                                        ("keep_program_output", "ProcessStreams"),
                                        ("keep_kernel_string", "TARGET_INFO_SYSTEM_ENV"),
                                        ("keep_session_uuid", "META_DATA_CAPTURE")])
def test_keep_options(raw_like, tmp_path, flag, table):
    out = tmp_path / "out.sqlite"
    result = scrub(raw_like, out, **{flag: True})
    assert result.remaining == ()
    assert find_leaks(out, **{flag: True}) == []
    if table == "PROCESSES":
        # every process stays; the user's name joined to a process's name goes, as in any
        # text (it was kept whole: a name was searched for only as a word of its own)
        names = {row[2] for row in table_rows(out, "PROCESSES")}
        assert len(table_rows(raw_like, "PROCESSES")) == len(table_rows(out, "PROCESSES"))
        assert "user-notebook" in names and "alice-notebook" not in names
        assert len(table_rows(out, "ThreadNames")) == len(table_rows(raw_like, "ThreadNames"))
    elif table == "ProcessStreams":
        with connect(out) as c:
            assert c.execute("SELECT s.value FROM ProcessStreams p JOIN StringIds s "
                             "ON s.id = p.contentId").fetchone()[0] == PROGRAM_OUTPUT
            # kept, but scrubbed like any string: the path is no longer absolute
            assert c.execute("SELECT filename FROM ANALYSIS_FILE").fetchone()[0] == \
                "<path>/pid_1082_stdout.log"
    elif table == "TARGET_INFO_SYSTEM_ENV":
        with connect(out) as c:
            assert c.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV "
                             "WHERE name = 'KernelVersion'").fetchone()[0].startswith("#15")
    else:
        with connect(out) as c:
            assert c.execute("SELECT value FROM META_DATA_CAPTURE "
                             "WHERE name = 'PROFILING_SESSION_UUID'").fetchone()[0]


def test_compressed_input_never_modified(raw_like, tmp_path, monkeypatch):
    monkeypatch.setenv("NSYSSCOPE_CACHE", str(tmp_path / "cache"))
    xz, gz = tmp_path / "raw.sqlite.xz", tmp_path / "raw.sqlite.gz"
    with open(raw_like, "rb") as f, lzma.open(xz, "wb", preset=0) as g:
        shutil.copyfileobj(f, g)
    with open(raw_like, "rb") as f, gzip.open(gz, "wb", compresslevel=1) as g:
        shutil.copyfileobj(f, g)
    before = {p: sha256(p) for p in (xz, gz)}
    assert private_kinds(xz) == private_kinds(raw_like)
    plain = scrub(raw_like, tmp_path / "plain.sqlite")
    for src in (xz, gz):
        out = tmp_path / f"from-{src.suffix[1:]}.sqlite"
        r = scrub(src, out)
        assert r.remaining == () and r.rows_deleted == plain.rows_deleted
        assert find_leaks(out) == []
    # a compressed destination: xz, and it reads back
    r = scrub(gz, tmp_path / "out.sqlite.xz")
    assert r.remaining == () and find_leaks(tmp_path / "out.sqlite.xz") == []
    assert {p: sha256(p) for p in (xz, gz)} == before
    with pytest.raises(ScrubError, match=r"--in-place rewrites an uncompressed"):
        scrub(xz, in_place=True)


def test_nsys_rep_goes_through_the_resolver(raw_like, tmp_path, monkeypatch):
    """A .nsys-rep is exported by the same resolver as every other command's input."""
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"NVIDIA Tegra Profiler Report 2025@3@1@0 not a real report")
    seen = []

    def fake_resolve(path, nsys=None):
        seen.append((path, nsys))
        return raw_like

    monkeypatch.setattr(scrub_context, "resolve", fake_resolve)
    assert private_kinds(rep, nsys="/opt/nsys") == private_kinds(raw_like)
    scrub(rep, tmp_path / "out.sqlite", nsys="/opt/nsys")
    assert seen == [(rep, "/opt/nsys")] * 2
    assert find_leaks(tmp_path / "out.sqlite") == []


def test_existing_destination_needs_force(raw_like, tmp_path):
    dst = tmp_path / "out.sqlite"
    dst.write_bytes(b"previous")
    with pytest.raises(ScrubError, match="already exists; pass --force"):
        scrub(raw_like, dst)
    assert dst.read_bytes() == b"previous"
    scrub(raw_like, dst, force=True)
    assert find_leaks(dst) == []


def test_cli(raw_like, tmp_path):
    runner = CliRunner()
    r = runner.invoke(cli, ["scrub", "--check", str(raw_like)])
    assert r.exit_code == 1
    for kind in PRIVATE:
        assert f"[{kind}]" in r.output
    r = runner.invoke(cli, ["scrub", "--check", "--keep-process-list", "--keep-program-output",
                            "--keep-kernel-string", "--keep-session-uuid", str(raw_like)])
    # what is kept is not listed; the environment and paths still leak
    assert r.exit_code == 1 and not any(f"[{kind}]" in r.output for kind in PRIVATE)
    dst = tmp_path / "out.sqlite"
    r = runner.invoke(cli, ["scrub", str(raw_like), str(dst)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(cli, ["scrub", str(raw_like), str(dst)])
    assert r.exit_code == 2
    assert r.output.strip().count("\n") == 0
    assert r.output.startswith("nsysscope: error: ") and "--force" in r.output
    r = runner.invoke(cli, ["scrub", "--force", "--keep-session-uuid", str(raw_like), str(dst)])
    assert r.exit_code == 0, r.output
    with sqlite3.connect(dst) as c:
        assert c.execute("SELECT COUNT(*) FROM META_DATA_CAPTURE "
                         "WHERE name = 'PROFILING_SESSION_UUID'").fetchone()[0] == 1
    r = runner.invoke(cli, ["scrub", "--check", str(dst)])
    assert r.exit_code == 1 and "[session_id]" in r.output
    r = runner.invoke(cli, ["scrub", "--force", str(raw_like), str(dst)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(cli, ["scrub", "--check", str(dst)])
    assert r.exit_code == 0 and r.output.startswith("0 potential leaks in "), r.output


def _nsys() -> str | None:
    import os

    for c in (os.environ.get("NSYS"), shutil.which("nsys"), "/opt/nsys-2023.4/bin/nsys"):
        if c and shutil.which(c):
            return shutil.which(c)
    return None


@pytest.mark.slow
def test_a_real_nsys_rep(tmp_path, monkeypatch):
    """A report profiled now with the installed nsys: scrub exports it with the resolver every
    command uses, leaves it untouched, and drops what nsys recorded beside the trace."""
    import subprocess
    import sys

    nsys = _nsys()
    if nsys is None:
        pytest.skip("nsys is not installed")
    monkeypatch.setenv("NSYSSCOPE_CACHE", str(tmp_path / "cache"))
    proc = subprocess.run(
        [nsys, "profile", "-t", "osrt", "-s", "none", "--cpuctxsw=none", "-o",
         str(tmp_path / "tiny"), "-f", "true", sys.executable, "-c",
         "import time; print('a prompt'); [time.sleep(0.01) for _ in range(20)]"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300)
    rep = tmp_path / "tiny.nsys-rep"
    assert proc.returncode == 0 and rep.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    before = sha256(rep)
    kinds = private_kinds(rep, nsys=nsys)
    assert kinds["process_list"] > 0 and kinds["session_id"] == 1 and kinds["kernel"] >= 1
    out = tmp_path / "shared.sqlite"
    r = CliRunner().invoke(cli, ["scrub", "--nsys", nsys, str(rep), str(out)])
    assert r.exit_code == 0, r.output
    assert sha256(rep) == before and find_leaks(out) == []
    with connect(out) as c:  # the traced python process stays, the host's others go
        procs = c.execute("SELECT name FROM PROCESSES").fetchall()
        assert 0 < len(procs) < 5, procs


def test_check_counts_first_and_lists_with_v(raw_like):
    """Issue 55, item 16: `scrub --check` printed one line per leak (hundreds of paths in
    StringIds, 614 lines on the case-1 sample made raw-like, 1,097 on the reporter's) with
    the one environment variable somewhere among them. Now one line per table, column and
    kind, most first, a few examples each; -v adds every leak after."""
    from nsysscope.scrub import find_leaks

    leaks = find_leaks(raw_like)
    r = CliRunner(env={"COLUMNS": "80"}).invoke(cli, ["scrub", "--check", str(raw_like)])
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    groups = {(x.table, x.column, x.kind) for x in leaks}
    firsts = [line for line in lines if not line.startswith("      ")]
    assert len(firsts) == len(groups) + 1 < 40  # and the hint
    assert firsts[-1] == f"(counts per table, column and kind; -v lists each of the {len(leaks)})"
    counts = [int(line.split()[0]) for line in firsts[:-1]]
    assert counts == sorted(counts, reverse=True) and sum(counts) == len(leaks)
    assert max(len(line) for line in lines) <= 80
    paths = sum(x.kind == "abs_path" and x.table == "StringIds" for x in leaks)
    assert firsts[0].startswith(f"{paths}  StringIds.value [abs_path]: ") and paths > 100
    assert any("[env]: HOME=" in line for line in firsts)  # the environment, near the top
    assert r.stderr == f"{len(leaks)} potential leaks in {raw_like}\n"
    v = CliRunner(env={"COLUMNS": "80"}).invoke(cli, ["scrub", "--check", "-v", str(raw_like)])
    assert v.exit_code == 1
    listed = v.stdout.split("\n\n", 1)[1].splitlines()
    assert len(listed) == len(leaks) and listed[0].count("[") == 1
