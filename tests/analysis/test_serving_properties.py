"""Idle periods, start-up replays and batch buckets planted into (or taken out of) a real
server capture change no steady launch's class (issue 56): the copies are the H100 healthy
server export (sample_traces/server/) with rows shifted in time, deleted or relabelled in
SQL, every other row as nsys wrote it; and an allocator's event queries planted into a real
torch.profiler capture are no polling loop."""

from __future__ import annotations

import gzip
import json
import lzma
import shutil
import sqlite3
from pathlib import Path

import pytest

from nsysscope import analyze, load
from nsysscope.analysis.calls import ThreadCalls
from nsysscope.analysis.config import AnalysisConfig
from nsysscope.analysis.nvtx import NvtxIndex
from nsysscope.analysis.polling import polling_blocks

SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "server" / \
    "h100_srv_healthy.sqlite.xz"


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("server") / "srv_healthy.sqlite"
    with lzma.open(SAMPLE) as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return path


@pytest.fixture(scope="module")
def original(export):
    return analyze(load(export))


def _copy(export: Path, tmp_path: Path, name: str) -> Path:
    out = tmp_path / name
    shutil.copy(export, out)
    return out


def _timed_tables(db: sqlite3.Connection) -> list[str]:
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return [t for t in tables
            if {"start", "end"} <= {r[1] for r in db.execute(f"PRAGMA table_info({t})")}]


def shift_after(path: Path, at_ns: int, by_ns: int) -> None:
    """The host away for ``by_ns`` at ``at_ns``: every CUDA call and NVTX range that starts
    at or after it ``by_ns`` later (a range open across it ends ``by_ns`` later), and so the
    GPU work (and sync and event records) of those calls; the GPU work queued before it runs
    when it ran."""
    with sqlite3.connect(path) as db:
        # the capture lasts ``by_ns`` longer (nsysscope refuses calls outside it)
        db.execute("UPDATE ANALYSIS_DETAILS SET stopTime = stopTime + ?", (by_ns,))
        api = "CUPTI_ACTIVITY_KIND_RUNTIME"
        db.execute("CREATE TEMP TABLE later AS SELECT DISTINCT globalTid >> 24 AS proc, "
                   f"correlationId AS corr FROM {api} WHERE start >= ?", (at_ns,))
        for t in _timed_tables(db):
            cols = {r[1] for r in db.execute(f"PRAGMA table_info({t})")}
            if t in (api, "NVTX_EVENTS") or "correlationId" not in cols:
                db.execute(f'UPDATE {t} SET "end" = "end" + ? WHERE "end" >= ? AND start < ?',
                           (by_ns, at_ns, at_ns))
                db.execute(f'UPDATE {t} SET start = start + ?, "end" = "end" + ? '
                           "WHERE start >= ?", (by_ns, by_ns, at_ns))
            else:
                proc = "globalPid >> 24" if "globalPid" in cols else "(SELECT MIN(proc) FROM later)"
                db.execute(f'UPDATE {t} SET start = start + ?, "end" = "end" + ? '
                           f"WHERE ({proc}, correlationId) IN (SELECT proc, corr FROM later)",
                           (by_ns, by_ns))


def _steady_classes(a) -> dict[int, str]:
    df = a.launches
    s = df[df["steady"]]
    return dict(zip(s["corr_id"], s["klass"].astype(str), strict=True))


@pytest.mark.parametrize("seconds", [0.2, 3.0])
def test_a_longer_idle_period_changes_no_class(export, original, tmp_path, seconds):
    """The first idle period made ``seconds`` longer (more idle planted into it): the same
    steady launches with the same classes, one more idle time, the same GPU busy over
    serving time (the idle period is not in it) and a lower one with it."""
    df = original.launches
    first = df[df["idle_ns"].notna()].iloc[0]
    path = _copy(export, tmp_path, "longer.sqlite")
    shift_after(path, int(first["quiet_start_ns"]) + 1000, int(seconds * 1e9))
    a = analyze(load(path))
    assert _steady_classes(a) == _steady_classes(original)
    s, o = a.summary, original.summary
    assert s.idle.periods == o.idle.periods
    assert s.idle.total_us == pytest.approx(o.idle.total_us + seconds * 1e6, abs=1.0)
    assert s.gpu_busy == pytest.approx(o.gpu_busy, abs=1e-4)
    assert s.launches_per_s == pytest.approx(o.launches_per_s, rel=1e-3)
    assert s.gpu_busy_capture < o.gpu_busy_capture


def test_a_pause_with_a_launch_in_flight_is_not_idle(export, original, tmp_path):
    """2 s planted mid-burst, before a launch call, while the launch before it is in flight
    (the host went away mid-step): no idle period, as long as an idle one; only the launch
    before the pause changes class (the GPU idled 2 s waiting for the host: launch-bound)."""
    df = original.launches
    steady = df[df["steady"]]
    mid = steady[steady["block_start_ns"] > steady["next_api_start_ns"]].iloc[40]
    path = _copy(export, tmp_path, "pause.sqlite")
    shift_after(path, int(mid["api_end_ns"]) + 1000, 2_000_000_000)
    a = analyze(load(path))
    before, after = _steady_classes(original), _steady_classes(a)
    assert after[mid["corr_id"]] == "launch_bound" != before[mid["corr_id"]]
    assert {c: k for c, k in after.items() if c != mid["corr_id"]} == \
        {c: k for c, k in before.items() if c != mid["corr_id"]}
    assert a.summary.idle.periods == original.summary.idle.periods


def test_without_the_check_replays_no_class_changes(export, original, tmp_path):
    """The start-up's check replays (their launches, GPU work and device syncs) taken out:
    no start-up is found, the same launches are steady with the same classes."""
    df = original.launches
    up = df[df["startup"]]
    path = _copy(export, tmp_path, "no_checks.sqlite")
    with sqlite3.connect(path) as db:
        corr = ",".join(str(int(c)) for c in up["corr_id"])
        syncs = [r[0] for r in db.execute(
            "SELECT r.correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s "
            "ON s.id = r.nameId WHERE s.value LIKE 'cudaDeviceSynchronize%' AND r.start >= ? "
            "AND r.start <= ?", (int(up["api_start_ns"].min()), int(up["block_end_ns"].max())))]
        gone = corr + "," + ",".join(map(str, syncs))
        for t in _timed_tables(db):
            cols = {r[1] for r in db.execute(f"PRAGMA table_info({t})")}
            if "correlationId" in cols:
                db.execute(f"DELETE FROM {t} WHERE correlationId IN ({gone})")
    a = analyze(load(path))
    assert a.summary.startup is None and original.summary.startup.launches == 15
    assert len(a.launches) == len(df) - len(up)
    assert _steady_classes(a) == _steady_classes(original)


def test_buckets_relabelled_change_no_class(export, original, tmp_path):
    """Every replay's kernels relabelled to one graph exec (a server with one bucket, as far
    as the trace says): one exec, no per-bucket table, and the same classes."""
    path = _copy(export, tmp_path, "one_exec.sqlite")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET graphNodeId = "
                   "(1 << 32) | (graphNodeId & 4294967295) WHERE graphNodeId IS NOT NULL")
        for t in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
            db.execute(f"UPDATE {t} SET graphNodeId = (1 << 32) | (graphNodeId & 4294967295) "
                       "WHERE graphNodeId IS NOT NULL")
    a = analyze(load(path))
    assert set(a.launches["graph_exec"]) == {1} and a.summary.graphs == []
    assert len(original.summary.graphs) == 10
    # start-up needs each check to be the first replay of its exec once every graph is
    # built: the last graph's check is no such replay now, and is warm-up, so warm-up ends
    # a launch earlier (that launch is steady now); every other class is kept
    assert a.summary.startup.launches == 14
    before, after = _steady_classes(original), _steady_classes(a)
    assert len(set(after) - set(before)) == 1 and set(before) <= set(after)
    assert {c: after[c] for c in before} == before


def test_event_queries_inside_a_tensor_op_are_no_polling_loop(tmp_path):
    """torch.profiler records no return codes: three back-to-back ``cudaEventQuery`` calls
    planted inside each ``aten::empty`` of a real torch.profiler capture (what the caching
    host allocator does when a server allocates pinned memory every step) are a polling loop
    by their timing alone, and none once the tensor op around them is seen; no steady
    launch's class changes."""
    src = SAMPLE.parents[1] / "kineto" / "h200_kineto_nostack_healthy_60.pt.trace.json.gz"
    trace = json.loads(gzip.decompress(src.read_bytes()))
    events = trace["traceEvents"]
    query = next(e for e in events if e.get("name") == "cudaEventQuery")
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("name") == "aten::empty"
           and e.get("dur", 0) >= 12]
    corr = max(e.get("args", {}).get("correlation", 0) for e in events) + 1
    for op in ops:
        for k in range(3):
            events.append({**query, "pid": op["pid"], "tid": op["tid"], "dur": 1.0,
                           "ts": op["ts"] + 2.0 + 3.0 * k,
                           "args": {**query["args"], "correlation": corr}})
            corr += 1
    planted = tmp_path / "planted.pt.trace.json.gz"
    planted.write_bytes(gzip.compress(json.dumps(trace).encode()))
    t = load(planted)
    cfg, calls = AnalysisConfig(), ThreadCalls.of(t.api)
    assert len(ops) >= 10
    blind = polling_blocks(t, calls, cfg)
    assert (blind["polls"] == 3).sum() >= len(ops)  # every planted run, read by timing
    assert not (polling_blocks(t, calls, cfg, NvtxIndex.of(t.nvtx))["polls"] == 3).any()
    assert _steady_classes(analyze(t)) == _steady_classes(analyze(load(src)))
