#!/usr/bin/env python3
"""Split an nsys SQLite export of several processes into one export per process, as nsys
writes them when each rank is profiled on its own (``srun nsys profile -o run_%q{SLURM_PROCID}
...``), and optionally move each file's clock.

Each output is a copy of the source with every table filtered to one process:

* rows with a ``globalPid``, ``globalTid`` (the pid above bit 24) or a plain pid column
  (``pid``, ``processId``) keep the process's rows only (``PROCESSES``, ``ThreadNames``, the
  CUDA activity tables, NVTX, the CUDA device, context and stream tables, program output,
  diagnostics); a row of no process (NULL) is kept: nsys writes those in every report;
* strings, enums, GPUs and the capture's metadata are kept whole, as a session of one rank
  on the same node records them.

The processes split out are those with CUDA calls (the launcher process of a server, with
none, is left out); their files are numbered in pid order.

Clocks (``--shift-ns``, ``--skew-ns``): file ``i`` has every time (``start``, ``end``,
``timestamp``, ``ANALYSIS_DETAILS``' span) moved by ``i * shift`` and its session start
(``TARGET_INFO_SESSION_START_TIME.utcEpochNs``) moved back by as much, so that the session
starts put the files on one time axis again, except for ``i * skew`` more on the session
start: a clock error the session start does not explain, as two nodes' clocks disagree.
``skew`` is what a job's alignment must find from the collectives (file ``i``'s timeline lies
``i * skew`` ahead of where its session start puts it).

Everything runs inside SQLite (``INSERT ... SELECT`` of each table's rows of one process,
``UPDATE`` of the times), the source is never changed.

Usage::

    python bench/split_ranks.py SRC.sqlite[.xz] OUTDIR [--shift-ns N] [--skew-ns N]
"""

from __future__ import annotations

import argparse
import lzma
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

PID_BITS = 24
GLOBAL_COLUMNS = ("globalPid", "globalTid")  # a row's process (endGlobalTid: the same one)
PID_COLUMNS = ("pid", "processId")
#: time columns moved with a file's clock, by table ("*": every table that has them)
TIME_COLUMNS = {"*": ("start", "end", "timestamp"),
                "ANALYSIS_DETAILS": ("startTime", "stopTime")}
SESSION = "TARGET_INFO_SESSION_START_TIME"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({_q(table)})")]


def processes(db: Path) -> list[int]:
    """The process keys (``globalPid >> 24``) of the export's processes with CUDA calls, in
    pid order."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        keys = [r[0] for r in c.execute(
            f"SELECT DISTINCT globalTid >> {PID_BITS} FROM CUPTI_ACTIVITY_KIND_RUNTIME")]
    return sorted(keys, key=lambda k: (k & ((1 << PID_BITS) - 1), k))


def _plain(src: Path, workdir: Path) -> Path:
    """``src`` as a plain SQLite file (an .xz decompressed into ``workdir``)."""
    if not src.name.endswith(".xz"):
        return src
    out = workdir / (src.name[:-3] or "source.sqlite")
    with lzma.open(src, "rb") as inp, open(out, "wb") as f:
        shutil.copyfileobj(inp, f, length=1 << 22)
    return out


def split(src: str | Path, out_dir: str | Path, shift_ns: int = 0,
          skew_ns: int = 0) -> list[Path]:
    """One export per process of ``src`` in ``out_dir`` (``NAME.rankI.sqlite``, I in pid
    order), file ``i``'s clock moved by ``i * shift_ns`` and its session start off by
    ``i * skew_ns`` (the module's doc). Returns the files written."""
    src, out = Path(src), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = src.name.split(".")[0]
    with tempfile.TemporaryDirectory(dir=out) as work:
        plain = _plain(src, Path(work))
        written = []
        for i, proc in enumerate(processes(plain)):
            dst = out / f"{stem}.rank{i}.sqlite"
            tmp = dst.with_suffix(".part")
            tmp.unlink(missing_ok=True)
            with sqlite3.connect(tmp) as c:
                _copy_process(c, plain, proc)
                _move_clock(c, i * shift_ns, i * skew_ns)
            c.close()
            tmp.replace(dst)
            written.append(dst)
    return written


def _copy_process(c: sqlite3.Connection, src: Path, proc: int) -> None:
    """Every table of ``src`` into ``c`` (its own ``CREATE`` text, then its indexes), with
    only ``proc``'s rows where a row names a process."""
    c.execute("ATTACH ? AS s", (f"file:{src}?mode=ro",))
    pid = proc & ((1 << PID_BITS) - 1)
    schema = c.execute("SELECT type, name, sql FROM s.sqlite_master WHERE sql IS NOT NULL "
                       "AND name NOT LIKE 'sqlite_%' ORDER BY type = 'index', rowid").fetchall()
    for kind, table, sql in schema:
        if kind != "table":
            continue
        c.execute(sql)
        cols = [r[1] for r in c.execute(f"PRAGMA s.table_info({_q(table)})")]
        own = next((col for col in GLOBAL_COLUMNS if col in cols), None)
        plain = next((col for col in PID_COLUMNS if col in cols), None)
        where = f"{_q(own)} IS NULL OR {_q(own)} >> {PID_BITS} = {proc}" if own else \
            f"{_q(plain)} IS NULL OR {_q(plain)} = {pid}" if plain else "1"
        c.execute(f"INSERT INTO main.{_q(table)} SELECT * FROM s.{_q(table)} WHERE {where}")
    for kind, _, sql in schema:
        if kind == "index":
            c.execute(sql)
    c.commit()
    c.execute("DETACH s")


def _move_clock(c: sqlite3.Connection, shift_ns: int, skew_ns: int) -> None:
    if not shift_ns and not skew_ns:
        return
    for (table,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        cols = _columns(c, table)
        timed = [col for col in TIME_COLUMNS.get(table, TIME_COLUMNS["*"]) if col in cols]
        if timed and table != SESSION:
            c.execute(f"UPDATE {_q(table)} SET " + ", ".join(
                f"{_q(col)} = {_q(col)} + {int(shift_ns)}" for col in timed))
    if "utcEpochNs" in _columns(c, SESSION):
        c.execute(f"UPDATE {SESSION} SET utcEpochNs = utcEpochNs - ?", (shift_ns - skew_ns,))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("src", type=Path)
    p.add_argument("out_dir", type=Path)
    p.add_argument("--shift-ns", type=int, default=0,
                   help="move file i's times by i * N ns (its session start back as much)")
    p.add_argument("--skew-ns", type=int, default=0,
                   help="and its session start off by i * N ns more (a clock error)")
    a = p.parse_args(argv)
    for path in split(a.src, a.out_dir, a.shift_ns, a.skew_ns):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
