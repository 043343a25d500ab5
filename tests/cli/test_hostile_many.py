"""The whole hostile set at once under ``report -j 2`` (issue 52): one folder holding the
real samples made hostile by the other tests' recipes (megabyte names with escapes and
Markdown in an nsys export and a torch.profiler capture, a frame naming
``/proc/self/environ``, calls recorded twice, correlation ids all equal, the calls' table a
view, a decompression bomb, random bytes after a ``{``) beside a clean capture. Each trace's
row says what it is in one printable line, the traces that can be read are analysed, the
run exits with the first failure's code, the many-trace Markdown stays inert, the
analyst's environment appears nowhere, and the per-launch database holds each analysed
trace's launches once."""

from __future__ import annotations

import gzip
import json
import lzma
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hostile import ATTACK, assert_printable, plant_kineto, plant_nsys  # tests/ on sys.path
from markdown_it import MarkdownIt

from nsysscope.trace import resolve

ROOT = Path(__file__).resolve().parents[2]
KINETO_CASE1 = ROOT / "sample_traces" / "kineto" / "h200_kineto_case1_60.pt.trace.json.gz"
SECRET = "nsysscope-planted-secret-5d1e"


@pytest.fixture(scope="module")
def hostile_folder(sample_path, tmp_path_factory):
    d = tmp_path_factory.mktemp("many") / "traces"
    d.mkdir()
    case1 = resolve(sample_path("case1"))
    shutil.copy(case1, d / "a_clean.sqlite")
    plant_nsys(case1, d / "b_names.sqlite")
    plant_kineto(d / "c_names.pt.trace.json.gz", 16 * 1024)
    for name, sql in {
        "d_twice": "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME "
                   "SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME",
        "e_corr": "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET correlationId = 1",
        "f_view": "ALTER TABLE CUPTI_ACTIVITY_KIND_RUNTIME RENAME TO calls; "
                  "CREATE VIEW CUPTI_ACTIVITY_KIND_RUNTIME AS SELECT * FROM calls",
    }.items():
        shutil.copy(case1, d / f"{name}.sqlite")
        with sqlite3.connect(d / f"{name}.sqlite") as c:
            c.executescript(sql)
    data = json.loads(gzip.decompress(KINETO_CASE1.read_bytes()))
    for e in data["traceEvents"]:  # the culprit frame names the environment
        if e.get("name") == "engine_under_test/sampler.py(50): finish_sampling":
            e["name"] = "/proc/self/environ(1): <lambda>"
    (d / "g_environ.pt.trace.json.gz").write_bytes(gzip.compress(json.dumps(data).encode(),
                                                                 compresslevel=1))
    (d / "h_bomb.sqlite.xz").write_bytes(lzma.compress(case1.read_bytes()[:4096] +
                                                       bytes(100 << 20), preset=1))
    # not taken for a trace in a folder (its content is no JSON trace's): named as well
    (d / "i_random.json").write_bytes(b"{" + os.urandom(2000))
    return d


@pytest.fixture(scope="module")
def many(hostile_folder):
    out = hostile_folder.parent
    env = {**os.environ, "CI_JOB_TOKEN": SECRET}
    runs = {}
    for name, args in {"text": [], "md": ["-o", str(out / "many.md")],
                       "json": ["--format", "json", "--per-launch", str(out / "many.db")]
                       }.items():
        runs[name] = subprocess.run(
            [sys.executable, "-m", "nsysscope", "report", str(hostile_folder),
             str(hostile_folder / "i_random.json"), "-j", "2", *args],
            capture_output=True, text=True, timeout=900, cwd="/proc/self", env=env)
    return runs, out


@pytest.mark.slow
def test_every_hostile_trace_at_once_under_j2(many, hostile_folder):
    runs, out = many
    for name, r in runs.items():
        # the first failed trace's code: the correlation ids' (5); one error line at the end
        assert r.returncode == 5, (name, r.stderr)
        assert "Traceback" not in r.stdout + r.stderr
        assert r.stderr.count("nsysscope: error:") == 1, r.stderr
        for text in (r.stdout, r.stderr):
            assert_printable(text, name)
            assert SECRET not in text and "CI_JOB_TOKEN" not in text
    rows = {t["path"].rsplit("/", 1)[-1]: t for t in json.loads(runs["json"].stdout)["traces"]}
    assert len(rows) == 9
    codes = {name: row.get("exit_code", 0) for name, row in rows.items()}
    assert codes == {"a_clean.sqlite": 0, "b_names.sqlite": 0, "c_names.pt.trace.json.gz": 0,
                     "d_twice.sqlite": 0, "e_corr.sqlite": 5, "f_view.sqlite": 5,
                     "g_environ.pt.trace.json.gz": 0, "h_bomb.sqlite.xz": 2,
                     "i_random.json": 2}
    for name, row in rows.items():
        if codes[name]:
            assert "\n" not in row["error"] and row["error"], name
    md = (out / "many.md").read_text()
    assert_printable(md)
    assert SECRET not in md and ATTACK[:2] not in md
    tokens = [t for tok in MarkdownIt("commonmark").enable("table").parse(md)
              for t in (tok, *(tok.children or []))]
    assert not {t.type for t in tokens} & {"link_open", "image", "html_inline", "html_block"}
    with sqlite3.connect(out / "many.db") as c:
        counts = dict(c.execute("SELECT trace, COUNT(*) FROM launches GROUP BY trace"))
        dumped = repr(c.execute("SELECT * FROM sites").fetchall())
    assert SECRET not in dumped
    by_name = {k.rsplit("/", 1)[-1]: v for k, v in counts.items()}
    assert by_name["a_clean.sqlite"] == by_name["d_twice.sqlite"] == 300  # read once
    assert by_name["c_names.pt.trace.json.gz"] == by_name["g_environ.pt.trace.json.gz"] == 60
    assert set(by_name) == {n for n, c in codes.items() if c == 0}
