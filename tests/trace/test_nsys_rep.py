"""``.nsys-rep`` input: exported with nsys, cached, and every way that can fail.

The real-nsys tests profile a tiny CPU-only Python program at test time (``nsys profile -t
osrt``, about 3 s) and run ``nsysscope report`` on the report in a subprocess: it must export
it (the cache appears beside the report, or in the user cache folder when the report's folder
is read-only), reuse that export on the next run, and say there is no CUDA data (exit 3).
They are skipped only when no nsys is installed (``$NSYS``, PATH, or ``/opt/nsys-2023.4``
from ``.ci/install-nsys.sh``).

``tests/data/nsys2025.3_tiny_redacted.nsys-rep`` is a real nsys 2025.3.1 report with its
environment and process list redacted byte for byte (``tests/data/redact_nsys_rep.py``):
nsys 2023.4 cannot read it, which must give exit 6 naming both versions.

The fake-nsys tests run everywhere: ``fake_nsys`` is a script that answers ``nsys export``
with a copy of the SQLite export the report names (:func:`fake_report`), and logs each
export. They check which report an export is recognised as, which no real capture can be
made to show: two reports of one size and modification time.
"""

from __future__ import annotations

import lzma
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from permissions import obeying_permissions
from test_bad_input import NO_DAC, _no_dac_works, assert_one_line_error, fingerprint, report

from nsysscope.trace.nsys.nsys_rep import report_version

DATA = Path(__file__).resolve().parents[1] / "data"
NEW_REPORT = DATA / "nsys2025.3_tiny_redacted.nsys-rep"
CPU_ONLY = DATA / "nsys2023.4_cpu_only_osrt.sqlite.xz"  # exit 3: no CUDA data
PARTIAL = DATA / "nsys2023.4_cuda13_partial.sqlite.xz"  # exit 7: the profiler lost the GPU data
NO_CUDA = ("no CUDA data in this trace (was it captured with -t cuda, and does the program use "
           "the GPU?)")


def no_nsys(rep: Path) -> str:
    """The advice without nsys: the export command for this report, ready to paste."""
    return ("install Nsight Systems (https://developer.nvidia.com/nsight-systems; Debian: package "
            "nsight-systems in non-free), or export it where nsys is and pass the .sqlite: "
            f"nsys export --type sqlite -o {rep.with_name('trace.sqlite')} {rep}")


def find_nsys() -> str | None:
    for candidate in (os.environ.get("NSYS"), shutil.which("nsys"), "/opt/nsys-2023.4/bin/nsys"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


NSYS = find_nsys()
needs_nsys = pytest.mark.skipif(NSYS is None, reason="nsys is not installed ($NSYS, PATH or "
                                                     "/opt/nsys-2023.4: .ci/install-nsys.sh)")


def nsys_version() -> str:
    out = subprocess.run([NSYS, "--version"], capture_output=True, text=True).stdout
    return re.search(r"(\d{4}\.\d+\.\d+(?:\.\d+)?)", out).group(1)


@pytest.fixture(scope="session")
def tiny_report(tmp_path_factory) -> Path:
    """A real report of a Python program with no CUDA, profiled now with the installed nsys."""
    if NSYS is None:
        pytest.skip("nsys is not installed")
    d = tmp_path_factory.mktemp("nsys-profile")
    proc = subprocess.run(
        [NSYS, "profile", "-t", "osrt", "-s", "none", "--cpuctxsw=none", "-o", str(d / "tiny"),
         "-f", "true", sys.executable, "-c", "import time; [time.sleep(0.01) for _ in range(20)]"],
        capture_output=True, text=True, cwd=d, timeout=300)
    rep = d / "tiny.nsys-rep"
    assert proc.returncode == 0 and rep.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    return rep


def place(src: Path, folder: Path, name: str = "run.nsys-rep") -> Path:
    if not src.exists():
        pytest.fail(f"{src} is missing: it matches *.nsys-rep in .gitignore, commit it with "
                    "git add -f")
    folder.mkdir(parents=True, exist_ok=True)
    dst = folder / name
    shutil.copy2(src, dst)
    return dst


def sqlite_ok(path: Path) -> bool:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as c:
        return c.execute("PRAGMA quick_check").fetchone()[0] == "ok" and \
            c.execute("SELECT count(*) FROM META_DATA_EXPORT").fetchone()[0] > 0


# -- with a real nsys ----------------------------------------------------------------------

@needs_nsys
@pytest.mark.slow  # runs nsys
def test_report_is_exported_beside_it_and_the_export_reused(tiny_report, tmp_path):
    rep = place(tiny_report, tmp_path / "traces")
    before = fingerprint(rep)
    first = report(rep, env={"NSYS": NSYS}, cwd=tmp_path)
    assert_one_line_error(first, 3, f"{rep}: {NO_CUDA}")
    cache = rep.with_name("run.nsysscope-cache.sqlite")
    assert sorted(p.name for p in rep.parent.iterdir()) == ["run.nsys-rep", cache.name]
    assert sqlite_ok(cache)
    stamp = (cache.stat().st_ino, cache.stat().st_mtime_ns)
    # the second run uses the export: it does not even need nsys
    second = report(rep, env={"NSYS": str(tmp_path / "no-such-nsys")}, cwd=tmp_path)
    assert_one_line_error(second, 3, f"{rep}: {NO_CUDA}")
    assert (cache.stat().st_ino, cache.stat().st_mtime_ns) == stamp, "exported again"
    assert fingerprint(rep) == before


@needs_nsys
@pytest.mark.slow  # runs nsys
def test_a_newer_report_is_exported_again(tiny_report, tmp_path):
    rep = place(tiny_report, tmp_path)
    assert report(rep, env={"NSYS": NSYS}).returncode == 3
    cache = rep.with_name("run.nsysscope-cache.sqlite")
    old = cache.stat().st_mtime_ns
    os.utime(rep, ns=(old + 10**9, old + 10**9))  # the report was replaced after the export
    assert report(rep, env={"NSYS": NSYS}).returncode == 3
    assert cache.stat().st_mtime_ns != old


@needs_nsys
@pytest.mark.slow  # runs nsys
def test_a_report_replaced_by_an_older_file_is_exported_again(tiny_report, tmp_path):
    """Another capture copied over the report keeping its own, older, time (``cp -p``,
    ``rsync -a``): the export beside it was newer than the report, so it was read as this
    capture's. nsysscope's export carries its report's time, and any other time is another
    report."""
    rep = place(tiny_report, tmp_path)
    assert report(rep, env={"NSYS": NSYS}).returncode == 3
    cache = rep.with_name("run.nsysscope-cache.sqlite")
    assert cache.stat().st_mtime_ns == rep.stat().st_mtime_ns
    first = cache.stat().st_ino
    older = rep.stat().st_mtime_ns - 7200 * 10**9
    os.utime(rep, ns=(older, older))
    # nsys must run again: with none to run, the export beside it is not used
    r = report(rep, env={"NSYS": str(tmp_path / "no-such-nsys")}, cwd=tmp_path)
    assert r.returncode == 6
    assert report(rep, env={"NSYS": NSYS}).returncode == 3
    assert cache.stat().st_ino != first and cache.stat().st_mtime_ns == older


@needs_nsys
@pytest.mark.slow  # runs nsys
def test_read_only_folder_exports_into_the_user_cache(tiny_report, tmp_path):
    why = _no_dac_works()
    if why:
        pytest.skip(why)
    folder = tmp_path / "readonly"
    rep = place(tiny_report, folder)
    cache = tmp_path / "user-cache"
    cache.mkdir()
    folder.chmod(0o555)
    try:
        before = fingerprint(rep)
        wrap = NO_DAC if os.geteuid() == 0 else []
        env = {"NSYS": NSYS, "NSYSSCOPE_CACHE": str(cache)}
        first = report(rep, env=env, wrap=wrap, cwd=tmp_path)
        assert_one_line_error(first, 3, f"{rep}: {NO_CUDA}")
        assert [p.name for p in folder.iterdir()] == ["run.nsys-rep"]
        exported = list(cache.iterdir())
        assert len(exported) == 1
        assert re.fullmatch(r"run-[0-9a-f]{16}\.nsysscope-cache\.sqlite", exported[0].name)
        assert sqlite_ok(exported[0])
        stamp = exported[0].stat().st_mtime_ns
        second = report(rep, env={**env, "NSYS": str(tmp_path / "no-such-nsys")}, wrap=wrap,
                        cwd=tmp_path)
        assert_one_line_error(second, 3, f"{rep}: {NO_CUDA}")
        assert exported[0].stat().st_mtime_ns == stamp
        assert fingerprint(rep) == before
    finally:
        folder.chmod(0o755)


@needs_nsys
@pytest.mark.slow  # runs nsys
def test_two_processes_export_one_report_without_a_torn_cache(tiny_report, tmp_path):
    rep = place(tiny_report, tmp_path / "shared")
    before = fingerprint(rep)
    env = dict(os.environ, NSYS=NSYS)
    cmd = [sys.executable, "-m", "nsysscope", "report", str(rep)]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=False):
        assert p.returncode == 3 and err == f"nsysscope: error: {rep}: {NO_CUDA}\n", err
    names = sorted(p.name for p in rep.parent.iterdir())
    assert names == ["run.nsys-rep", "run.nsysscope-cache.sqlite"], names  # no temporary files
    assert sqlite_ok(rep.with_name("run.nsysscope-cache.sqlite"))
    assert fingerprint(rep) == before


@needs_nsys
@pytest.mark.slow  # runs nsys
def test_nsys_too_old_for_the_report_names_both_versions(tmp_path):
    have = nsys_version()
    if tuple(map(int, have.split(".")[:2])) >= (2025, 3):
        pytest.skip(f"nsys {have} can read a 2025.3 report")
    rep = place(NEW_REPORT, tmp_path / "new", "new2025.nsys-rep")
    before = fingerprint(rep)
    proc = report(rep, env={"NSYS": NSYS}, cwd=tmp_path)
    assert_one_line_error(proc, 6, (
        f"{rep}: nsys {have} cannot read this report (made by nsys 2025.3.1); export it with "
        "nsys 2025.3.1 or newer: nsys export --type sqlite new2025.nsys-rep, and pass the .sqlite"))
    # nsys leaves a partial export behind when it fails: nsysscope removes it
    assert [p.name for p in rep.parent.iterdir()] == ["new2025.nsys-rep"]
    assert fingerprint(rep) == before


@needs_nsys
@pytest.mark.slow  # runs nsys
def test_a_corrupt_report_is_an_unreadable_file(tmp_path):
    rep = tmp_path / "junk.nsys-rep"
    rep.write_bytes(b"NVIDIA Tegra Profiler Report 2023@4@4@54\n" + bytes(range(256)) * 8)
    proc = report(rep, env={"NSYS": NSYS}, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"nsysscope: error: {rep}: ")
    assert proc.stderr.count("\n") == 1
    assert [p.name for p in tmp_path.iterdir()] == ["junk.nsys-rep"]


# -- without nsys --------------------------------------------------------------------------

def test_no_nsys_says_how_to_install_or_export_by_hand(tmp_path):
    rep = place(NEW_REPORT, tmp_path, "trace.nsys-rep")
    before = fingerprint(rep)
    proc = report(rep, env={"NSYS": None, "PATH": str(tmp_path / "empty-bin")}, cwd=tmp_path)
    assert_one_line_error(proc, 6, f"{rep}: reading a .nsys-rep needs nsys, and none was found "
                                   f"(--nsys, $NSYS or PATH): {no_nsys(rep)}")
    assert fingerprint(rep) == before
    assert [p.name for p in tmp_path.iterdir()] == ["trace.nsys-rep"]


def test_nsys_variable_naming_nothing_runnable(tmp_path):
    rep = place(NEW_REPORT, tmp_path, "trace.nsys-rep")
    missing = tmp_path / "bin" / "nsys"
    proc = report(rep, env={"NSYS": str(missing)}, cwd=tmp_path)
    assert_one_line_error(proc, 6, f"{rep}: $NSYS={missing}: no such program; {no_nsys(rep)}")
    text = tmp_path / "nsys.txt"
    text.write_text("not a program")
    proc = report(rep, "--nsys", str(text), cwd=tmp_path)
    assert_one_line_error(proc, 6, f"{rep}: --nsys={text} is not executable; {no_nsys(rep)}")
    proc = report(rep, env={"NSYS": str(tmp_path)}, cwd=tmp_path)  # said "no such program"
    assert_one_line_error(proc, 6, f"{rep}: $NSYS={tmp_path} is a folder; name the nsys "
                                   f"program in it (its bin/nsys), or {no_nsys(rep)}")


def test_report_version_is_read_from_old_headers_and_new_trailers(tmp_path):
    place(NEW_REPORT, tmp_path)  # fails clearly when the fixture was not committed
    assert report_version(NEW_REPORT) == "2025.3.1"  # the trailer: ...\n2025.3.1.0
    old = tmp_path / "old.nsys-rep"
    old.write_bytes(b"NVIDIA Tegra Profiler Report 2023@4@4@54-234433681190v0\n" + bytes(100))
    assert report_version(old) == "2023.4.4"
    none = tmp_path / "none.nsys-rep"
    none.write_bytes(b"NVIDIA Tegra Profiler Report 36398880.\n" + bytes(100))
    assert report_version(none) is None


# -- with a fake nsys ----------------------------------------------------------------------

FAKE_NSYS = """#!{python}
# nsys export: a copy of the SQLite file the report's second line names; each export logged
import shutil, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("NVIDIA Nsight Systems version 2023.4.4.54-234433681190v0")
elif args[:2] == ["export", "--help"]:
    print("usage: nsys export [<args>] <input-file>")
else:
    out, report = args[args.index("-o") + 1], args[-1]
    with open(report, "rb") as f:
        source = f.read().split(b"\\n")[1].decode()
    shutil.copyfile(source, out)
    with open({log!r}, "a") as f:
        f.write(source + "\\n")
"""


@pytest.fixture
def fake_nsys(tmp_path) -> tuple[Path, Path]:
    """A fake nsys (:data:`FAKE_NSYS`) and the log of the exports it made."""
    exe, log = tmp_path / "bin" / "nsys", tmp_path / "exports.log"
    exe.parent.mkdir()
    exe.write_text(FAKE_NSYS.format(python=sys.executable, log=str(log)))
    exe.chmod(0o755)
    return exe, log


def fake_report(path: Path, export_xz: Path) -> Path:
    """A "report" the fake nsys exports as ``export_xz`` (decompressed beside it), 64 KiB
    whatever it names: reports of one size."""
    export = path.with_name(path.name + ".source.sqlite")
    export.write_bytes(lzma.decompress(export_xz.read_bytes()))
    text = b"NVIDIA Tegra Profiler Report 2023@4@4@54\n" + os.fsencode(export) + b"\n"
    path.write_bytes(text.ljust(1 << 16, b"\0"))
    return path


def exports(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.mark.parametrize("where", ["beside", "user cache"])
def test_a_report_replaced_with_the_same_time_and_size_is_exported_again(fake_nsys, tmp_path,
                                                                         where):
    """Another capture copied over the report with the first one's time (``cp -p`` of a
    report, ``touch -r``): the export was recognised by its time alone, and the first
    capture's was read (exit 3, no CUDA data, for a capture whose GPU data was lost: 7)."""
    exe, log = fake_nsys
    folder = tmp_path / "traces"
    folder.mkdir()
    rep = fake_report(folder / "run.nsys-rep", CPU_ONLY)
    other = fake_report(tmp_path / "other.nsys-rep", PARTIAL)
    assert other.stat().st_size == rep.stat().st_size
    env = {"NSYS": str(exe), "NSYSSCOPE_CACHE": str(tmp_path / "user-cache")}
    wrap = obeying_permissions() if where == "user cache" else []
    if where == "user cache":
        folder.chmod(0o555)  # the export goes to the user cache folder
    try:
        assert_one_line_error(report(rep, env=env, wrap=wrap, cwd=tmp_path), 3,
                              f"{rep}: {NO_CUDA}")
        assert_one_line_error(report(rep, env=env, wrap=wrap, cwd=tmp_path), 3,
                              f"{rep}: {NO_CUDA}")
        assert exports(log) == 1  # the second run read the export
        stamp = rep.stat().st_mtime_ns
        shutil.copyfile(other, rep)
        os.utime(rep, ns=(stamp, stamp))
        proc = report(rep, env=env, wrap=wrap, cwd=tmp_path)
        assert proc.returncode == 7 and "lost the GPU data" in proc.stderr, proc.stderr
        assert exports(log) == 2
    finally:
        folder.chmod(0o755)
    # beside the report its one export is replaced; in the user cache each capture has an
    # entry of its own (its name holds the report's fingerprint), the first's left to eviction
    made = (sorted(folder.glob("*.nsysscope-cache.sqlite")) if where == "beside" else
            sorted((tmp_path / "user-cache").iterdir()))
    assert len(made) == (1 if where == "beside" else 2) and all(map(sqlite_ok, made))


def test_an_export_without_a_fingerprint_is_made_again(fake_nsys, tmp_path):
    """An export an older nsysscope left beside the report (its time, no fingerprint) is
    exported again, not read as this report's, nor an error."""
    exe, log = fake_nsys
    rep = fake_report(tmp_path / "run.nsys-rep", CPU_ONLY)
    old = rep.with_name("run.nsysscope-cache.sqlite")
    old.write_bytes(lzma.decompress(PARTIAL.read_bytes()))  # another capture's export
    stamp = rep.stat().st_mtime_ns
    os.utime(old, ns=(stamp, stamp))
    before = fingerprint(rep)
    assert_one_line_error(report(rep, env={"NSYS": str(exe)}, cwd=tmp_path), 3,
                          f"{rep}: {NO_CUDA}")
    assert exports(log) == 1 and fingerprint(rep) == before
    assert old.stat().st_mtime_ns == stamp and sqlite_ok(old)
    # read again: the new export is this report's
    assert_one_line_error(report(rep, env={"NSYS": str(exe)}, cwd=tmp_path), 3,
                          f"{rep}: {NO_CUDA}")
    assert exports(log) == 1
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("run.nsys-rep")) \
        == ["bin", "exports.log", "run.nsysscope-cache.sqlite"]  # no journal, no temporary


def test_without_nsys_an_export_without_a_fingerprint_is_read_with_a_note(fake_nsys, tmp_path):
    """Where no nsys can export the report again, the export an older nsysscope left beside it
    (the report's time, no fingerprint) is read, as that nsysscope read it, with a note; one
    stamped from another capture is not (exit 6)."""
    exe, log = fake_nsys
    rep = fake_report(tmp_path / "run.nsys-rep", CPU_ONLY)
    old = rep.with_name("run.nsysscope-cache.sqlite")
    old.write_bytes(lzma.decompress(CPU_ONLY.read_bytes()))
    stamp = rep.stat().st_mtime_ns
    os.utime(old, ns=(stamp, stamp))
    no_nsys_env = {"NSYS": None, "PATH": str(tmp_path / "empty-bin")}
    before = fingerprint(old)
    proc = report(rep, env=no_nsys_env, cwd=tmp_path)
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr == (
        "nsysscope: note: reading run.nsysscope-cache.sqlite, the export an earlier nsysscope "
        "made of run.nsys-rep: it has the report's time but no fingerprint to check it by, and "
        f"no nsys here can export the report again\nnsysscope: error: {rep}: {NO_CUDA}\n")
    assert fingerprint(old) == before
    # with nsys it is made again, stamped; then another capture's stamped export is not read
    assert_one_line_error(report(rep, env={"NSYS": str(exe)}, cwd=tmp_path), 3,
                          f"{rep}: {NO_CUDA}")
    assert exports(log) == 1
    shutil.copyfile(fake_report(tmp_path / "other.nsys-rep", PARTIAL), rep)
    os.utime(rep, ns=(stamp, stamp))
    proc = report(rep, env=no_nsys_env, cwd=tmp_path)
    assert proc.returncode == 6 and "needs nsys, and none was found" in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1
