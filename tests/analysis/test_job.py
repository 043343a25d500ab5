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
