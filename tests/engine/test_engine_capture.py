"""The capture driver (sample_traces/capture.py) on a CPU, with a stand-in for nsys.

The stand-in runs the profiled command and writes a small file where nsys would export its
SQLite, so every kind of spec (plain, pair, kineto, sleep), the budget, the per-capture
timeout, the log files and the packing are exercised without a GPU.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

pytest.importorskip("torch")
if not (shutil.which("xz") and shutil.which("timeout")):
    pytest.skip("needs xz and timeout", allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]
DRIVER = REPO / "sample_traces" / "capture.py"

FAKE_NSYS = """#!/bin/bash
out=$1; shift; [ "$1" = "--" ] && shift
echo "fake nsys: NSYS_FLAGS=[$NSYS_FLAGS]"
"$@" || exit $?
printf 'SQLite format 3 (stand-in)' > "$out.sqlite"
"""


def _drive(tmp_path: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    fake = tmp_path / "fake-nsys-capture.sh"
    fake.write_text(FAKE_NSYS)
    fake.chmod(0o755)
    env = dict(os.environ, NSYS_CAPTURE=str(fake), CAPTURE_PYTHON=sys.executable)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, str(DRIVER), *args, "--no-environment"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=timeout)


def test_driver_runs_every_kind_and_survives_failures(tmp_path):
    out = tmp_path / "out"
    proc = _drive(tmp_path, str(out),
                  "bad:healthy:0",  # the engine rejects --steps 0: logged, the rest runs
                  "a_case1:case1:6:aten:--batch 2 --tiny",
                  "sleep:0.2",
                  "pair:twoproc:4:--mode healthy --batch 2:--mode case1 --batch 2",
                  "kineto:k_outcopy:case1:4:--output-copy --batch 2",
                  "--pack", str(tmp_path / "packed"))
    assert proc.returncode == 1, proc.stdout + proc.stderr  # one capture failed
    files = {p.name for p in out.iterdir()}
    assert {"a_case1.sqlite.xz", "a_case1.json", "twoproc.sqlite.xz", "twoproc.gpu0.json",
            "twoproc.gpu1.json", "k_outcopy.pt.trace.json.gz", "k_outcopy.json",
            "commands.txt", "capture.log"} <= files
    assert "bad.sqlite.xz" not in files
    commands = (out / "commands.txt").read_text()
    for name in ("a_case1", "twoproc", "k_outcopy"):
        assert f"-- {name}: ok rc=0 wall=" in commands
    assert "-- bad: FAILED rc=2" in commands and "must be >= 1" in commands
    assert "failed or skipped: bad" in commands
    assert "[nsys --pytorch=autograd-nvtx]" in commands
    assert "mode=case1 steps=6" in commands  # the engine's result line
    log = (out / "capture.log").read_text()
    assert "NSYS_FLAGS=[--pytorch=autograd-nvtx]" in log and "total" in log
    assert subprocess.run(["xz", "-dc", str(out / "a_case1.sqlite.xz")], capture_output=True
                          ).stdout.startswith(b"SQLite format 3")
    pair = [json.loads((out / f"twoproc.gpu{g}.json").read_text()) for g in (0, 1)]
    assert [m["mode"] for m in pair] == ["healthy", "case1"]
    with gzip.open(out / "k_outcopy.pt.trace.json.gz", "rt") as f:
        assert any(e.get("name") == "step 3" for e in json.load(f)["traceEvents"])
    assert json.loads((out / "k_outcopy.json").read_text())["output_copy"] is True
    assert f"{out}:" in proc.stdout  # the listing at the end
    tars = sorted((tmp_path / "packed").iterdir())
    assert [t.name for t in tars] == ["out-part1.tar"]
    with tarfile.open(tars[0]) as t:
        assert {Path(n).name for n in t.getnames()} == files


def test_driver_timeout_kills_and_budget_skips(tmp_path):
    out = tmp_path / "out"
    proc = _drive(tmp_path, str(out), "slow:healthy:1000000::--tiny --batch 2", "sleep:10",
                  "late:healthy:5", "--timeout", "3", "--budget", "42.5", timeout=90)
    assert proc.returncode == 1
    commands = (out / "commands.txt").read_text()
    assert "TIMED OUT after 3 s" in commands and "-- slow: FAILED rc=124" in commands
    assert "-- late: SKIPPED (budget" in commands
    assert "failed or skipped: slow, late" in commands
    assert not (out / "late.json").exists()


def test_driver_rejects_a_malformed_spec_before_running_anything(tmp_path):
    for spec in ("x:healthy:5:--batch 2", "sleep:soon", "pair:p:5:--mode case1", "kineto:k:case1"):
        proc = _drive(tmp_path, str(tmp_path / "o"), "first:healthy:5", spec, timeout=60)
        assert proc.returncode != 0 and "malformed spec" in proc.stderr
        assert not (tmp_path / "o" / "commands.txt").exists()


@pytest.mark.parametrize("script, names", [
    ("capture_server.sh", ["tp2_healthy_100", "tp2_case1_100", "tp2_case1_rank0_py_100",
                           "outcopy_healthy_200", "outcopy_case1_200", "outcopy_case1_every8_200",
                           "twoproc_200", "poll_healthy_100", "poll_case1_100",
                           "poll_async_case1_100"]),
    ("capture_runs.sh", [*(f"run{i}" for i in range(1, 6)), "case1_200", "case2_200", "both_200",
                         "kineto_healthy", "kineto_case1", "kineto_case2", "kineto_outcopy_case1",
                         "nsys_twin_healthy", "nsys_twin_case1", "nsys_twin_case2",
                         "nsys_twin_outcopy_case1"]),
])
def test_capture_scripts_list_the_planned_captures(tmp_path, script, names):
    proc = subprocess.run(["bash", str(REPO / "sample_traces" / script), str(tmp_path / "o")],
                          cwd=REPO, env=dict(os.environ, CAPTURE_ARGS="--dry-run"),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = [line.split(":")[0][3:] for line in proc.stdout.splitlines()
           if line.startswith("== ") and not line.startswith(("== sleep", "== done"))]
    assert got == names
    commands = {line.split(":")[0][3:]: line for line in proc.stdout.splitlines()
                if line.startswith("== ")}
    if script == "capture_runs.sh":  # each torch.profiler capture has an nsys twin
        for mode in ("healthy", "case1", "case2", "outcopy_case1"):
            kineto = commands[f"kineto_{mode}"].split("--torch-profile")[0].split(": ", 1)[1]
            assert kineto.strip() in commands[f"nsys_twin_{mode}"]
        assert proc.stdout.count("== sleep 5 s") == 4
        # as the committed twins were captured (sample_traces/README.md; their exports'
        # META_DATA_CAPTURE says so): 60 steps of 16 layers
        assert all("--steps 60 --layers 16" in commands[n] for n in names if "twin" in n
                   or "kineto" in n)
    else:
        assert "--python-sampling=true" in commands["tp2_case1_rank0_py_100"]
        assert "CUDA_VISIBLE_DEVICES=0" in commands["twoproc_200"]
        assert "CUDA_VISIBLE_DEVICES=1" in commands["twoproc_200"]


def test_capture_runs_twins2_are_the_no_stack_captures_and_their_twins(tmp_path):
    """"Device run D" (sample_traces/README.md) had no script: each torch.profiler capture
    without stacks, then its nsys twin of the same command."""
    proc = subprocess.run(["bash", str(REPO / "sample_traces" / "capture_runs.sh"),
                           str(tmp_path / "o"), "twins2"], cwd=REPO,
                          env=dict(os.environ, CAPTURE_ARGS="--dry-run"), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines()
             if line.startswith("== ") and not line.startswith("== done")]
    modes = ("healthy", "case1", "case2", "outcopy_case1")
    assert [line.split(":")[0][3:] for line in lines] == [
        n for m in modes for n in (f"kineto_nostack_{m}", f"nsys_twin2_{m}")]
    for kineto, nsys in zip(lines[::2], lines[1::2], strict=True):
        assert "--torch-profile-no-stack" in kineto and "--steps 60 --layers 16" in nsys
        assert nsys.split(": ", 1)[1].split(" --json")[0] in kineto
    assert "--mode case1 --steps 60 --layers 16 --output-copy" in lines[-1]


def test_the_portable_nsys_wrapper_profiles_and_exports(tmp_path):
    """capture.py's default nsys wrapper away from the H200 machine: a real nsys (2023.4 here)
    profiles a CPU-only program with the samples' flags and leaves an export nsysscope reads
    (and refuses, having no CUDA: exit 3)."""
    sys.path.insert(0, str(REPO / "tests" / "trace"))
    from test_nsys_rep import NSYS
    if NSYS is None:
        pytest.skip("nsys is not installed ($NSYS, PATH or /opt/nsys-2023.4: "
                    ".ci/install-nsys.sh)")
    out = tmp_path / "tiny"
    # as capture.py passes a :python capture's flags: nsys 2023.4's export has no
    # --include-json, and refused the whole command (no export)
    proc = subprocess.run(["bash", str(REPO / "sample_traces" / "nsys_capture.sh"), str(out),
                           "--", sys.executable, "-c", "print('hi')"],
                          env=dict(os.environ, NSYS=NSYS, NSYS_EXPORT_FLAGS="--include-json true"),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    knows_json = "include-json" in subprocess.run([NSYS, "export", "--help"], capture_output=True,
                                                  text=True).stdout
    assert knows_json or "--include-json left out" in proc.stderr
    assert out.with_suffix(".nsys-rep").is_file() and out.with_suffix(".sqlite").is_file()
    report = subprocess.run([sys.executable, "-m", "nsysscope", "report",
                             str(out.with_suffix(".sqlite"))], capture_output=True, text=True,
                            timeout=300)
    assert report.returncode == 3 and "no CUDA data in this trace" in report.stderr


@pytest.mark.parametrize("part, names", [
    ("graph", ["graph_healthy_200", "graph_case1_200", "graph_case2_200", "graph_both_200",
               "graph_outcopy_case1_200", "graph_poll_case1_100", "node_twin_healthy_200",
               "node_twin_case1_200", "node_twin_case2_200"]),
    ("pieces", ["pw24_graph_healthy_100", "pw24_graph_case1_100", "pw24_graph_case2_100",
                "pw24_node_case1_100", "pw24_graph_hostbound_60", "kineto_pw24_case1_40"]),
])
def test_capture_runs_graph_and_pieces_parts(tmp_path, part, names):
    """Device runs G and P (sample_traces/README.md): a ``:graph`` capture replaces the
    wrappers' base flags with --cuda-graph-trace=graph (nsys refuses the flag twice); the
    others keep the samples' per-node tracing."""
    proc = subprocess.run(["bash", str(REPO / "sample_traces" / "capture_runs.sh"),
                           str(tmp_path / "o"), part], cwd=REPO,
                          env=dict(os.environ, CAPTURE_ARGS="--dry-run"), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines()
             if line.startswith("== ") and not line.startswith("== done")]
    assert [line.split(":")[0][3:] for line in lines] == names
    for name, line in zip(names, lines, strict=True):
        graph = "graph" in name.split("_")[:2]
        assert line.endswith("--cuda-graph-trace=graph]") == graph, line
        assert line.endswith("[nsys]") != graph or name.startswith("kineto"), line
        assert ("--layers 24 --pieces 24" in line) == (part == "pieces")
