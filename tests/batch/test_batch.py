"""Many traces at once (``nsysscope report DIR``): expansion, ranks, worker processes, Dask,
and the output being the same bytes for the same traces."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from nsysscope import batch
from nsysscope.cli import cli
from nsysscope.model import BatchResult
from nsysscope.render.batch import render_text

pytestmark = pytest.mark.slow  # worker processes and a Dask cluster


@pytest.fixture(scope="module")
def ranks(sample_path, tmp_path_factory):
    """A folder of three 'ranks': rank1 has the case-1 readback stall."""
    d = tmp_path_factory.mktemp("ranks")
    for i, name in enumerate(("healthy", "case1", "case2")):
        (d / f"rank{i}.sqlite.xz").symlink_to(sample_path(name))
    return d


def test_expand_and_rank(ranks, tmp_path, capsys):
    files = batch.expand([str(ranks)])
    assert [p.name for p in files] == ["rank0.sqlite.xz", "rank1.sqlite.xz", "rank2.sqlite.xz"]
    assert capsys.readouterr().err == ""
    assert batch.expand([str(ranks / "rank*.sqlite.xz"), str(ranks / "rank1.sqlite.xz")]) == files
    # said, once per trace (a trace named twice made a table of one row without a word)
    assert capsys.readouterr().err == \
        f"nsysscope: note: {ranks / 'rank1.sqlite.xz'}: named more than once; analysed once\n"
    assert [batch.rank_of(p) for p in files] == [0, 1, 2]
    assert batch.rank_of("trace_gpu-7.sqlite") == 7 and batch.rank_of("trace.sqlite") is None
    # an explicit rank wins over a device or node number (the last number won: rank1_gpu0
    # was rank 0, so two ranks' files were one rank)
    assert [batch.rank_of(n) for n in ("rank1_gpu0.sqlite", "worker_rank2_dev0.sqlite",
                                       "rank5_node1.sqlite", "node3_gpu5.sqlite")] == [1, 2, 5, 5]
    assert batch.names_many(str(ranks)) and batch.names_many(str(ranks / "*.xz"))
    assert not batch.names_many(str(files[0]))
    (tmp_path / "empty").mkdir()
    from nsysscope.errors import UnreadableInput
    with pytest.raises(UnreadableInput):
        batch.expand([str(tmp_path / "empty")])


def test_parallel_report_over_ranks(ranks, analysed):
    results = batch.run_local(batch.expand([str(ranks)]), jobs=2)
    assert [r.rank for r in results] == [0, 1, 2]
    for r, name in zip(results, ("healthy", "case1", "case2"), strict=False):
        assert r.ok, r.error
        assert r.summary.classes == analysed(name).summary.classes
        assert r.summary.verdict == analysed(name).summary.verdict
    agg = batch.aggregate(results)
    assert agg.worst.rank == 1
    assert agg.launches == sum(len(analysed(n).launches) for n in ("healthy", "case1", "case2"))
    assert "rank 1 (rank1.sqlite.xz) stalls most" in agg.worst_line


def test_cli_report_of_a_folder(ranks, tmp_path):
    (ranks.parent / "broken").mkdir(exist_ok=True)
    bad = ranks.parent / "broken" / "rank9.sqlite"
    bad.write_bytes(b"not sqlite")
    res = CliRunner().invoke(cli, ["report", str(ranks), str(bad), "-j", "2"])
    assert res.exit_code == 2, res.output  # every trace reported; the broken one's code
    out = res.output
    assert "rank1.sqlite.xz" in out and "rank 1 (rank1.sqlite.xz) stalls most" in out
    assert "error:" in out and "3 of 4 traces" in out
    # and one line on stderr says so (before: exit 2 and nothing there)
    error = (f"{bad}: not an SQLite file (nsysscope reads .sqlite, .sqlite.xz, .sqlite.gz, "
             ".nsys-rep and torch.profiler JSON traces)")
    assert res.stderr == (f"nsysscope: error: 1 of 4 traces could not be analysed (listed "
                          f"under the table); the first: {error}\n")
    # the error under the table, wrapped, where it cannot widen the table (issue 55, item 15)
    # (named as the table names it)
    tail = res.stdout[res.stdout.index("\n1 trace(s) could not be analysed:\n"):]
    shown = error.replace(str(bad), bad.name)
    assert " ".join(tail.split()) == f"1 trace(s) could not be analysed: - {shown} (exit 2)"
    assert max(len(line) for line in res.stdout.splitlines()) <= 80
    # Markdown ends so too (it ended at the worst line)
    res = CliRunner().invoke(cli, ["report", str(ranks), str(bad), "-j", "1", "--format",
                                   "markdown"])
    assert res.exit_code == 2
    assert res.stdout.endswith(f"\n1 trace(s) could not be analysed:\n- {shown} (exit 2)\n")
    res = CliRunner().invoke(cli, ["report", str(ranks), "--format", "json", "-j", "1"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert [t["rank"] for t in d["traces"]] == [0, 1, 2]
    assert d["aggregate"]["worst"]["rank"] == 1
    res = CliRunner().invoke(cli, ["report", str(ranks), "--per-launch", str(tmp_path / "x.csv")])
    assert res.exit_code == 2


def test_the_per_launch_database_beside_the_traces_is_not_a_trace(sample_path, tmp_path):
    """``report DIR --per-launch DIR/launches.sqlite`` run twice: the second run read the
    database as a trace, and refused to write over its own input (exit 2)."""
    for i, name in enumerate(("healthy", "case1")):
        (tmp_path / f"rank{i}.sqlite.xz").symlink_to(sample_path(name))
    db = tmp_path / "launches.sqlite"
    for _ in range(2):
        res = CliRunner().invoke(cli, ["report", str(tmp_path), "--per-launch", str(db),
                                       "-j", "1"])
        assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[0] == "nsysscope report: 2 traces"
    assert res.stderr == f"nsysscope: note: {db}: left out: nsysscope's per-launch database, " \
        f"not a trace\nlaunches of 2 traces added to the per-launch database {db}\n"
    assert [p.name for p in batch.expand([str(tmp_path / "*.sqlite*")])] == \
        ["rank0.sqlite.xz", "rank1.sqlite.xz"]
    import sqlite3
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(DISTINCT trace), COUNT(*) FROM launches").fetchone() \
            == (2, 600)
    # named as a file, it is what the user asked for: read, and refused as not an export
    res = CliRunner().invoke(cli, ["report", str(db)])
    assert res.exit_code == 5


def test_the_database_named_among_the_traces_by_the_shell_is_not_a_trace(sample_path, tmp_path):
    """``report runs/*.sqlite* --per-launch runs/all.sqlite``: the shell, not nsysscope,
    expands the glob, so the second run named the database itself (exit 2, "is the input")."""
    for i, name in enumerate(("healthy", "case1")):
        (tmp_path / f"rank{i}.sqlite.xz").symlink_to(sample_path(name))
    db = tmp_path / "all.sqlite"
    for _ in range(2):
        names = sorted(str(q) for q in tmp_path.iterdir())  # as the shell lists them
        res = CliRunner().invoke(cli, ["report", *names, "--per-launch", str(db), "-j", "1"])
        assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[0] == "nsysscope report: 2 traces"
    assert f"nsysscope: note: {db}: left out: nsysscope's per-launch database" in res.stderr
    # with one trace beside it: that trace's report (a many-trace table of one trace before,
    # whose title said "1 traces"; issue 55, item 17)
    res = CliRunner().invoke(cli, ["report", str(db), str(tmp_path / "rank0.sqlite.xz")])
    assert res.exit_code == 0
    assert " ".join(res.stdout.split()).startswith(
        f"nsysscope report: {tmp_path / 'rank0.sqlite.xz'} (nsys")
    # nothing but nsysscope's own outputs: one line, not an empty table
    res = CliRunner().invoke(cli, ["report", str(db), str(db)])
    assert res.exit_code == 2 and res.stderr.endswith(
        f"nsysscope: error: no trace among {db}, {db}: each is nsysscope's own output (see the "
        "notes above)\n")
    # named alone, it is what the user asked for: refused, and named for what it is
    res = CliRunner().invoke(cli, ["report", str(db)])
    assert res.exit_code == 5 and res.stderr == (
        f"nsysscope: error: {db}: nsysscope's per-launch database (report --per-launch), not "
        "a trace: query it with sqlite3, or report the traces it came from\n")


def test_dask_local_cluster(ranks):
    distributed = pytest.importorskip("dask.distributed")
    paths = batch.expand([str(ranks)])
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        results = batch.run_dask(paths, cluster.scheduler_address)
    local = batch.run_local(paths, jobs=1)
    assert [r.rank for r in results] == [0, 1, 2]
    assert [r.summary.classes for r in results] == [r.summary.classes for r in local]
    assert batch.aggregate(results).worst.rank == 1


def test_output_is_the_same_bytes_for_the_same_traces(ranks):
    """No wall times unless asked for: two runs of the same traces write the same bytes."""
    # -j 1 and -j 2 too (the title said "(2 worker processes)", and the default -j is the
    # machine's CPU count)
    runs = [CliRunner().invoke(cli, ["report", str(ranks), "-j", j, "--format", fmt])
            for fmt, j in (("text", "1"), ("json", "1"), ("text", "2"), ("json", "2"))]
    assert all(r.exit_code == 0 for r in runs), runs[0].output
    assert runs[0].output == runs[2].output and runs[1].output == runs[3].output
    assert runs[0].output.splitlines()[0] == "nsysscope report: 3 traces"
    assert all(t["seconds"] is None for t in json.loads(runs[1].output)["traces"])
    timed = CliRunner().invoke(cli, ["report", str(ranks), "-j", "1", "--timings", "--format",
                                     "json"])
    assert all(t["seconds"] > 0 for t in json.loads(timed.output)["traces"])
    text = CliRunner().invoke(cli, ["report", str(ranks), "-j", "1", "--timings"]).output
    assert text.splitlines()[0].startswith("nsysscope report: 3 traces (1 worker process), ")


def test_batch_json_round_trips(ranks):
    from nsysscope.model import BatchResult
    d = json.loads(CliRunner().invoke(cli, ["report", str(ranks), "-j", "1", "--format",
                                            "json"]).output)
    back = BatchResult.from_dict(d)
    assert back.to_dict() == d
    assert back.aggregate.worst is not None and back.aggregate.worst.rank == 1


def test_per_launch_database_from_workers_and_dask(ranks, tmp_path):
    """Each worker (a process, or a Dask worker) writes its trace's rows; the database is the
    same either way, in the traces' order, with each trace's rank."""
    import sqlite3

    distributed = pytest.importorskip("dask.distributed")
    local, remote = tmp_path / "local.db", tmp_path / "dask.db"
    batch.run_batch([str(ranks)], jobs=2, per_launch_db=str(local))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        batch.run_batch([str(ranks)], scheduler=cluster.scheduler_address,
                        per_launch_db=str(remote))
    query = ("SELECT m.rank, l.trace, l.launch, l.klass, l.window_ns FROM launches l "
             "JOIN meta m USING (trace) ORDER BY l.rowid")
    with sqlite3.connect(local) as a, sqlite3.connect(remote) as b:
        rows = a.execute(query).fetchall()
        assert rows == b.execute(query).fetchall()
        assert a.execute("SELECT rank FROM meta ORDER BY rowid").fetchall() == [(0,), (1,), (2,)]
    assert len(rows) == 900 and rows[0][1].endswith("rank0.sqlite.xz")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".parts")]  # cleaned up


def test_a_file_of_several_processes_is_no_rank(sample_path, tmp_path):
    """``h200_tp2_case1_rank0_pysample_100`` names rank 0, but holds both ranks: its row is
    not labelled rank 0 (the name alone decided before). One process's file keeps the rank
    its name gives."""
    import shutil

    from nsysscope.batch import analyze_one
    r = analyze_one(str(sample_path("tp2_case1_rank0")))
    assert len(r.summary.processes) == 2 and r.rank is None
    one = tmp_path / "engine_rank3.sqlite.xz"
    shutil.copyfile(sample_path("case1"), one)
    assert analyze_one(str(one)).rank == 3


def test_one_trace_of_several_processes_is_no_rank_in_the_database(sample_path, tmp_path):
    """The single-trace ``--per-launch`` database says no rank for a file of two ranks."""
    import sqlite3
    db = tmp_path / "one.db"
    r = CliRunner().invoke(cli, ["report", str(sample_path("tp2_case1_rank0")), "--per-launch",
                                 str(db)])
    assert r.exit_code == 0, r.output
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT rank FROM summary").fetchall() == [(None,)]
        assert c.execute("SELECT rank FROM meta").fetchall() == [(None,)]


def test_traces_with_nothing_steady_exit_8_as_one_does(ranks):
    """Every trace warm-up: exit 0, the aggregate said 'OVERLAP BROKEN somewhere' and then
    'No trace stalls in steady state.'; one trace in that state exits 8."""
    r = CliRunner().invoke(cli, ["report", str(ranks), "--warmup", "100000", "-j", "1"])
    assert r.exit_code == 8, r.output
    assert r.stderr == ("nsysscope: error: nothing steady to judge: --warmup 100000 leaves no "
                        "steady launch in any of the 3 traces; lower --warmup or capture more "
                        "steps\n")
    assert "OVERLAP BROKEN" not in r.stdout and "nothing steady to judge" in r.stdout
    assert "No trace has a steady-state launch to judge (all are warm-up)." in r.stdout
    # some traces judged: exit 0, and the rows say which are not
    r = CliRunner().invoke(cli, ["report", str(ranks), "--warmup", "200", "-j", "1"])
    assert r.exit_code == 0 and "OVERLAP BROKEN somewhere" in r.stdout


def test_two_traces_of_one_file_name_are_told_apart(sample_path, tmp_path):
    """Two runs' rank0 in one report: both rows and the worst-trace line said only
    'rank0.sqlite.xz', one healthy and one stalling every step."""
    for run, name in (("runA", "healthy"), ("runB", "case1")):
        (tmp_path / run).mkdir()
        (tmp_path / run / "rank0.sqlite.xz").symlink_to(sample_path(name))
    a, b = (str(tmp_path / run / "rank0.sqlite.xz") for run in ("runA", "runB"))
    r = CliRunner().invoke(cli, ["report", a, b, "-j", "1"])
    assert r.exit_code == 0, r.output
    rows = [line for line in r.stdout.splitlines() if "rank0.sqlite.xz" in line]
    # named by as many folders as tell them apart (the whole path was cut at its start to
    # fit the terminal, and with it what told them apart)
    rows = [line for line in r.stdout.splitlines() if line.startswith("   0  ")]
    assert [line.split()[1] for line in rows] == \
        ["runA/rank0.sql\u2026", "runB/rank0.sql\u2026"] * 2
    assert "rank 0 (runB/rank0.sqlite.xz) stalls most" in r.stdout
    wide = CliRunner().invoke(cli, ["report", a, b, "-j", "1"], env={"COLUMNS": "200"})
    assert "runA/rank0.sqlite.xz" in wide.stdout and "runB/rank0.sqlite.xz" in wide.stdout
    # one trace per name: the file name alone, as before
    r = CliRunner().invoke(cli, ["report", a, str(sample_path("case1")), "-j", "1"])
    assert f"rank 0 ({a})" not in r.stdout and "h200_case1_300.sqlite.xz stalls most" in r.stdout


def test_the_worst_line_of_piecewise_traces_counts_steps(sample_path, tmp_path):
    """A piecewise trace's share is per step, as its own report says (97/98 steady steps);
    the line put it beside the launch count: '97/2351 steady launches (99.0%)'."""
    d = tmp_path / "pieces"
    d.mkdir()
    for name in ("pieces_case1", "pieces_healthy"):
        (d / f"{name}.sqlite.xz").symlink_to(sample_path(name))
    results = batch.run_local(batch.expand([str(d)]), jobs=1)
    line = batch.worst_line(batch.aggregate(results))
    assert line.startswith("pieces_case1.sqlite.xz stalls most: 97/98 steady steps (99.0%, "
                           "gpu_to_cpu at phase 'sample')"), line


def test_the_pooled_p50_of_one_trace_is_its_own(sample_path, tmp_path):
    """Two ranks, one with windows and one with none (a host-bound piecewise trace): the
    pooled window p50 is the first's own, 3551.32 us (values kept as float32 made it
    3551.31)."""
    for i, name in enumerate(("run2", "pieces_hostbound")):
        (tmp_path / f"rank{i}.sqlite.xz").symlink_to(sample_path(name))
    results = batch.run_local(batch.expand([str(tmp_path)]), jobs=1)
    agg = batch.aggregate(results)
    own = results[0].summary.window_us.p50
    assert own == 3551.32 and agg.window_p50_us == own


def test_unrelated_traces_pool_no_percentile(sample_path):
    """Issue 55, item 15: the aggregate row pooled the window p50 of unrelated traces (a
    case-1 run and a healthy one: 195.3 us, neither's); only the ranks of one job (a rank in
    each file name) pool theirs."""
    results = batch.run_local([sample_path("case1"), sample_path("healthy")], jobs=1)
    agg = batch.aggregate(results)
    assert agg.window_p50_us is None and agg.gpu_idle_p50_us is None
    assert agg.launches_per_s_mean == pytest.approx((191.86 + 304.81) / 2, abs=0.01)
    text = render_text(BatchResult(results, agg))
    rows = [line.split() for line in text.splitlines() if line.startswith(" all")]
    assert rows[1][-2:] == ["-", "-"]  # the second table's window and idle gap p50
    assert "195.3" not in text


def test_the_many_trace_table_fits_the_terminal(sample_path, tmp_path):
    """Issue 55, item 15: 287 columns (long names, errors in the verdict column). Within the
    width given, in two tables where one does not fit, names cut at their start alike in
    both; per-trace times with --timings (item 10: only the total was shown)."""
    long = "decode_loop_with_python_sampling_on_the_h200_box"
    for i, name in enumerate(("healthy", "case1")):
        (tmp_path / f"{long}_rank{i}.sqlite.xz").symlink_to(sample_path(name))
    (tmp_path / f"{long}_rank2.sqlite").write_bytes(b"SQLite format 3\x00" + bytes(100))
    res = CliRunner(env={"COLUMNS": "80"}).invoke(
        cli, ["report", str(tmp_path), "-j", "1", "--timings"])
    assert res.exit_code == 5, res.output
    lines = res.stdout.splitlines()
    assert max(map(len, lines)) <= 80, res.stdout
    heads = [line.split() for line in lines if line.startswith("rank  trace")]
    assert heads == [["rank", "trace", "stall", "%", "GPU", "busy", "launches/s", "verdict"],
                     ["rank", "trace", "launches", "steady", "stalls", "window", "p50", "GPU",
                      "idle", "p50", "seconds"]]
    rows = [line for line in lines if line.startswith(("   0  ", "   1  "))]
    # cut alike in both tables, keeping what tells them apart
    names = [r.split()[1] for r in rows]
    assert names[:2] == names[2:] and "k0." in names[0] and "k1." in names[1]
    assert all(x.startswith("\u2026") for x in names)
    seconds = [float(r.split()[-1]) for r in rows[2:]]
    assert all(0 < t < 120 for t in seconds)
    assert "185.8 us" in res.stdout and "2.01 ms" in res.stdout  # case 1's window and gap
    # a wide terminal: one table, every column
    wide = CliRunner(env={"COLUMNS": "250"}).invoke(
        cli, ["report", str(tmp_path), "-j", "1"], terminal_width=250)
    assert sum(line.startswith("rank  trace") for line in wide.stdout.splitlines()) == 1


@pytest.mark.parametrize("storage", ["python", "pyarrow"])
def test_a_worker_holds_text_as_the_process_that_started_it(storage):
    """``report DIR -j N``'s workers start fresh interpreters: they analysed with pandas'
    default text (pyarrow's, where it is installed), not the command line's Python strings
    (``cli/app.py``, ~8 % faster). A worker started as run_local starts one says which it
    holds."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    import pandas as pd

    from nsysscope.batch import run

    pytest.importorskip("pyarrow")
    with pd.option_context("mode.string_storage", storage), ProcessPoolExecutor(
            1, mp_context=mp.get_context("spawn"), initializer=run.init_worker,
            initargs=run.worker_args(1)) as pool:
        assert pool.submit(pd.get_option, "mode.string_storage").result() == storage


_STOPPED_WORKER = """
import os, signal, sys, time
from nsysscope.batch import run

run.STOP_GRACE_S = 0.5
run.init_worker(1, True, "python")


def analysis(*_, **__):  # a trace under analysis, Ctrl-C in the middle of it
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    except KeyboardInterrupt:  # what an analysis may make of it
        if sys.argv[1] == "result":  # a result: the trace's error
            return "an error"
        while True:  # or nothing it hands back
            time.sleep(0.01)


run.analyze_part = analysis
run._analyse_in_worker("t.sqlite", None, None, None)
print("back for more work")
"""


@pytest.mark.parametrize("made_of_it", ["result", "nothing"])
def test_a_worker_stopped_mid_trace_leaves_whatever_the_analysis_makes_of_it(made_of_it):
    """Ctrl-C in a worker analysing a trace raises KeyboardInterrupt there, for its
    clean-up; an analysis that turned it into the trace's error sent the worker back to wait
    for work, where the parent's SIGTERM was ignored (a second signal), and ``report -j``
    never ended. A stopped worker leaves once the trace is done, and at the latest after
    ``STOP_GRACE_S``."""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-c", _STOPPED_WORKER, made_of_it],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 130, p.stderr
    assert "back for more work" not in p.stdout


def test_a_folder_s_traces_are_found_by_content_as_a_file_is(sample_path, tmp_path):
    """Issue 55, item 5: a folder of torch.profiler traces named rank0.json(.gz) was "no trace
    files in this folder", while the same files one by one were read. Folders and globs now
    take what a file given alone would be read as, whatever its name; other files (a text
    file, a summary JSON) are left out without a word."""
    from pathlib import Path
    kineto = Path(__file__).resolve().parents[2] / "sample_traces" / "kineto"
    (tmp_path / "rank0.json.gz").symlink_to(kineto / "h200_kineto_case1_60.pt.trace.json.gz")
    (tmp_path / "rank1.json.gz").symlink_to(kineto / "h200_kineto_case2_60.pt.trace.json.gz")
    (tmp_path / "export.bin").symlink_to(sample_path("healthy"))  # an export, wrongly named
    (tmp_path / "notes.txt").write_text("run of 2026-12-06\n")
    (tmp_path / "config.json").write_text('{"tp": 2}\n')
    assert [p.name for p in batch.expand([str(tmp_path)])] == \
        ["export.bin", "rank0.json.gz", "rank1.json.gz"]
    assert [p.name for p in batch.expand([str(tmp_path / "rank*")])] == \
        ["rank0.json.gz", "rank1.json.gz"]
    res = CliRunner().invoke(cli, ["report", str(tmp_path), "-j", "1", "--format", "json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert [(t["path"].rsplit("/", 1)[-1], t["summary"]["steady_launches"])
            for t in d["traces"]] == [("export.bin", 293), ("rank0.json.gz", 54),
                                      ("rank1.json.gz", 54)]
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("nothing\n")
    res = CliRunner().invoke(cli, ["report", str(empty)])
    assert res.exit_code == 2 and "no trace files in this folder (by name: .sqlite" in res.stderr


def test_cut_names_keep_what_tells_them_apart():
    """The three samples cut at their start all read `…_300.sqlite.xz`."""
    from nsysscope.render.batch import _cut  # noqa: PLC2701 - the one rule, tested alone

    names = ["h200_healthy_300.sqlite.xz", "h200_case1_300.sqlite.xz",
             "h200_case2_300.sqlite.xz"]
    assert _cut(names, 15) == ["\u2026healthy_300.s\u2026", "\u2026case1_300.sql\u2026",
                               "\u2026case2_300.sql\u2026"]
    assert _cut(names, 40) == names
    assert _cut(["a_very_long_name_of_one_trace.sqlite.xz"], 15) == ["\u2026race.sqlite.xz"]
