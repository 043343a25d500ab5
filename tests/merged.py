"""Two real nsys exports as one: a data-parallel server of two tensor-parallel groups, made at
test time from the two-rank H200 captures (capturing one takes 4 GPUs; none were lent).

The second export's rows are added to a copy of the first in the tables nsysscope reads, its
strings numbered after the first's, its GPUs after the first's (two groups of a server run on
four GPUs) and its times moved by ``shift_ns``. Its processes keep their pids (the two
captures' differ), and correlation, stream and event ids stay as they are: nsys numbers them
per process. What nsysscope reads only of the first export (the capture's span, nsys's
diagnostics) stays the first's. Synthetic as a whole (the two captures never shared a clock),
real in every row; never a sample.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

#: the tables nsysscope reads a process's work from
TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
          "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
          "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_CUDA_EVENT", "NVTX_EVENTS",
          "ThreadNames", "PROCESSES")
#: tables merged where the second export has them (its graph replays traced whole)
OPTIONAL_TABLES = {"CUPTI_ACTIVITY_KIND_GRAPH_TRACE"}
#: their columns that hold a StringIds id
STRING_COLUMNS = {"CUPTI_ACTIVITY_KIND_RUNTIME": {"nameId"},
                  "CUPTI_ACTIVITY_KIND_KERNEL": {"demangledName", "shortName", "mangledName"},
                  "NVTX_EVENTS": {"textId", "jsonTextId"}, "ThreadNames": {"nameId"}}
TIME_COLUMNS = {"start", "end"}
DEVICE_COLUMNS = {"deviceId", "srcDeviceId", "dstDeviceId"}


def launches_start(db: Path) -> int:
    """When the export's first CUDA call starts (ns)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        return int(c.execute("SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0])


def merge_exports(a: Path, b: Path, dst: Path, shift_ns: int = 0) -> Path:
    """``a`` and ``b`` as one export at ``dst``, ``b``'s first CUDA call ``shift_ns`` after
    ``a``'s."""
    move = launches_start(a) - launches_start(b) + shift_ns
    shutil.copyfile(a, dst)
    c = sqlite3.connect(dst)
    try:
        c.execute("ATTACH ? AS b", (f"file:{b}?mode=ro",))
        offset = c.execute("SELECT MAX(id) + 1 FROM main.StringIds").fetchone()[0]
        c.execute("INSERT INTO main.StringIds SELECT id + ?, value FROM b.StringIds", (offset,))
        gpus = c.execute("SELECT MAX(deviceId) + 1 FROM main.CUPTI_ACTIVITY_KIND_KERNEL"
                         ).fetchone()[0]
        have = {r[0] for r in c.execute("SELECT name FROM b.sqlite_master WHERE type = 'table'")}
        for t in TABLES + tuple(OPTIONAL_TABLES & have):
            cols = [r[1] for r in c.execute(f"PRAGMA main.table_info('{t}')")]
            values = [f'"{col}" + {offset}' if col in STRING_COLUMNS.get(t, ())
                      else f'"{col}" + {move}' if col in TIME_COLUMNS
                      else f'"{col}" + {gpus}' if col in DEVICE_COLUMNS else f'"{col}"'
                      for col in cols]
            c.execute(f'INSERT INTO main."{t}" ({", ".join(f"{q}" for q in map(_quoted, cols))}) '
                      f'SELECT {", ".join(values)} FROM b."{t}"')
        c.commit()
    finally:
        c.close()
    return dst


def _quoted(name: str) -> str:
    return f'"{name}"'
