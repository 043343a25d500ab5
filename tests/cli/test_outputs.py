"""What the command leaves behind when its output cannot be written whole, and what a closed or
full stream, a symbolic link, SIGTERM or Ctrl-C do to a run (found by a review's bad-input
hunt: each of these printed a traceback, changed the exit code a CI step reads, replaced a link
or left half a file).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from permissions import obeying_permissions  # tests/ is on sys.path

from nsysscope.util.atomic import atomic_file

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_traces"
CASE1 = SAMPLES / "h200_case1_300.sqlite.xz"


def nsysscope(*args: object, shell_suffix: str = "", env: dict | None = None,
              timeout: int = 180) -> subprocess.CompletedProcess:
    """``python -m nsysscope ARGS`` through bash (``shell_suffix``: redirections)."""
    quoted = " ".join(f"'{a}'" for a in args)
    e = {k: v for k, v in {**os.environ, **(env or {})}.items() if k != "NSYSSCOPE_DEBUG"}
    return subprocess.run(["bash", "-c", f"'{sys.executable}' -m nsysscope {quoted} "
                           f"{shell_suffix}"], capture_output=True, text=True, env=e,
                          timeout=timeout, cwd=REPO)


def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path):
    out = tmp_path / "report.html"
    out.write_text("old report")
    with pytest.raises(RuntimeError), atomic_file(out) as f:
        f.write(b"half a new rep")
        raise RuntimeError("disk full")
    assert out.read_text() == "old report" and os.listdir(tmp_path) == ["report.html"]


def test_a_symbolic_link_is_written_through_by_every_writer(tmp_path):
    """``report -o`` wrote through a link while ``--perfetto`` and ``scrub`` replaced the link
    with a regular file (which, as root, turned /dev/stdout into one for the whole machine)."""
    for name in ("r.html", "t.json.gz", "s.sqlite"):
        (tmp_path / f"real-{name}").write_text("old")
        (tmp_path / name).symlink_to(f"real-{name}")
    r = nsysscope("report", CASE1, "-o", tmp_path / "r.html", "--perfetto",
                  tmp_path / "t.json.gz")
    assert r.returncode == 0, r.stderr
    r = nsysscope("scrub", CASE1, tmp_path / "s.sqlite", "--force")
    assert r.returncode == 0, r.stderr
    for name in ("r.html", "t.json.gz", "s.sqlite"):
        assert (tmp_path / name).is_symlink(), name
        assert (tmp_path / f"real-{name}").stat().st_size > 10_000, name
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_name_for_stdout_is_written_in_place(tmp_path):
    """``--perfetto /dev/stdout > FILE`` must reach FILE through the open stream (run as
    root, replacing the name made /dev/stdout a regular file for the whole machine). Tested
    through a link of our own to /proc/self/fd/1, so that a regression replaces that link,
    not the machine's /dev/stdout."""
    out, link = tmp_path / "log", tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    out.write_text("")
    inode = out.stat().st_ino
    r = subprocess.run(["bash", "-c", f"{{ echo HEADER; '{sys.executable}' -m nsysscope report "
                        f"'{CASE1}' -o '{link}' --format json; echo FOOTER; }} >> '{out}'"],
                       capture_output=True, text=True, timeout=180, cwd=REPO)
    assert r.returncode == 0, r.stderr
    # at the stream's offset, not reopened (which truncated HEADER away, and FOOTER landed
    # inside the report), and not renamed over
    text = out.read_text()
    assert text.startswith("HEADER\n{") and text.endswith("}\nFOOTER\n"), text[:80]
    assert link.is_symlink() and out.stat().st_ino == inode


def test_dev_stdout_into_a_pipe_and_dev_null_are_outputs(tmp_path):
    """``-o /dev/stdout | jq`` exited 2 ("not a regular file ... name a file") whenever the
    stream was a pipe or a terminal, though the README names it; so did ``-o /dev/null``.
    A named pipe is still refused: the run would wait for a reader."""
    import json

    r = subprocess.run([sys.executable, "-m", "nsysscope", "summarize", str(CASE1), "-o",
                        "/dev/stdout"], capture_output=True, text=True, timeout=180, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["classes"]["gpu_to_cpu"] == 293  # the case-1 sample's stalls
    for out in ("/dev/null", "/dev/stderr"):
        r = subprocess.run([sys.executable, "-m", "nsysscope", "report", str(CASE1), "-o", out,
                            "--format", "json"], capture_output=True, text=True, timeout=180,
                           cwd=REPO)
        assert r.returncode == 0 and r.stdout == "", r.stderr
        assert (r.stderr == "") == (out == "/dev/null")
    assert json.loads(r.stderr)["classes"]["gpu_to_cpu"] == 293


def test_closed_or_full_streams_keep_the_exit_code():
    """The gate passes (exit 0) with stdout closed; a failed run keeps its own code when stderr
    is full; a full stdout is one line and exit 2 (each was a traceback and exit 1, which a
    CI step reads as 'regression found', or exit 70)."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    r = nsysscope("gate", CASE1, CASE1, shell_suffix=">&-")
    assert (r.returncode, r.stderr) == (0, "")
    r = nsysscope("report", REPO / "README.md", shell_suffix="2>/dev/full")
    assert r.returncode == 2
    r = nsysscope("report", CASE1, shell_suffix="> /dev/full")
    assert r.returncode == 2
    assert r.stderr == ("nsysscope: error: cannot write the output: No space left on "
                        "device\n")


def test_a_folder_that_may_not_be_entered_is_one_line(tmp_path):
    wrap = obeying_permissions()
    shut = tmp_path / "shut"
    shut.mkdir()
    trace = shut / "t.sqlite.xz"
    trace.write_bytes(CASE1.read_bytes())
    shut.chmod(0)
    try:
        r = subprocess.run([*wrap, sys.executable, "-m", "nsysscope", "report", str(trace)],
                           capture_output=True, text=True, timeout=120)
    finally:
        shut.chmod(0o755)
    assert r.returncode == 2, r.stderr
    assert r.stderr == f"nsysscope: error: {trace}: Permission denied\n"


def _start(args: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "nsysscope", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **env},
                            start_new_session=True, cwd=REPO)


def test_sigterm_cleans_up_like_ctrl_c(tmp_path):
    """A CI timeout's SIGTERM left the --no-cache folder (53 MB for the 5000-step sample)
    that the run promises to remove: now the run leaves through its clean-up, exit 143."""
    p = _start(["report", "--no-cache", str(SAMPLES / "h200_healthy_long_5000.sqlite.xz")],
               {"TMPDIR": str(tmp_path), "NSYSSCOPE_PROGRESS": "0"})
    deadline = time.monotonic() + 60
    while not any(tmp_path.glob("nsysscope-nocache-*/*")) and p.poll() is None and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    if p.poll() is not None:
        pytest.skip("the run ended before its temporary folder was seen")
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    assert err == "nsysscope: error: terminated (SIGTERM)\n"  # one line, as for Ctrl-C
    assert list(tmp_path.iterdir()) == []


def _group_size(pgid: int) -> int:
    """How many processes are in process group ``pgid`` (Linux /proc)."""
    n = 0
    for d in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        n += stat.rsplit(")", 1)[1].split()[2] == str(pgid)
    return n


def _batch(tmp_path: Path, n: int) -> subprocess.Popen:
    """``report`` of ``n`` links to the 5000-step sample, two workers, an empty cache in
    ``tmp_path/cache``, once both workers are into their traces."""
    (tmp_path / "cache").mkdir()
    for i in range(n):
        (tmp_path / f"t{i}.sqlite.xz").symlink_to(SAMPLES / "h200_healthy_long_5000.sqlite.xz")
    p = _start(["report", *sorted(map(str, tmp_path.glob("t*.sqlite.xz"))), "-j", "2"],
               {"NSYSSCOPE_PROGRESS": "0", "NSYSSCOPE_CACHE": str(tmp_path / "cache")})
    deadline = time.monotonic() + 60
    while _group_size(p.pid) < 5 and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)  # the parent, the resource tracker, the fork server, two workers
    time.sleep(0.5)  # the workers are into their traces
    if p.poll() is not None:
        pytest.skip("the run ended before the signal")
    return p


def test_ctrl_c_on_several_traces_is_one_line(tmp_path):
    """Ctrl-C reaches the parent and its worker processes: each worker printed a
    KeyboardInterrupt traceback (24 lines of stderr), and a worker that left at once kept its
    half-decompressed cache file."""
    p = _batch(tmp_path, 4)
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130
    assert err == "nsysscope: error: interrupted\n", err  # click printed an empty line first
    assert not [f for f in os.listdir(tmp_path / "cache") if f.endswith(".tmp")]


ONE_LINE = {signal.SIGINT: "nsysscope: error: interrupted\n",
            signal.SIGTERM: "nsysscope: error: terminated (SIGTERM)\n"}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_sent_as_timeout_sends_it_is_one_line(tmp_path, sig):
    """``timeout`` signals the command, then its whole group: the parent a second time, which
    broke into its clean-up (multiprocessing's join of the workers at exit) with a traceback
    of 20 lines."""
    p = _batch(tmp_path, 4)
    p.send_signal(sig)
    os.killpg(p.pid, sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + sig
    assert err == ONE_LINE[sig], err


def test_ctrl_c_while_the_workers_start_is_one_line(tmp_path):
    """Ctrl-C as the batch starts its fork server, which imports nsysscope for a second
    before it ignores Ctrl-C itself: it printed a KeyboardInterrupt traceback (16 lines)."""
    for i in range(2):
        (tmp_path / f"t{i}.sqlite.xz").symlink_to(SAMPLES / "h200_case1_300.sqlite.xz")
    p = _start(["report", str(tmp_path / "t0.sqlite.xz"), str(tmp_path / "t1.sqlite.xz"),
                "-j", "2"], {"NSYSSCOPE_PROGRESS": "0", "NSYSSCOPE_CACHE": str(tmp_path)})
    deadline = time.monotonic() + 60
    while _group_size(p.pid) < 3 and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)  # the parent, the resource tracker and the fork server
    if p.poll() is not None:
        pytest.skip("the run ended before the signal")
    time.sleep(0.2)  # into the fork server's imports
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130
    assert err == ONE_LINE[signal.SIGINT], err


def test_sigterm_stops_a_batch_without_finishing_it(tmp_path):
    """SIGTERM to the parent of a batch left the pool analysing on (80 small traces: 11 s,
    where `docker stop` kills after 10; here 4 s for the traces under way). The workers now
    stop within the DuckDB query they are in (well under a second on this machine)."""
    p = _batch(tmp_path, 16)
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 143 and time.monotonic() - t0 < 2
    assert err == "nsysscope: error: terminated (SIGTERM)\n"
    assert not [f for f in os.listdir(tmp_path / "cache") if f.endswith(".tmp")]


def test_a_file_name_that_is_not_utf8(tmp_path):
    """A trace named with bytes that are not UTF-8 was 'internal error: UnicodeEncodeError'
    (exit 70) in report, summarize, the JSON and HTML outputs and --per-launch: the name is
    now shown with U+FFFD where it cannot be decoded."""
    import json
    import lzma
    import sqlite3

    folder = os.fsencode(tmp_path)
    trace = folder + b"/\xff\xfe.sqlite"
    with open(trace, "wb") as f:
        f.write(lzma.decompress(CASE1.read_bytes()))
    for args in (["-o", folder + b"/r.json"], ["-o", folder + b"/r.html"],
                 ["--per-launch", folder + b"/l.db"]):
        r = subprocess.run([sys.executable, "-m", "nsysscope", "report", trace, *args],
                           capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "r.json").read_text())["trace"]["path"].endswith(
        "\ufffd\ufffd.sqlite")
    with sqlite3.connect(tmp_path / "l.db") as c:
        assert c.execute("SELECT COUNT(*) FROM launches").fetchone() == (300,)
    c.close()
    r = subprocess.run([sys.executable, "-m", "nsysscope", "summarize", trace, "-o",
                        folder + b"/s.json"], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_cache_clear_on_a_folder_it_may_not_write_fails(tmp_path):
    """It said 'removed 0 files' and exited 0, the entry still there."""
    wrap = obeying_permissions()
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / "t-0123456789abcdef.nsysscope-cache.sqlite").write_bytes(b"x" * 100)
    folder.chmod(0o555)
    try:
        r = subprocess.run([*wrap, sys.executable, "-m", "nsysscope", "cache", "clear"],
                           capture_output=True, text=True, timeout=60,
                           env={**os.environ, "NSYSSCOPE_CACHE": str(folder)})
    finally:
        folder.chmod(0o755)
    assert r.returncode == 2
    assert r.stderr == (f"nsysscope: error: {folder}: removed 0 files, but 1 could not be "
                        "removed (is the folder writable?)\n")


def test_scrub_in_place_through_a_link_scrubs_the_file_it_names(tmp_path):
    """``scrub --in-place link.sqlite`` replaced the link with a scrubbed copy and left the
    file it named, the one the user meant to share, as it was."""
    import lzma
    import sqlite3

    real, link = tmp_path / "real.sqlite", tmp_path / "link.sqlite"
    real.write_bytes(lzma.decompress(CASE1.read_bytes()))
    with sqlite3.connect(real) as c:
        sid = c.execute("SELECT MIN(id) FROM StringIds WHERE value LIKE 'cuda%'").fetchone()[0]
        c.execute("UPDATE StringIds SET value = 'log /home/alice/run.py' WHERE id = ?", (sid,))
    c.close()
    link.symlink_to(real.name)
    r = nsysscope("scrub", "--in-place", link)
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and b"/home/alice" not in real.read_bytes()


#: a program that sends itself Ctrl-C while the command line is being imported (when click is
#: first imported), then runs it as the `nsysscope` program does
_CTRL_C_IN_IMPORTS = """
import importlib.abc, os, signal, sys

class CtrlC(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "click":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, CtrlC())
sys.argv = ["nsysscope", "--version"]
from nsysscope.program import run
run()
"""


def test_ctrl_c_while_the_command_line_is_imported_is_one_line():
    """Issue 55, item 11: Ctrl-C in the first ~0.2 s (the imports of the command line) printed
    a 20-line KeyboardInterrupt traceback through importlib."""
    p = subprocess.run([sys.executable, "-c", _CTRL_C_IN_IMPORTS], capture_output=True,
                       text=True, timeout=60)
    assert (p.returncode, p.stderr, p.stdout) == (130, "nsysscope: error: interrupted\n", "")
    # and once imported, the program runs as before
    p = subprocess.run([sys.executable, "-m", "nsysscope", "--version"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.startswith("nsysscope, version ")
