"""Every notebook in notebooks/ runs top to bottom, and is committed with its outputs stripped."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def test_there_is_a_notebook():
    assert any(p.name == "explore_overlap.ipynb" for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, \
                f"{path.name}: strip the outputs before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
@pytest.mark.slow  # starts a kernel and runs every cell
def test_notebook_runs_top_to_bottom(path):
    nb = nbformat.read(path, as_version=4)
    # run in the notebook's own folder, as Jupyter does; the kernel inherits NSYSSCOPE_CACHE
    # (conftest), so the samples decompressed for the other tests are reused
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    if path.name == "explore_overlap.ipynb":
        images = [o for o in outputs if "image/png" in o.get("data", {})]
        assert len(images) >= 6, "the timelines, distributions and comparison did not show"
        html = "".join(o.get("data", {}).get("text/html", "") for o in outputs)
        assert "nsysscope-summary" in html  # the rich summary of an opened trace
        # what the notebook prints is what the samples are (sample_traces/README.md)
        text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
        assert "case1    OVERLAP BROKEN: 293/293 steady launches stall (gpu_to_cpu at phase " \
               "'sample')" in text
        assert "case2    OVERLAP BROKEN: 291/293 steady launches stall (cpu_to_gpu at phase " \
               "'launch')" in text
        assert "healthy  overlap healthy: " in text
        assert "gpu_to_cpu at phase 'sample': 0 -> 293 launches" in text  # the gate's site


def test_stalls_match_the_summary(analysed, sample_path):
    """``t.stalls`` is the steady state, as the summary counts it (issue 13: 298 against 293)."""
    import nsysscope
    t = nsysscope.open(sample_path("case1"))
    assert len(t.stalls) == sum(t.summary.stalls.values()) == 293
    assert len(t.all_stalls) > len(t.stalls) and t.stalls["steady"].all()
    assert "t.stalls: 293 steady-state stalls, 5 more in warm-up (t.all_stalls)" in repr(t)


def test_processes_are_a_table_of_the_summary_s_processes(sample_path):
    """``t.processes``: the per-process table was only at ``t.analysis.processes`` (with enum
    column names); it is the summary's processes, one row each, by pid."""
    import nsysscope
    t = nsysscope.open(sample_path("tp2_case1_rank0"))
    p = t.processes.sort_values("pid")
    s = sorted(t.summary.processes, key=lambda x: x.pid)
    assert list(p["pid"]) == [x.pid for x in s] and len(s) == 2
    assert all(isinstance(c, str) and type(c) is str for c in p.columns)
    assert all(type(c) is str for c in t.analysis.processes.columns)  # the analysis's own too
    assert list(p["gpu_to_cpu"]) == [x.classes["gpu_to_cpu"] for x in s]
    # rank 0 reads back and stalls; rank 1 waits for it in collectives: its peer is rank 0
    stalled = p.loc[p["gpu_to_cpu"] > 0, "proc"]
    waiting = p.loc[p["gpu_to_cpu"] == 0, "waited_for"]
    assert len(stalled) == 1 and (waiting == stalled.iloc[0]).all()
