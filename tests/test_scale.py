"""Scale: the trace replicator, the parallel loader, many traces at once (local and Dask).

Fast and small: nothing here is timed (the timings live in bench/, see bench/README.md)."""

from __future__ import annotations

import importlib
import io
import os
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nsysscope import analyze, load
from nsysscope.trace import resolve

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import replicate as rep  # noqa: E402

load_module = importlib.import_module("nsysscope.trace.load")

K = 3


@pytest.fixture(scope="module")
def replica(sample_path, tmp_path_factory):
    """case1 (300 launches) replicated K times."""
    src = resolve(sample_path("case1"))
    dst = tmp_path_factory.mktemp("replica") / "case1_x3.sqlite"
    info = rep.replicate(src, dst, k=K)
    return src, dst, info


def _tiled(a: pd.Series, k: int) -> pd.Series:
    return pd.Series(np.tile(a.to_numpy(), k))


def _same(x: pd.Series, y: pd.Series) -> bool:
    x, y = x.reset_index(drop=True), y.reset_index(drop=True)
    return bool(((x == y) | (x.isna() & y.isna())).all())


def test_replica_has_k_times_the_launches_with_the_same_classes(replica, analysed):
    src, dst, info = replica
    a = analysed("case1")
    b = analyze(load(dst))
    assert info["launches"] == K * info["source_launches"] == K * len(a.launches)
    assert len(b.launches) == K * len(a.launches)
    assert (b.launches["klass"].astype(str).to_numpy()
            == np.tile(a.launches["klass"].astype(str).to_numpy(), K)).all()
    for col in ("window_ns", "gpu_idle_ns", "n_ops", "api_chain", "stall", "phase"):
        assert _same(_tiled(a.launches[col], K), b.launches[col]), col
    # every replica starts after the previous one ended, in time and in correlation ids
    per = len(a.launches)
    starts = b.launches["api_start_ns"].to_numpy()
    assert (starts[per:] > starts[:-per]).all()
    assert b.launches["corr_id"].is_unique


def test_replica_keeps_every_activity_table_consistent(replica):
    src, dst, _ = replica
    with sqlite3.connect(src) as s, sqlite3.connect(dst) as d:
        for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
                      "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                      "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_CUDA_EVENT",
                      "NVTX_EVENTS", "TARGET_INFO_CUDA_STREAM"):
            n_src = s.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            assert d.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == K * n_src, table
        for table in ("StringIds", "ThreadNames", "META_DATA_EXPORT"):
            assert (d.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
                    == s.execute(f"SELECT COUNT(*) FROM {table}").fetchone()), table
        # GPU work, syncs and event records all point at an API call of their own replica
        for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                      "CUPTI_ACTIVITY_KIND_CUDA_EVENT"):
            orphans = d.execute(
                f"SELECT COUNT(*) FROM {table} WHERE correlationId NOT IN "
                "(SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME)").fetchone()[0]
            src_orphans = s.execute(
                f"SELECT COUNT(*) FROM {table} WHERE correlationId NOT IN "
                "(SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME)").fetchone()[0]
            assert orphans == K * src_orphans, table
        # each event sync links to exactly the records of its own replica
        q = ("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION y JOIN "
             "CUPTI_ACTIVITY_KIND_CUDA_EVENT e ON e.eventSyncId = y.eventSyncId")
        assert d.execute(q).fetchone()[0] == K * s.execute(q).fetchone()[0]
        span = d.execute("SELECT startTime, stopTime FROM ANALYSIS_DETAILS").fetchone()
        last = d.execute("SELECT MAX(end) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
        assert span[0] <= last <= span[1]


def test_reduced_variant_keeps_spans_and_classes(sample_path, tmp_path, analysed):
    src = resolve(sample_path("case1"))
    dst = tmp_path / "reduced.sqlite"
    rep.replicate(src, dst, k=2, graph_op_stride=10)
    a, b = analysed("case1"), analyze(load(dst))
    assert (b.launches["klass"].astype(str).to_numpy()
            == np.tile(a.launches["klass"].astype(str).to_numpy(), 2)).all()
    for col in ("gpu_start_ns", "gpu_end_ns"):
        shift = b.launches[col].to_numpy()[: len(a.launches)]
        assert np.array_equal(shift, a.launches[col].to_numpy(), equal_nan=True)
    kept = b.launches["n_ops"].to_numpy()[: len(a.launches)]
    assert (kept < a.launches["n_ops"].to_numpy()).all() and (kept >= 2).all()


def test_loader_gives_the_same_tables_split_over_threads(replica, monkeypatch):
    """Rowid ranges small enough that launches straddle them, on worker threads, read the
    same as one pass on the caller's thread."""
    _, dst, _ = replica
    monkeypatch.setenv("NSYSSCOPE_THREADS", "1")
    one = load(dst)
    monkeypatch.setenv("NSYSSCOPE_THREADS", "2")
    monkeypatch.setattr(load_module, "_PART_ROWS", 4096)
    many = load(dst)
    for name in ("api", "graph_work", "gpu_ops", "syncs", "event_records", "nvtx", "threads"):
        pd.testing.assert_frame_equal(getattr(many, name), getattr(one, name), check_exact=True)
    assert many.meta == one.meta


def test_loader_columns_and_dtypes(analysed):
    t = analysed("case1").trace
    assert list(t.graph_work.columns) == ["corr_id", "gpu_start_ns", "gpu_end_ns", "stream",
                                         "device", "n_ops"]
    assert (t.graph_work.dtypes == "int64").all()
    assert list(t.gpu_ops.columns) == ["start_ns", "end_ns", "stream", "device", "corr_id",
                                      "kind", "copy_kind", "src_kind", "dst_kind", "bytes"]
    assert isinstance(t.gpu_ops["kind"].dtype, pd.CategoricalDtype)
    assert list(t.gpu_ops["kind"].cat.categories) == ["kernel", "memcpy", "memset"]
    assert t.gpu_ops["start_ns"].is_monotonic_increasing
    assert t.api["start_ns"].is_monotonic_increasing
    assert isinstance(t.api["name"].dtype, pd.CategoricalDtype)
    assert t.nvtx["start_ns"].is_monotonic_increasing


# -- many traces -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ranks(sample_path, tmp_path_factory):
    """A folder of three 'ranks': rank1 has the case-1 readback stall."""
    d = tmp_path_factory.mktemp("ranks")
    for i, name in enumerate(("healthy", "case1", "case2")):
        (d / f"rank{i}.sqlite.xz").symlink_to(sample_path(name))
    return d


def test_expand_and_rank(ranks, tmp_path):
    from nsysscope import many
    files = many.expand([str(ranks)])
    assert [p.name for p in files] == ["rank0.sqlite.xz", "rank1.sqlite.xz", "rank2.sqlite.xz"]
    assert many.expand([str(ranks / "rank*.sqlite.xz"), str(ranks / "rank1.sqlite.xz")]) == files
    assert [many.rank_of(p) for p in files] == [0, 1, 2]
    assert many.rank_of("trace_gpu-7.sqlite") == 7 and many.rank_of("trace.sqlite") is None
    assert many.names_many(str(ranks)) and many.names_many(str(ranks / "*.xz"))
    assert not many.names_many(str(files[0]))
    (tmp_path / "empty").mkdir()
    from nsysscope.errors import UnreadableInput
    with pytest.raises(UnreadableInput):
        many.expand([str(tmp_path / "empty")])


def test_parallel_report_over_ranks(ranks, analysed):
    from nsysscope import many
    results = many.run_local(many.expand([str(ranks)]), jobs=2)
    assert [r.rank for r in results] == [0, 1, 2]
    for r, name in zip(results, ("healthy", "case1", "case2")):
        assert r.ok, r.error
        assert r.summary.classes == analysed(name).summary.classes
        assert r.summary.verdict == analysed(name).summary.verdict
    agg = many.aggregate(results)
    assert agg.worst.rank == 1
    assert agg.launches == sum(len(analysed(n).launches) for n in ("healthy", "case1", "case2"))
    assert "rank 1 (rank1.sqlite.xz) stalls most" in many.worst_line(agg)


def test_cli_report_of_a_folder(ranks, tmp_path):
    from click.testing import CliRunner
    from nsysscope.cli import cli
    (ranks.parent / "broken").mkdir(exist_ok=True)
    bad = ranks.parent / "broken" / "rank9.sqlite"
    bad.write_bytes(b"not sqlite")
    res = CliRunner().invoke(cli, ["report", str(ranks), str(bad), "-j", "2"])
    assert res.exit_code == 2, res.output  # every trace reported; the broken one's code
    out = res.output
    assert "rank1.sqlite.xz" in out and "rank 1 (rank1.sqlite.xz) stalls most" in out
    assert "error:" in out and "3 of 4 traces" in out
    res = CliRunner().invoke(cli, ["report", str(ranks), "--format", "json", "-j", "1"])
    assert res.exit_code == 0, res.output
    import json
    d = json.loads(res.output)
    assert [t["rank"] for t in d["traces"]] == [0, 1, 2]
    assert d["aggregate"]["worst"]["rank"] == 1
    res = CliRunner().invoke(cli, ["report", str(ranks), "--per-launch", str(tmp_path / "x.csv")])
    assert res.exit_code == 2


def test_dask_local_cluster(ranks):
    distributed = pytest.importorskip("dask.distributed")
    from nsysscope import many
    paths = many.expand([str(ranks)])
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        results = many.run_dask(paths, cluster.scheduler_address)
    local = many.run_local(paths, jobs=1)
    assert [r.rank for r in results] == [0, 1, 2]
    assert [r.summary.classes for r in results] == [r.summary.classes for r in local]
    assert many.aggregate(results).worst.rank == 1


# -- progress ----------------------------------------------------------------------------------

class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_off_when_not_a_tty(monkeypatch):
    from nsysscope.progress import enabled, progress
    monkeypatch.delenv("NSYSSCOPE_PROGRESS", raising=False)
    buf = io.StringIO()
    assert not enabled(buf) and enabled(_Tty())
    with progress("x", total=2, stream=buf, delay=0) as p:
        p.advance()
    assert buf.getvalue() == ""
    monkeypatch.setenv("NSYSSCOPE_PROGRESS", "0")
    assert not enabled(_Tty())


def test_progress_draws_and_erases_on_a_tty(monkeypatch):
    import time
    from nsysscope.progress import progress
    monkeypatch.delenv("NSYSSCOPE_PROGRESS", raising=False)
    tty = _Tty()
    with progress("reading t.sqlite", total=4, stream=tty, delay=0, interval=0.01) as p:
        p.advance(2)
        time.sleep(0.1)
    out = tty.getvalue()
    assert "reading t.sqlite" in out and "2/4" in out
    assert out.endswith("\r")  # the line is erased at the end
