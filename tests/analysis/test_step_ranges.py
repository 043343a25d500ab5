"""Numbered NVTX ranges are steps, whatever word names them (issue 55, item 8): a range
``worker iter 60`` was a "phase", one per step, and split a stall site into one per step."""

from __future__ import annotations

import lzma
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from nsysscope import analyze, load
from nsysscope.analysis.nvtx import step_of_names

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def renamed(tmp_path: Path, name: str, sql: list[str]) -> Path:
    """The sample ``name`` decompressed, with ``sql`` run on its NVTX ranges."""
    out = tmp_path / f"{name}.sqlite"
    with lzma.open(SAMPLES / f"{name}.sqlite.xz") as f, out.open("wb") as g:
        shutil.copyfileobj(f, g, 1 << 20)
    with sqlite3.connect(out) as c:
        for statement in sql:
            c.execute(statement)
    return out


def test_worker_iter_ranges_are_steps_not_phases(analysed, tmp_path):
    """The case-1 capture with its `step N` ranges named `worker iter N`, and no `sample`
    range inside them: the readback waits directly in the numbered range. It made 293
    sites of one launch each (one per 'phase'), the top ten listed; now one site, the steps
    counted as the original's."""
    trace = renamed(tmp_path, "h200_case1_300", [
        "UPDATE NVTX_EVENTS SET text = 'worker iter ' || substr(text, 6) "
        "WHERE text LIKE 'step %'",
        "DELETE FROM NVTX_EVENTS WHERE text = 'sample'"])
    s = analyze(load(trace)).summary
    stalls = [x for x in s.sites if x.klass == "gpu_to_cpu"]
    assert len(stalls) == 1 and stalls[0].count == 293 and stalls[0].phase is None
    assert stalls[0].nvtx_path == "worker iter 6" and stalls[0].where == "(no NVTX phase)"
    assert s.steps_per_s == analysed("case1").summary.steps_per_s == pytest.approx(191.5, abs=0.1)
    assert s.headline.speedup == pytest.approx(analysed("case1").summary.headline.speedup,
                                               abs=0.005)


def test_torch_profiler_s_step_ranges_are_steps(tmp_path):
    """`ProfilerStep#N`, as torch.profiler's schedule names its steps."""
    trace = renamed(tmp_path, "h200_case2_300", [
        "UPDATE NVTX_EVENTS SET text = 'ProfilerStep#' || substr(text, 6) "
        "WHERE text LIKE 'step %'"])
    s = analyze(load(trace)).summary
    assert s.steps_per_s == pytest.approx(291.8, abs=0.1)  # the original's NVTX steps/s
    assert s.sites[0].phase == "launch" and s.sites[0].count == 291


def test_a_family_opened_once_per_step_is_no_step():
    """`layer 0`..`layer 23` open once per step each: a phase's names, not steps; a family
    with fewer than three numbers on a thread is not steps either (`stage 1`, `stage 2`)."""
    steps, layers = 10, 24
    names = np.array([f"iteration_{i}" for i in range(steps)]
                     + [f"layer {j}" for j in range(layers)] + ["stage 1", "stage 2"],
                     dtype=object)
    codes = np.concatenate([np.arange(steps),
                            np.tile(np.arange(steps, steps + layers), steps),
                            np.repeat([steps + layers, steps + layers + 1], steps)])
    got = step_of_names(names, codes, np.zeros(len(codes), dtype=np.int64))
    assert list(got[:steps]) == list(range(steps))  # iteration_N: steps (the pattern's too)
    assert np.isnan(got[steps:]).all()
    # two ranks, each opening every step once: still steps (2 threads, 1 opening each)
    tids = np.repeat([1, 2], steps)
    got = step_of_names(np.array([f"fwd {i}" for i in range(steps)], dtype=object),
                        np.tile(np.arange(steps), 2), tids)
    assert list(got) == list(range(steps))
