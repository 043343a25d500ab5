"""The bench harness' reading of its own results (``bench/run``): the tables and targets in
``bench/README.md`` are what it renders from the committed ``bench/results*.json``, and a run
of nsys-ai stopped before its end (timed out, or killed for memory) counts as a lower bound.

Nothing is timed here: the figures are the ones measured on the bench machine."""

from __future__ import annotations

import copy
import importlib.machinery
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


@pytest.fixture(scope="module")
def harness():
    sys.path.insert(0, str(BENCH))
    loader = importlib.machinery.SourceFileLoader("bench_run", str(BENCH / "run"))
    spec = importlib.util.spec_from_loader("bench_run", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _results(name: str) -> dict:
    return json.loads((BENCH / name).read_text())


@pytest.mark.parametrize("name", ["results.json", "results_2026-12-03_b137a13.json",
                                  "results_2026-12-03_memory_a205a81.json",
                                  "results_2026-12-02_7d10e83.json",
                                  "results_2026-12-03_light1e5_1248_b137a13.json",
                                  "results_2026-12-03_light1e5_1251_b137a13.json",
                                  "results_2026-12-03_light1e5_1253_b137a13.json",
                                  "results_2026-12-03_light1e5_2021_303fd23.json",
                                  "results_2026-12-03_light1e5_2026_303fd23.json",
                                  "results_2026-12-04_light1e5_ffc4ef9.json",
                                  "results_2026-12-05_light1e5_3621388.json",
                                  "results_2026-12-05_bc5e7a7.json",
                                  "results_2026-12-05_light1e5_f48b9d6.json",
                                  "results_2026-12-05_light1e4_sample_f48b9d6.json",
                                  "results_2026-12-05_light1e4_sample_0956d43.json",
                                  "results_2026-12-05_tp2_1e5_1ae6348.json",
                                  "results_2026-12-05_tp2_1e5_9c4476c.json",
                                  "results_2026-12-06_light1e5_74ef5e3.json",
                                  "results_2026-12-06_tp_1e5_495b47a.json",
                                  "results_2026-12-06_16cores_tp2_i58.json",
                                  "results_2026-12-06_issue58_c4caaf0.json",
                                  "results_2026-12-02_87eeac6.json",
                                  "results_2026-12-02_sample_87eeac6.json",
                                  "results_2026-12-02_090ff44.json",
                                  "results_2026-12-02_f0ca413.json",
                                  "results_2026-11-30.json", "results_full_1e5.json",
                                  "results_2026-12-01.json"])
def test_the_readme_shows_the_rows_the_harness_renders(harness, name):
    readme = (BENCH / "README.md").read_text()
    for row in _results(name)["rows"]:
        assert harness.table_row(row) in readme


def test_a_run_killed_for_memory_is_a_lower_bound_that_passes(harness):
    res = _results("results_full_1e5.json")
    row = res["rows"][0]
    sqlite = row["nsys_ai"]["sqlite"]
    # killed by the memory cgroup after 384.5 s at 18371 MiB; report took 6.5 s
    assert harness.stopped(sqlite) == "killed at 19.26 GB"
    assert harness.seconds(row, "nsys_ai.sqlite") is None  # not a time, a bound
    got = {t: (ok, shown) for t, ok, shown in harness.targets(res)}
    assert got["10^5 full: report >= 20x faster than nsys-ai diagnose (sqlite)"] == \
        (True, ">= 59.15x (killed at 19.26 GB)")
    # the DuckDB mode finished (401.03 s): a plain ratio
    assert got["10^5 full: report >= 20x faster than nsys-ai diagnose (duckdb)"] == \
        (True, "61.7x")
    assert ">= 384 (killed at 19.26 GB)" in harness.table_row(row)


def test_a_lower_bound_under_the_target_neither_passes_nor_fails(harness):
    res = copy.deepcopy(_results("results_full_1e5.json"))
    sqlite = res["rows"][0]["nsys_ai"]["sqlite"]
    sqlite["seconds"] = 60.0  # stopped at 60 s: at least 9.2x, maybe more
    got = {t: (ok, shown) for t, ok, shown in harness.targets(res)}
    assert got["10^5 full: report >= 20x faster than nsys-ai diagnose (sqlite)"] == \
        (None, ">= 9.23x (killed at 19.26 GB)")
    sqlite.update(rc=1)  # an error, not a kill: no bound at all
    assert harness.stopped(sqlite) is None
    got = {t: ok for t, ok, _ in harness.targets(res)}
    assert got["10^5 full: report >= 20x faster than nsys-ai diagnose (sqlite)"] is None



def test_steal_is_the_stolen_share_of_the_busy_ticks(harness, monkeypatch):
    """``/proc/stat``'s steal ticks over the ticks not idle, between two readings; with the
    figure, the machine line says it (runs before it have none, and render as they did)."""
    import timing

    ticks = iter([(100, 1000), (130, 1200)])
    monkeypatch.setattr(timing, "_ticks", lambda: next(ticks))
    assert timing.Steal().pct() == 15.0  # 30 of 200 busy ticks
    assert "CPU steal over the run: 15.0 %" in harness.steal_note({"steal_pct": 15.0})
    assert harness.steal_note({}) == ""
    monkeypatch.undo()
    if Path("/proc/stat").exists():
        steal = timing.Steal()
        sum(i * i for i in range(200_000))  # some busy ticks
        pct = steal.pct()
        assert pct is None or 0.0 <= pct <= 100.0


def test_sizes_past_a_power_of_ten_are_labelled_and_memory_growth_is_per_launch(harness):
    """2 x 10^6 is not called 10^6 (the labels rounded the exponent), and the flat-memory
    target is the peak RSS's growth per launch past 10^6, from the runs' own figures."""
    assert [harness.size_label(n) for n in (10_000, 1_000_000, 2_000_000, 4_000_000)] == \
        ["10^4", "10^6", "2x10^6", "4x10^6"]
    res = copy.deepcopy(_results("results_2026-12-02_87eeac6.json"))  # up to 10^6
    big = next(r for r in res["rows"] if r["launches"] == 1_000_000)
    twice = copy.deepcopy(big)
    twice["launches"] = 2_000_000
    res["rows"].append(twice)
    flat = "memory flat as traces grow: report peak RSS grows <= 50 bytes per launch past " \
        "10^6 (light 10^6 / 2x10^6)"
    for per_launch, ok in ((40, True), (60, False)):
        twice["report"]["rss_mb"] = big["report"]["rss_mb"] + per_launch * 1e6 / 1024 ** 2
        got = {t: (ok, shown) for t, ok, shown in harness.targets(res)}
        assert got[flat] == (ok, f"{per_launch}.0 bytes per launch")
    assert harness.table_row(twice).startswith("| 2x10^6 (2,000,000) | light |")


def test_memory_stays_flat_past_a_million_launches_since_the_bursts_keep_no_rows(harness):
    """The flat-memory target from the runs' own figures: the run of record (7d10e83) grew
    by ~57 bytes a launch from 10^6 to 4 x 10^6 (the bursts' rows), the run of a205a81,
    which keeps a burst's window only, not at all."""
    flat = "memory flat as traces grow: {} peak RSS grows <= 50 bytes per launch past " \
        "10^6 (light 10^6 / 2x10^6 / 4x10^6)"
    for name, ok in (("results_2026-12-02_7d10e83.json", False),
                     ("results_2026-12-03_memory_a205a81.json", True)):
        got = {t: (passed, shown) for t, passed, shown in harness.targets(_results(name))}
        assert got[flat.format("report")][0] is ok, got[flat.format("report")]
        assert got[flat.format("gate")][0] is True
