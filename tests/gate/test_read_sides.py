"""The gate reads its two sides at once (the baseline in a forked child): the same results as
one after the other, and the baseline's error first when both sides are bad."""

from __future__ import annotations

import sqlite3

import pytest

from nsysscope.errors import NotAnNsysExport, UnreadableInput
from nsysscope.gate import read_side, read_sides


def test_both_sides_read_at_once_equal_one_after_the_other(sample_path):
    base, cand = sample_path("healthy"), sample_path("case1")
    together = read_sides(str(base), str(cand))
    alone = read_side(str(base)), read_side(str(cand))
    for a, b in zip(together, alone, strict=True):
        assert a.summary.to_json(with_distributions=True) == \
            b.summary.to_json(with_distributions=True)
    # the child's analysis comes back whole: the per-launch table the HTML page draws from
    assert together[0].launches.equals(alone[0].launches)


def test_the_baseline_error_comes_first(tmp_path):
    missing = tmp_path / "missing.sqlite"
    not_nsys = tmp_path / "other.sqlite"
    with sqlite3.connect(not_nsys) as c:
        c.execute("CREATE TABLE t (x)")
    c.close()
    with pytest.raises(NotAnNsysExport):
        read_sides(str(not_nsys), str(missing))
    with pytest.raises(UnreadableInput):
        read_sides(str(missing), str(not_nsys))
