"""Shared fixtures: the real H200 sample traces, analysed once per test session."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"

SAMPLE = {
    "healthy": "h200_healthy_300.sqlite.xz",
    "case1": "h200_case1_300.sqlite.xz",
    "case2": "h200_case2_300.sqlite.xz",
    "both": "h200_both_300.sqlite.xz",
    "case1_aten": "h200_case1_aten_300.sqlite.xz",
    "case1_tolist_every4": "h200_case1_tolist_every4_300.sqlite.xz",
    "case2_cpubound": "h200_case2_cpubound_300.sqlite.xz",
    "healthy_py": "h200_healthy_pysample_150.sqlite.xz",
    "case1_py": "h200_case1_pysample_150.sqlite.xz",
    "case2_py": "h200_case2_pysample_150.sqlite.xz",
    "healthy_long": "h200_healthy_long_5000.sqlite.xz",
    # several processes, side streams, polling (see sample_traces/README.md)
    "tp2_healthy": "h200_tp2_healthy_100.sqlite.xz",
    "tp2_case1": "h200_tp2_case1_100.sqlite.xz",
    "tp2_case1_rank0": "h200_tp2_case1_rank0_pysample_100.sqlite.xz",
    "twoproc": "h200_twoproc_healthy_case1_200.sqlite.xz",
    "outcopy_healthy": "h200_outcopy_healthy_200.sqlite.xz",
    "outcopy_case1": "h200_outcopy_case1_200.sqlite.xz",
    "outcopy_case1_every8": "h200_outcopy_case1_every8_200.sqlite.xz",
    "poll_healthy": "h200_poll_healthy_100.sqlite.xz",
    "poll_case1": "h200_poll_case1_100.sqlite.xz",
    "poll_async_case1": "h200_poll_async_case1_100.sqlite.xz",
    # one device session: five separate healthy runs, then case1, case2, both
    **{f"run{i}": f"runs/h200_run{i}_healthy_200.sqlite.xz" for i in range(1, 6)},
    "runs_case1": "runs/h200_runs_case1_200.sqlite.xz",
    "runs_case2": "runs/h200_runs_case2_200.sqlite.xz",
    "runs_both": "runs/h200_runs_both_200.sqlite.xz",
    # nsys's default --cuda-graph-trace=graph (one row per replay), and node-traced twins of
    # the same commands in the same device session
    **{f"graph_{m}": f"graph/h200_graph_{m}_200.sqlite.xz"
       for m in ("healthy", "case1", "case2", "both", "outcopy_case1")},
    **{f"node_twin_{m}": f"graph/h200_node_twin_{m}_200.sqlite.xz"
       for m in ("healthy", "case1", "case2")},
    # piecewise CUDA graphs: 24 layers in 24 graphs per step (vLLM's for mixed batches)
    **{f"pieces_{m}": f"pieces/h200_pw24_graph_{m}_100.sqlite.xz"
       for m in ("healthy", "case1", "case2")},
    "pieces_hostbound": "pieces/h200_pw24_graph_hostbound_60.sqlite.xz",
    # the same engine with 16 layers (2.6x the GPU work per step), nsys twin of a Kineto sample
    "twin_healthy": "kineto/h200_nsys_twin_healthy_60.sqlite.xz",
    "twin_case1": "kineto/h200_nsys_twin_case1_60.sqlite.xz",
    # a server under load: start-up, bursts and idle, batch buckets (sample_traces/server/)
    "srv_healthy": "server/h100_srv_healthy.sqlite.xz",
    "srv_case1": "server/h100_srv_case1.sqlite.xz",
    "srv_healthy_b2": "server/h100_srv_healthy_b2.sqlite.xz",
    "srv_spec": "server/h100_g_srv_spec.sqlite.xz",
}


@pytest.fixture(scope="session", autouse=True)
def _cache_dir(tmp_path_factory):
    """Decompressed samples go to one session folder, not the user's cache."""
    os.environ["NSYSSCOPE_CACHE"] = str(tmp_path_factory.mktemp("nsysscope-cache"))
    yield


#: Ctrl-C as the session began: Python's handler, or ignored where pytest was started in the
#: background (a shell's `cmd &` ignores SIGINT)
_CTRL_C = signal.getsignal(signal.SIGINT)


@pytest.fixture(autouse=True)
def _ctrl_c_as_the_session_has_it():
    """Every test ends with Ctrl-C as the session began with it, and not blocked: a test that
    leaves a handler or a block behind fails, as a later test's Ctrl-C would then be lost and
    that test hang (a notebook kernel that failed to start left asyncio's no-op handler)."""
    yield
    handler = signal.getsignal(signal.SIGINT)
    blocked = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set())
    signal.signal(signal.SIGINT, _CTRL_C)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if handler != _CTRL_C or blocked:
        pytest.fail(f"the test left Ctrl-C handled by {handler!r} (blocked: {blocked})")


@pytest.fixture(scope="session")
def sample_path():
    def path(name: str) -> Path:
        p = SAMPLES / SAMPLE[name]
        if not p.exists():
            pytest.fail(f"missing sample trace {p}")
        return p
    return path


_ANALYSES: dict = {}


@pytest.fixture(scope="session")
def analysed(sample_path):
    """``analysed("case1")`` -> the :class:`nsysscope.Analysis` of that sample (cached).

    Analysed from the repository root, as the README's commands run: the current directory
    is where source lines are looked up when no ``--source-root`` is given, and a test that
    moved to a temporary folder (``monkeypatch.chdir``) must not leave a cached analysis
    without its source text for the tests after it."""
    from nsysscope import analyze, load

    def get(name: str):
        if name not in _ANALYSES:
            with contextlib.chdir(ROOT):
                _ANALYSES[name] = analyze(load(sample_path(name)))
        return _ANALYSES[name]
    return get


@pytest.fixture(scope="session")
def engine_metrics():
    """What the engine measured on the GPU while each sample was captured."""
    data = json.loads((SAMPLES / "engine_metrics.json").read_text())["traces"]
    return lambda name: data[SAMPLE[name]]


@pytest.fixture(scope="session")
def dp2_tp2(sample_path, tmp_path_factory):
    """The two-rank captures (case 1 on both ranks, healthy) as one export of a data-parallel
    server of two tensor-parallel groups: tests/merged.py (no 4-GPU machine was lent to
    capture one). Their collectives overlap in time: the healthy group's first CUDA call 1 ms
    after the case-1 group's."""
    from merged import merge_exports

    from nsysscope.trace import resolve
    return merge_exports(resolve(sample_path("tp2_case1")), resolve(sample_path("tp2_healthy")),
                         tmp_path_factory.mktemp("dp") / "dp2_tp2.sqlite", shift_ns=1_000_000)
