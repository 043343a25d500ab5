"""A trace names the files its Python frames come from, and those names are the sender's: a
shared trace must not make nsysscope read, and print, a file outside the source root the user
gave (issue 52, item 1). The attacks are planted in a real torch.profiler capture of the
case-1 engine, whose stall's culprit frame is ``engine_under_test/sampler.py(50):
finish_sampling``; ``<lambda>`` as the function skips the check that the line lies in a
``def`` of that name, as an attacker would."""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from nsysscope import analyze, load
from nsysscope.analysis import AnalysisConfig
from nsysscope.analysis.source_lines import MAX_SOURCE_BYTES, MAX_TEXT

ROOT = Path(__file__).resolve().parents[2]
KINETO_CASE1 = ROOT / "sample_traces" / "kineto" / "h200_kineto_case1_60.pt.trace.json.gz"
CULPRIT = "engine_under_test/sampler.py(50): finish_sampling"
SECRET = "nsysscope-planted-secret-7f3a9c"


def plant(frame: str, dst: Path) -> Path:
    """The case-1 capture with its culprit frame renamed ``frame`` (``file(line): function``)."""
    data = json.loads(gzip.decompress(KINETO_CASE1.read_bytes()))
    hits = 0
    for e in data["traceEvents"]:
        if e.get("name") == CULPRIT:
            e["name"] = frame
            hits += 1
    assert hits > 50  # one per step: the frame every stall is blamed on
    dst.write_bytes(gzip.compress(json.dumps(data).encode()))
    return dst


def top_source(trace: Path, root: Path):
    src = analyze(load(trace), AnalysisConfig(source_root=str(root))).summary.sites[0].source
    assert src is not None
    return src


@pytest.fixture
def layout(tmp_path):
    """``root/`` (the source root) and, beside it, ``secret.py`` holding the secret."""
    root = tmp_path / "root"
    (root / "pkg").mkdir(parents=True)
    (tmp_path / "secret.py").write_text(f"TOKEN = '{SECRET}'\n")
    return root


@pytest.mark.parametrize("frame", [
    "{outside}(1): <lambda>",                 # an absolute path outside the root
    "../secret.py(1): <lambda>",              # climbing out of the root
    "pkg/../../secret.py(1): <lambda>",
    "pkg/link.py(1): <lambda>",               # a link under the root to a file outside it
    "/etc/passwd(1): <lambda>",               # not Python
    "/proc/self/environ(1): <lambda>",
])
def test_no_file_outside_the_root_is_read(layout, tmp_path, frame):
    (layout / "pkg" / "link.py").symlink_to(tmp_path / "secret.py")
    trace = plant(frame.format(outside=tmp_path / "secret.py"), tmp_path / "t.json.gz")
    src = top_source(trace, layout)
    assert src.line == 1 and src.text is None  # the line is named, its text not read


def test_a_huge_or_binary_python_file_is_not_read(layout, tmp_path):
    (layout / "big.py").write_text(f"TOKEN = '{SECRET}'\n" + "#" * MAX_SOURCE_BYTES)
    (layout / "bin.py").write_bytes(f"TOKEN = '{SECRET}'\n\0".encode())
    for name in ("big.py", "bin.py"):
        assert top_source(plant(f"{name}(1): <lambda>", tmp_path / "t.json.gz"), layout) \
            .text is None


def test_a_path_from_another_machine_is_found_by_its_end_and_cut(layout, tmp_path):
    line = "x = " + " + ".join(["value"] * 100)
    (layout / "pkg" / "far.py").write_text(f"{line}\n")
    trace = plant("/home/dev/serving/pkg/far.py(1): <lambda>", tmp_path / "t.json.gz")
    text = top_source(trace, layout).text
    assert text == line[:MAX_TEXT - 1] + "\u2026"
    # the real frame, recorded as an absolute path on the capture machine
    trace = plant(f"/home/dev/{CULPRIT}", tmp_path / "t.json.gz")
    src = top_source(trace, ROOT)
    assert src.text is not None and src.text.startswith("def finish_sampling(")


def test_the_environment_never_reaches_any_output(tmp_path):
    """``/proc/self/environ`` as the culprit frame, the analyst's environment holding a
    token: every output of ``report`` (text, JSON, Markdown, HTML, the per-launch CSV and
    database, the many-trace table under ``-j 2``) and the gate's PR comment are free of it."""
    trace = plant("/proc/self/environ(1): <lambda>", tmp_path / "hostile.json.gz")
    env = {**os.environ, "CI_JOB_TOKEN": SECRET}

    def run(*args: str) -> str:
        res = subprocess.run([sys.executable, "-m", "nsysscope", *args], cwd="/proc/self",
                             env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode in (0, 1), res.stderr
        return res.stdout + res.stderr

    out = [run("report", str(trace), "--per-launch", str(tmp_path / "l.csv")),
           run("report", str(trace), "-o", str(tmp_path / "r.json"),
               "--per-launch", str(tmp_path / "l.db")),
           run("report", str(trace), "-o", str(tmp_path / "r.md")),
           run("report", str(trace), "-o", str(tmp_path / "r.html")),
           run("report", str(trace), str(trace), "-j", "2"),
           run("gate", str(KINETO_CASE1), str(trace), "--markdown", str(tmp_path / "g.md"))]
    assert "/proc/self/environ" in out[0]  # the frame is named: the site is right
    for f in ("l.csv", "r.json", "r.md", "r.html", "g.md"):
        out.append((tmp_path / f).read_text())
    with sqlite3.connect(tmp_path / "l.db") as db:
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            out.append(repr(db.execute(f'SELECT * FROM "{table}"').fetchall()))
    for text in out:
        assert SECRET not in text
        assert "CI_JOB_TOKEN" not in text
