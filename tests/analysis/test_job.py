"""One job, many files (:mod:`nsysscope.analysis.job`): the real two-rank H200 captures split
into one export per process (``bench/split_ranks.py``: every table filtered by process, as
nsys writes a rank profiled alone), the later file's clock moved (its times 3.3 ms on, its
session start as far back, and a skew the session start does not explain: 0, 10 us,
1.5 ms), analysed as one job: rank by rank, the merged export's results."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from nsysscope.analysis.config import config_of
from nsysscope.analysis.job import JobPart, analyze_job, file_clocks, pairs_up
from nsysscope.analysis.pipeline import analyze_file

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import split_ranks  # noqa: E402

SHIFT_NS = 3_300_000
US = 1_000


@pytest.fixture(scope="module")
def split(sample_path, tmp_path_factory):
    made: dict = {}

    def get(name: str, skew_ns: int) -> list[Path]:
        if (name, skew_ns) not in made:
            out = tmp_path_factory.mktemp(f"{name}_{skew_ns}")
            made[name, skew_ns] = split_ranks.split(sample_path(name), out, SHIFT_NS, skew_ns)
        return made[name, skew_ns]
    return get


def job_of(files):
    parts = [JobPart.of(f, analyze_file(f, events="none", collectives=True)) for f in files]
    return parts, analyze_job(parts, config_of(None))


def per_rank(summary):
    return {p.pid: p for p in summary.processes}


@pytest.mark.parametrize("name,skew_ns", [("tp2_case1_rank0", 0), ("tp2_case1_rank0", 10 * US),
                                          ("tp2_case1_rank0", 1_500_000),
                                          ("tp2_case1", 10 * US), ("tp2_healthy", 1_500_000)])
def test_a_job_of_split_files_reads_like_the_merged_export(analysed, split, name, skew_ns):
    files = split(name, skew_ns)
    assert len(files) == 2
    parts, job = job_of(files)
    assert pairs_up(parts)
    merged, ours = per_rank(analysed(name).summary), per_rank(job.summary)
    assert sorted(merged) == sorted(ours)
    for pid, m in merged.items():
        j = ours[pid]
        assert (j.status, j.classes, j.stalls, j.waits_for_pid, j.waits_in) == \
            (m.status, m.classes, m.stalls, m.waits_for_pid, m.waits_in)
        assert (j.window_us, j.gpu_gap_us, j.launches_per_s) == \
            (m.window_us, m.gpu_gap_us, m.launches_per_s)
        # waits per step: the offset found takes in the capture's own median end difference
        # (21-93 ns; the merged export applies none, within the ends' scatter), over 24
        # collectives a step
        for q in ("p10", "p50", "p90"):
            assert abs(getattr(j.collective_wait_us, q) - getattr(m.collective_wait_us, q)) \
                <= 2.5, (pid, q)
    assert job.summary.stalls == analysed(name).summary.stalls
    clock = job.summary.notes[-1]
    assert clock.startswith("one job of 2 files, analysed as one server")
    # the skew found: what the session starts left, within the capture's own 21-93 ns
    clocks = file_clocks(parts)
    assert [c.session_ns for c in clocks] == [0, -SHIFT_NS + skew_ns]
    assert abs(clocks[1].refined_ns - skew_ns) <= 100
    assert abs(clocks[1].offset_ns - (-SHIFT_NS)) <= 100


def test_the_split_files_are_one_process_each_every_row_kept(sample_path, split):
    """Each file holds one process's rows of every table that names a process, the two
    files together every row of the source's two ranks; times moved by the shift, the
    session start back as far (plus the skew)."""
    from nsysscope.trace import resolve
    src = resolve(sample_path("tp2_case1_rank0"))
    files = split("tp2_case1_rank0", 10 * US)
    with sqlite3.connect(f"file:{src}?mode=ro", uri=True) as s:
        kernels = s.execute("SELECT COUNT(*), MIN(start) FROM CUPTI_ACTIVITY_KIND_KERNEL "
                            "WHERE globalPid >> 24 IN (SELECT DISTINCT globalTid >> 24 FROM "
                            "CUPTI_ACTIVITY_KIND_RUNTIME)").fetchone()
        utc = s.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()[0]
    got, starts = 0, []
    for i, f in enumerate(files):
        with sqlite3.connect(f"file:{f}?mode=ro", uri=True) as c:
            assert c.execute("SELECT COUNT(DISTINCT globalPid) FROM PROCESSES").fetchone()[0] == 1
            assert c.execute("SELECT COUNT(DISTINCT globalTid >> 24) FROM "
                             "CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0] == 1
            n, first = c.execute("SELECT COUNT(*), MIN(start) FROM "
                                 "CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
            got += n
            starts.append(first - i * SHIFT_NS)
            assert c.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME"
                             ).fetchone()[0] == utc - i * (SHIFT_NS - 10 * US)
    assert got == kernels[0] and min(starts) == kernels[1]


def test_files_of_unrelated_runs_are_no_job(sample_path, split):
    """Ranks of two different captures never line up: two files, no job."""
    parts = [JobPart.of(f, analyze_file(f, events="none", collectives=True))
             for f in (split("tp2_case1", 0)[0], split("tp2_healthy", 0)[1])]
    assert not pairs_up(parts)


def test_report_of_a_job_s_files_is_one_server_and_one_file_alone_names_the_missing_rank(
        split):
    """``nsysscope report rank0.sqlite rank1.sqlite``: one report of the server, one row per
    rank, rank 1 waiting for rank 0 (each file alone said rank 0 stalls and rank 1 is
    healthy, 99.4 % busy); rank 1's file alone: its collectives wait for a rank not in the
    input."""
    from click.testing import CliRunner

    from nsysscope.cli import cli
    files = [str(f) for f in split("tp2_case1_rank0", 1_500_000)]
    r = CliRunner().invoke(cli, ["report", *files])
    assert r.exit_code == 0, r.output
    assert "(one job)" in r.output and "rank 1 (pid 1151) waits 1.32 ms per step in " \
        "all-reduce for rank 0 (pid 1150)" in " ".join(r.output.split())
    alone = CliRunner().invoke(cli, ["report", files[1]])
    assert alone.exit_code == 0, alone.output
    first = " ".join(alone.output.split("\n\n")[1].split())
    assert first.startswith("overlap lost to waiting: waits 1.33 ms per step in all-reduce "
                            "for a rank not in the input"), first
    # --no-job: the files one by one, as before
    apart = CliRunner().invoke(cli, ["report", "--no-job", *files])
    assert apart.exit_code == 0 and "(one job)" not in apart.output


def test_summarize_gate_and_the_notebook_take_a_job(split, tmp_path):
    """``summarize FOLDER`` writes the job's summary (one process per rank); the gate takes a
    job's folder or glob as a side and compares it with a job, or with a job's summary, rank
    by rank; ``nsysscope.open([files])`` opens a job."""
    from click.testing import CliRunner

    import nsysscope
    from nsysscope.cli import cli
    from nsysscope.gate.sides import read_summary
    healthy = split("tp2_healthy", 10 * US)[0].parent
    broken = split("tp2_case1_rank0", 10 * US)[0].parent
    base = tmp_path / "healthy.json"
    r = CliRunner().invoke(cli, ["summarize", str(healthy), "-o", str(base)])
    assert r.exit_code == 0, r.output
    s = read_summary(base)
    assert [p.rank for p in s.processes] == [0, 1] and s.notes[-1].startswith("one job of 2")
    same = CliRunner().invoke(cli, ["gate", str(base), str(healthy)])
    assert same.exit_code == 0, same.output
    worse = CliRunner().invoke(cli, ["gate", str(base), f"{broken}/*.sqlite"])
    assert worse.exit_code == 1, worse.output
    flat = " ".join(worse.output.split())
    assert "processes matched by rank: process0 = rank 0 (pid 721) -> rank 0 (pid 1150), " \
        "process1 = rank 1 (pid 722) -> rank 1 (pid 1151)" in flat
    jobs = CliRunner().invoke(cli, ["gate", str(healthy), str(broken)])
    assert jobs.exit_code == 1 and "processes matched by rank" in jobs.output
    t = nsysscope.open(sorted(broken.glob("*.sqlite")))
    assert [p.status for p in t.summary.processes] == ["stalls", "waits_for_peer"]


def test_a_job_s_timeline_is_the_merged_export_s(analysed, split, tmp_path):
    """``export --perfetto FOLDER``: one timeline of the job's files, each put on the first's
    clock (skew 1.5 ms planted): the merged export's events, each within 0.1 us of where the
    merged export draws it (the offset found takes in the capture's own 21 ns)."""
    import gzip
    import json
    import re

    from click.testing import CliRunner

    from nsysscope.cli import cli
    folder = split("tp2_case1_rank0", 1_500_000)[0].parent

    def events(args, out):
        r = CliRunner().invoke(cli, ["export", *args, "--perfetto", str(out)])
        assert r.exit_code == 0, r.output
        d = json.loads(gzip.decompress(out.read_bytes()))
        ev = d["traceEvents"] if isinstance(d, dict) else d
        # (a replay is named by its launch's number: a job numbers its launches file by file)
        return sorted((e["cat"], re.sub(r"#\d+", "#", e["name"]), str(e.get("pid")),
                       str(e.get("tid")), e["ts"]) for e in ev if e.get("ph") == "X")
    job = events([str(folder)], tmp_path / "job.json.gz")
    merged = events([str(analysed("tp2_case1_rank0").trace.meta.path)],
                    tmp_path / "merged.json.gz")
    assert len(job) == len(merged) > 30_000
    assert [e[:4] for e in job] == [e[:4] for e in merged]
    assert max(abs(a[4] - b[4]) for a, b in zip(job, merged, strict=True)) < 0.1


def test_torch_profiler_files_are_put_on_one_axis_by_their_base_time(tmp_path):
    """torch.profiler writes one trace per rank, each counting from its own
    ``baseTimeNanoseconds`` (epoch microseconds before ~2.4). The real case-1 capture twice as
    two ranks of one job (``--job``: no collectives to pair them), the second's base time
    2.5 ms later, both with pid 1367 (ranks in containers of their own): the second file's
    clock is put 2.5 ms after the first's, its process given a key of its own, each named by
    its ``distributedInfo`` rank."""
    import gzip
    import json

    from click.testing import CliRunner

    from nsysscope.cli import cli
    from nsysscope.trace import load
    src = Path(__file__).resolve().parents[2] / "sample_traces" / "kineto" / \
        "h200_kineto_case1_60.pt.trace.json.gz"
    d = json.loads(gzip.decompress(src.read_bytes()))
    files = []
    for rank in (0, 1):
        d = {**d, "baseTimeNanoseconds": d["baseTimeNanoseconds"] + rank * 2_500_000,
             "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}}
        files.append(tmp_path / f"rank{rank}.pt.trace.json.gz")
        files[-1].write_bytes(gzip.compress(json.dumps(d).encode()))
    metas = [load(f).meta for f in files]
    assert [m.rank for m in metas] == [0, 1]
    assert metas[1].session_start_ns - metas[0].session_start_ns == 2_500_000
    r = CliRunner().invoke(cli, ["report", "--job", "--format", "json", *map(str, files)])
    assert r.exit_code == 0, r.output
    s = json.loads(r.output)
    assert [p["rank"] for p in s["processes"]] == [0, 1]
    assert len({p["pid"] for p in s["processes"]}) == 1  # one pid, two processes
    assert s["notes"][-1].endswith("rank1.pt.trace.json.gz +2.50 ms by its session start")
    one = json.loads(CliRunner().invoke(cli, ["report", "--format", "json", str(files[0])]
                                        ).output)["processes"][0]
    for p in s["processes"]:
        assert (p["classes"], p["window_us"]) == (one["classes"], one["window_us"])
