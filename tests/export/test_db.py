"""``--per-launch FILE.db``: four real samples -> one SQLite database -> the README's queries."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsysscope.cli import cli

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_traces"
NAMES = ["h200_healthy_300", "h200_case1_300", "h200_case2_300",
         "h200_twoproc_healthy_case1_200"]
TRACES = [f"sample_traces/{n}.sqlite.xz" for n in NAMES]


def readme_queries() -> list[str]:
    text = (REPO / "docs" / "database.md").read_text(encoding="utf-8")
    section = text.split("## Query many runs: the per-launch database", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sql\n(.*?)```", section, re.S)


@pytest.fixture(scope="module")
def db(tmp_path_factory, monkeypatch_module) -> Path:
    out = tmp_path_factory.mktemp("db") / "all.db"
    r = CliRunner().invoke(cli, ["report", *TRACES, "--per-launch", str(out), "-j", "2"])
    assert r.exit_code == 0, r.output
    return out


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(REPO)  # traces named as given, relative to the repository
        yield mp


def rows(db: Path, sql: str, *args) -> list[tuple]:
    with sqlite3.connect(db) as c:
        return c.execute(sql, args).fetchall()


def test_tables_types_and_indexes(db):
    counts = {t: rows(db, f"SELECT COUNT(*) FROM {t}")[0][0]
              for t in ("launches", "blocks", "sites", "summary", "processes", "meta")}
    assert counts["launches"] == 300 * 3 + 400
    assert counts["summary"] == counts["meta"] == 4
    assert counts["processes"] == 5 and counts["blocks"] > counts["launches"]
    types = {name: ty for _, name, ty, *_ in rows(db, "PRAGMA table_info(launches)")}
    assert (types["trace"], types["step"], types["klass"], types["pid"], types["os_tid"],
            types["window_ns"], types["stall"]) == \
        ("TEXT", "INTEGER", "TEXT", "INTEGER", "INTEGER", "INTEGER", "INTEGER")
    indexes = {r[0] for r in rows(db, "SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"idx_launches_step", "idx_launches_klass", "idx_launches_pid"} <= indexes
    assert rows(db, "SELECT trace FROM meta ORDER BY rowid") == [(t,) for t in TRACES]
    # pid and OS tid from nsys's global thread id, as the thread column names them
    for pid, os_tid, tid, thread in rows(db, "SELECT pid, os_tid, tid, thread FROM launches "
                                             "WHERE NOT waited LIMIT 50"):
        assert pid == (tid >> 24) & 0xFFFFFF and os_tid == tid & 0xFFFFFF
        assert thread.endswith(f"({os_tid})")
    meta = rows(db, "SELECT nsys_version, schema_version, gpus, nsysscope_version FROM meta")
    assert set(meta) == {("2025.3.2.0", "3.20.3", '["NVIDIA H200"]', "0.1.0")}


def test_readme_queries(db):
    worst, phases, windows = readme_queries()
    by_trace: dict[str, list[tuple]] = {}
    for row in rows(db, worst):
        by_trace.setdefault(row[0], []).append(row)
    assert [len(v) for v in by_trace.values()] == [3, 3, 3, 6]  # the two-process trace: 2 x 3
    case1 = by_trace[TRACES[1]]
    assert all(klass == "gpu_to_cpu" and phase == "sample" for _, _, _, klass, phase, _ in case1)
    assert case1[0][5] > 2000  # us: a readback stall idles the GPU for ms

    stalls = {(t, phase, klass): n for t, phase, klass, n, _ in rows(db, phases)}
    assert stalls == {(TRACES[1], "sample", "gpu_to_cpu"): 293,
                      (TRACES[2], "launch", "cpu_to_gpu"): 291,
                      (TRACES[3], "sample", "gpu_to_cpu"): 194}

    p50 = {t: (w, g) for t, w, g, _, _ in rows(db, windows)}
    assert list(p50) == [TRACES[1], TRACES[3], TRACES[2], TRACES[0]]  # smallest window first
    assert p50[TRACES[1]][0] == pytest.approx(185.77)  # the report's headline
    assert p50[TRACES[0]][1] == pytest.approx(30.6, abs=0.05)


def test_rerun_replaces_rows(db):
    before = rows(db, "SELECT trace, COUNT(*) FROM launches GROUP BY trace ORDER BY trace")
    runner = CliRunner()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(REPO)
        r = runner.invoke(cli, ["report", TRACES[1], "--per-launch", str(db)])
        assert r.exit_code == 0, r.output
        # the same file by another name is the same trace
        r = runner.invoke(cli, ["report", str(REPO / TRACES[2]), "--per-launch", str(db)])
        assert r.exit_code == 0, r.output
    after = rows(db, "SELECT trace, COUNT(*) FROM launches GROUP BY trace ORDER BY trace")
    assert len(after) == len(before) == 4
    assert sorted(n for _, n in after) == sorted(n for _, n in before)
    assert rows(db, "SELECT COUNT(*) FROM meta")[0][0] == 4


def test_errors_are_one_line(tmp_path):
    runner = CliRunner()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(REPO)
        r = runner.invoke(cli, ["report", *TRACES[:2], "--per-launch", str(tmp_path / "x.csv")])
        assert r.exit_code == 2 and ".db" in r.output
        r = runner.invoke(cli, ["report", TRACES[0], "--per-launch",
                                str(tmp_path / "missing" / "x.db")])
        assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
        assert "no such folder" in r.output


@pytest.mark.parametrize("schema, holds", [
    # before: its launches table silently gained ~60 columns and the trace's rows
    ("CREATE TABLE launches(x); INSERT INTO launches VALUES (1)", "launches"),
    # before: an internal error (exit 70), sqlite-utils' NoTable
    ("CREATE TABLE t(x); CREATE VIEW launches AS SELECT * FROM t", "launches, t"),
    # nsysscope's names, but not its meta table
    ("CREATE TABLE meta(trace); CREATE TABLE sites(x)", "meta, sites"),
])
def test_a_database_per_launch_did_not_write_is_refused_untouched(tmp_path, schema, holds):
    theirs = tmp_path / "theirs.db"
    with sqlite3.connect(theirs) as c:
        c.executescript(schema)
    before = theirs.read_bytes()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(REPO)
        r = CliRunner().invoke(cli, ["report", TRACES[1], "--per-launch", str(theirs)])
    assert r.exit_code == 2
    assert r.output == (f"nsysscope: error: --per-launch {theirs}: an SQLite database that "
                        f"--per-launch did not write (it holds {holds}); name a new file, or "
                        "one --per-launch wrote\n")
    assert theirs.read_bytes() == before


def test_an_empty_database_is_written_into(tmp_path):
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(REPO)
        r = CliRunner().invoke(cli, ["report", TRACES[1], "--per-launch", str(empty)])
    assert r.exit_code == 0, r.output
    assert rows(empty, "SELECT trace FROM meta") == [(TRACES[1],)]


def test_two_files_of_one_name_and_a_range_are_three_traces(tmp_path, monkeypatch):
    """Two folders' rank0 (one healthy, one case 1), each reported from its own folder: the
    second deleted the first's rows (same label). A --from/--to read replaced the whole
    trace's rows, and the database did not say it was a part."""
    for run, sample in (("runA", "h200_healthy_300"), ("runB", "h200_case1_300")):
        (tmp_path / run).mkdir()
        (tmp_path / run / "rank0.sqlite.xz").symlink_to(SAMPLES / f"{sample}.sqlite.xz")
    db = tmp_path / "runs.db"
    for run in ("runA", "runB"):
        monkeypatch.chdir(tmp_path / run)
        r = CliRunner().invoke(cli, ["report", "rank0.sqlite.xz", "--per-launch", str(db)])
        assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["report", "rank0.sqlite.xz", "--from", "5", "--to", "6",
                                 "--per-launch", str(db)])
    assert r.exit_code == 0, r.output
    meta = rows(db, "SELECT trace, trace_id, path, time_range FROM meta ORDER BY rowid")
    b = f"rank0.sqlite.xz #{meta[1][1][:8]}"  # the second of the name: by its id
    assert [(m[0], m[2], m[3]) for m in meta] == [
        ("rank0.sqlite.xz", "rank0.sqlite.xz", None), (b, "rank0.sqlite.xz", None),
        ("rank0.sqlite.xz [5000000000, 6000000000]", "rank0.sqlite.xz",
         "[5000000000, 6000000000]")]
    assert len({m[1] for m in meta}) == 3
    stalls = dict(rows(db, "SELECT trace, SUM(stall) FROM launches GROUP BY trace"))
    assert stalls["rank0.sqlite.xz"] < 5 and stalls[b] > 290  # healthy kept; case 1 whole
    # the absolute paths, which name the user's folders, are nowhere in the database
    assert str(tmp_path).encode() not in db.read_bytes()
    # the same file again replaces only its own rows (whole or range)
    r = CliRunner().invoke(cli, ["report", "rank0.sqlite.xz", "--per-launch", str(db)])
    assert r.exit_code == 0 and rows(db, "SELECT COUNT(*) FROM meta")[0][0] == 3


def test_step_is_an_integer_column_whatever_trace_comes_first(tmp_path):
    """A first trace without 'step N' ranges made the column TEXT: later steps compared and
    sorted as text ('13' < '2')."""
    from nsysscope.trace import resolve
    nonvtx = tmp_path / "nonvtx.sqlite"
    nonvtx.write_bytes(resolve(SAMPLES / "h200_poll_healthy_100.sqlite.xz").read_bytes())
    with sqlite3.connect(nonvtx) as c:
        c.execute("DELETE FROM NVTX_EVENTS")
    c.close()
    db = tmp_path / "ty.db"
    for trace in (nonvtx, SAMPLES / "h200_healthy_300.sqlite.xz"):
        r = CliRunner().invoke(cli, ["report", str(trace), "--per-launch", str(db)])
        assert r.exit_code == 0, r.output
    types = {name: ty for _, name, ty, *_ in rows(db, "PRAGMA table_info(launches)")}
    assert types["step"] == "INTEGER"
    assert rows(db, "SELECT typeof(step), COUNT(*) FROM launches WHERE step IS NOT NULL "
                    "GROUP BY 1") == [("integer", 300)]


def test_site_columns_have_their_types_whatever_trace_comes_first(tmp_path):
    """The healthy trace's sites (launch-bound gaps) have no projected gain: written first, they
    made speedup_if_fixed and launches_per_s_if_fixed TEXT columns, and case 1's 1.577 text."""
    db = tmp_path / "sites.db"
    for name in ("h200_healthy_300", "h200_case1_300"):
        r = CliRunner().invoke(cli, ["report", str(SAMPLES / f"{name}.sqlite.xz"),
                                     "--per-launch", str(db)])
        assert r.exit_code == 0, r.output
    types = {name: ty for _, name, ty, *_ in rows(db, "PRAGMA table_info(sites)")}
    assert types["speedup_if_fixed"] == types["launches_per_s_if_fixed"] == "REAL"
    assert types["pid"] == "INTEGER" and types["mean_polls"] == "REAL"
    assert rows(db, "SELECT klass, typeof(speedup_if_fixed) FROM sites WHERE klass = "
                    "'gpu_to_cpu'") == [("gpu_to_cpu", "real")]


def test_runs_adding_to_one_new_database_at_once_keep_each_trace_once(tmp_path):
    """Four sweeps at once on a database not there yet: each trace's rows were kept four
    times over (each run saw no earlier rows to replace), and some runs failed with 'database
    is locked'. Writers now take turns."""
    import subprocess
    import sys

    out = tmp_path / "c.db"
    traces = [str(SAMPLES / f"h200_{n}_300.sqlite.xz") for n in ("healthy", "case1")]
    runs = [subprocess.Popen([sys.executable, "-m", "nsysscope", "report", *traces, "-j", "2",
                              "--per-launch", str(out)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True) for _ in range(4)]
    errors = [p.communicate(timeout=300)[1] for p in runs]
    assert [p.returncode for p in runs] == [0] * 4, errors
    assert sorted(rows(out, "SELECT trace, COUNT(*) FROM launches GROUP BY trace")) == \
        [(t, 300) for t in sorted(traces)]
    assert rows(out, "SELECT COUNT(*) FROM meta") == [(2,)]


def test_every_column_of_every_table_is_documented(db):
    """The blocks table's columns (scope, boundary_ns, exact, polls...), meta.abspath and more
    were described nowhere; the blocks' copy kinds were nsys's enum codes where the per-launch
    table names them."""
    text = (REPO / "docs" / "per-launch.md").read_text(encoding="utf-8")
    text += (REPO / "docs" / "json.md").read_text(encoding="utf-8")  # the summary's fields
    missing = {t: [c for _, c, *_ in rows(db, f"PRAGMA table_info({t})") if f"`{c}`" not in text]
               for t in ("launches", "blocks", "sites", "summary", "processes", "meta")}
    assert not any(missing.values()), missing
    kinds = {k for (k,) in rows(db, "SELECT DISTINCT copy_kind FROM blocks")}
    assert kinds <= {None, "HtoD", "DtoH", "DtoD", "PtoP"} and kinds, kinds  # None: no copy
