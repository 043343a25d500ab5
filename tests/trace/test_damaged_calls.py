"""Damage that was analysed as if it were a program (issue 52, item 8), planted with
``sqlite3`` in the real case-1 export and by editing the real case-1 torch.profiler capture:
each is now read with a note where what it meant is clear, or refused in one line (exit 5,
a damaged trace), where it read as another program; and a diagnosis names what is wrong,
not something else."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from nsysscope import analyze, load
from nsysscope.trace import resolve

ROOT = Path(__file__).resolve().parents[2]
KINETO_CASE1 = ROOT / "sample_traces" / "kineto" / "h200_kineto_case1_60.pt.trace.json.gz"


@pytest.fixture(scope="module")
def case1(sample_path):
    return resolve(sample_path("case1"))


def planted(case1: Path, tmp_path: Path, sql: str) -> Path:
    dst = tmp_path / "damaged.sqlite"
    shutil.copy(case1, dst)
    with sqlite3.connect(dst) as c:
        c.executescript(sql)
    return dst


def report(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nsysscope", "report", str(path)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


def refused(r: subprocess.CompletedProcess, code: int, says: str) -> None:
    assert (r.returncode, r.stdout) == (code, ""), r.stderr
    assert r.stderr.count("\n") == 1 and says in r.stderr, r.stderr


def test_calls_recorded_twice_are_read_once_with_a_note(case1, tmp_path):
    """Every CUDA call twice made every step two 'piecewise' launches (600 launches)."""
    t = load(planted(case1, tmp_path, "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME "
                                      "SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME"))
    s = analyze(t).summary
    assert s.launches == 300 and s.stalls["gpu_to_cpu"] == 293  # the sample's own figures
    assert any("4049 CUDA calls recorded twice" in n for n in s.notes)


@pytest.mark.parametrize("sql, says", [
    # every call's start and end moved by 2^62 ns on a third of them: a median overlap
    # window of -816.50 ms and a "fix" worth 1.00x
    ('UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = start + 4611686018427387904, '
     '"end" = "end" + 4611686018427387904 WHERE rowid % 3 = 0',
     "CUDA calls start outside the capture nsys recorded"),
    # every correlation id equal: read as healthy
    ("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET correlationId = 1; "
     "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET correlationId = 1",
     "4049 of 4049 CUDA calls share their correlation id"),
    # every thread NULL: "the profiler lost the GPU activity" (exit 7)
    ("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = NULL",
     "4049 of 4049 CUDA calls have no thread (globalTid NULL)"),
    # the calls' table a view: "no CUDA graph launches (..., 0 CUDA calls)" (exit 3)
    ("ALTER TABLE CUPTI_ACTIVITY_KIND_RUNTIME RENAME TO calls; "
     "CREATE VIEW CUPTI_ACTIVITY_KIND_RUNTIME AS SELECT * FROM calls",
     "CUPTI_ACTIVITY_KIND_RUNTIME is a view, not a table"),
])
def test_damage_that_read_as_another_program_is_refused(case1, tmp_path, sql, says):
    refused(report(planted(case1, tmp_path, sql)), 5, says)


@pytest.mark.parametrize("damage", ["null", "negative"])
def test_a_torch_profiler_trace_whose_syncs_lost_their_length_is_refused(tmp_path, damage):
    """Every cudaStreamSynchronize with ``dur: null`` (or negative): read as 0 long, and the
    case-1 capture was 'LAUNCH-BOUND'."""
    data = json.loads(gzip.decompress(KINETO_CASE1.read_bytes()))
    for e in data["traceEvents"]:
        if e.get("cat") == "cuda_runtime" and e["name"].startswith("cudaStreamSynchronize"):
            e["dur"] = None if damage == "null" else -e["dur"]
    dst = tmp_path / "damaged.pt.trace.json"
    dst.write_text(json.dumps(data))
    refused(report(dst), 5, "60 of 1350 CUDA calls have no usable time")


def test_random_bytes_after_a_brace_are_not_called_a_torch_profiler_trace(tmp_path):
    dst = tmp_path / "random.json"
    dst.write_bytes(b"{" + os.urandom(4000))
    r = report(dst)
    refused(r, 2, "not JSON, though it starts like it")
    assert "torch.profiler trace:" not in r.stderr
