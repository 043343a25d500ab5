"""Rows that end before they start (a damaged export, ``nsysscope.trace.backwards``): read as
they are, and counted in the report's notes, in one read and in windows alike. Before, the
figures moved (the case1 sample's projected gain went from 1.58x to 1.54x with 2 % of its
rows turned round) and nothing said why."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from nsysscope.analysis import analyze_file
from nsysscope.trace import resolve
from nsysscope.trace import windows as trace_windows

NOTE = ("{n} rows of CUDA calls, GPU work or NVTX ranges end before they start: a damaged "
        "export; read as they are, the figures around them may be off")


@pytest.fixture(scope="module", params=["start - 1000", "0"])
def damaged(sample_path, tmp_path_factory, request):
    """A copy of the case1 sample with every 7th NVTX range and every 5th graph launch call
    ending 1 us before it starts, or at 0 (a zeroed value: before every window a long trace
    is read in, which lost those rows and their launches); how many rows that turned."""
    out = tmp_path_factory.mktemp("backwards") / "case1_backwards.sqlite"
    shutil.copyfile(resolve(sample_path("case1")), out)
    end = request.param
    with sqlite3.connect(out) as c:
        nvtx = c.execute(f'UPDATE NVTX_EVENTS SET "end" = {end} WHERE eventType IN '
                         '(59, 60) AND "end" IS NOT NULL AND rowid % 7 = 0').rowcount
        calls = c.execute(f'UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET "end" = {end} WHERE '
                          "nameId IN (SELECT id FROM StringIds WHERE value LIKE "
                          "'cudaGraphLaunch%') AND rowid % 5 = 0").rowcount
    c.close()
    assert nvtx > 100 and calls > 50  # the sample's 300 steps' ranges and launches
    return out, nvtx + calls


def test_rows_that_end_before_they_start_are_counted_in_a_note(damaged):
    path, n = damaged
    s = analyze_file(path, events="none").summary
    assert NOTE.format(n=n) in s.notes
    assert s.launches == 300  # read as they are: no launch lost


def test_the_count_is_the_same_in_windows(damaged, monkeypatch):
    path, n = damaged
    monkeypatch.setattr(trace_windows, "WINDOWED_CALLS", 0)
    monkeypatch.setattr(trace_windows, "WINDOW_LAUNCHES", 40)
    a = analyze_file(path, events="none")
    assert a.trace.api.empty  # read in windows
    assert NOTE.format(n=n) in a.summary.notes
    assert a.summary.launches == 300


def test_an_export_without_them_has_no_such_note(analysed):
    assert not [x for x in analysed("case1").summary.notes if "end before" in x]
