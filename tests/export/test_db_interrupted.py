"""``--per-launch FILE.db`` writes a trace whole or not at all (issue 52, item 3): a full disk
(a real one: the run's file size limit), a killed run and the rows an older, interrupted
writer left behind, on real samples. sqlite-utils committed table by table: a full disk or an
interrupt left a trace's launches without its ``meta`` row, and the rerun added a second full
set (10,000 rows for a 5,000-launch trace)."""

from __future__ import annotations

import os
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nsysscope.trace import resolve

REPO = Path(__file__).resolve().parents[2]


def rows(db: Path, sql: str, *args) -> list[tuple]:
    with sqlite3.connect(db) as c:
        return c.execute(sql, args).fetchall()


def report(trace: Path, db: Path, limit: int | None = None, **kw) -> subprocess.Popen:
    """``report TRACE --per-launch DB`` in its own process; ``limit``: the most bytes it may
    write to a file (a full disk: writes past it fail, EFBIG)."""
    def full_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails, the run goes on
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return subprocess.Popen([sys.executable, "-m", "nsysscope", "report", str(trace),
                             "--per-launch", str(db)], cwd=REPO, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=full_disk if limit else None, **kw)


def finish(p: subprocess.Popen) -> tuple[int, str]:
    _, err = p.communicate(timeout=600)
    return p.returncode, err


def ok(p: subprocess.Popen) -> bool:
    """The run succeeded (its only line on stderr: what it added to the database)."""
    code, err = finish(p)
    return code == 0 and "error" not in err


@pytest.fixture(scope="module")
def exports(sample_path):
    """The samples decompressed (a run limited in file size writes no cache entry)."""
    return {n: resolve(sample_path(n)) for n in ("healthy", "case1", "case2")}


def launches_of(db: Path, trace: Path) -> int:
    return rows(db, "SELECT COUNT(*) FROM launches WHERE trace = ?", str(trace))[0][0]


def test_a_full_disk_leaves_the_database_as_it_was_and_the_rerun_writes_once(
        exports, tmp_path):
    db = tmp_path / "runs.db"
    for name in ("healthy", "case2"):
        assert ok(report(exports[name], db))
    before = rows(db, "SELECT trace, COUNT(*) FROM launches GROUP BY trace")
    size = db.stat().st_size
    # room for the trace's own part (about half the two traces' rows), not for adding it
    code, err = finish(report(exports["case1"], db, limit=size + size // 8))
    assert code == 2 and err.count("\n") == 1 and "cannot write" in err, err
    assert rows(db, "PRAGMA integrity_check") == [("ok",)]
    assert rows(db, "SELECT trace, COUNT(*) FROM launches GROUP BY trace") == before
    for table in ("blocks", "sites", "summary", "processes", "meta"):
        assert rows(db, f"SELECT COUNT(*) FROM {table} WHERE trace = ?",
                    str(exports["case1"])) == [(0,)], table
    assert [p.name for p in tmp_path.iterdir()] == ["runs.db"]  # no part left behind
    assert ok(report(exports["case1"], db))
    assert launches_of(db, exports["case1"]) == 300
    assert rows(db, "SELECT COUNT(*) FROM meta") == [(3,)]


def test_rows_left_without_their_meta_are_replaced_by_the_trace_id(exports, tmp_path):
    """What an interrupted older writer left: the trace's launches and blocks, no meta row.
    The rerun finds them by the trace's id in every table, not through meta."""
    db = tmp_path / "runs.db"
    assert ok(report(exports["case1"], db))
    with sqlite3.connect(db) as c:
        for table in ("launches", "blocks"):  # a second set, as the old writer left it
            c.execute(f"INSERT INTO {table} SELECT * FROM {table}")
        c.execute("DELETE FROM meta")
    assert launches_of(db, exports["case1"]) == 600
    assert ok(report(exports["case1"], db))
    assert launches_of(db, exports["case1"]) == 300
    (tid,) = rows(db, "SELECT trace_id FROM meta")[0]
    for table in ("launches", "blocks", "sites", "summary", "processes", "meta"):
        assert rows(db, f"SELECT DISTINCT trace_id FROM {table}") == [(tid,)], table


@pytest.mark.slow
@pytest.mark.parametrize("after_s", [0.0, 0.05, 0.3])
def test_a_run_killed_while_it_writes_leaves_all_or_nothing(exports, tmp_path, after_s):
    """SIGKILL once the trace's part is written (``after_s`` later): whatever the moment,
    the database holds none or all of the trace's rows, and the rerun exactly one set."""
    db = tmp_path / "runs.db"
    assert ok(report(exports["healthy"], db))
    p = report(exports["case1"], db)
    deadline = time.monotonic() + 300
    while p.poll() is None and time.monotonic() < deadline:
        parts = [f for f in tmp_path.iterdir() if f.name.endswith(".part")]
        if parts and parts[0].stat().st_size > 0:
            time.sleep(after_s)
            os.kill(p.pid, signal.SIGKILL)
            break
        time.sleep(0.005)
    p.communicate(timeout=60)
    assert rows(db, "PRAGMA integrity_check") == [("ok",)]
    n = launches_of(db, exports["case1"])
    meta = rows(db, "SELECT COUNT(*) FROM meta WHERE trace = ?", str(exports["case1"]))[0][0]
    assert (n, meta) in ((0, 0), (300, 1))
    for f in tmp_path.iterdir():  # the killed run's part, as a crash leaves it
        if f.name.endswith(".part"):
            f.unlink()
    assert ok(report(exports["case1"], db))
    assert launches_of(db, exports["case1"]) == 300
