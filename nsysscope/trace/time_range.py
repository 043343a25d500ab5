"""A part of a trace's timeline to read instead of all of it.

A server profiled for a minute holds millions of launches; the steady part a user cares about,
or what fits in memory, is often a few seconds of it. Times are the trace's own: nanoseconds
on the nsys timeline (``start`` in the export, what the nsys GUI and nsysscope's timelines
show as seconds).

What is read: the CUDA calls and NVTX ranges that overlap the range, and the GPU work, syncs
and event records of the calls read (by correlation id, so a launch's whole replay is there
even when the GPU runs it after the range ends). The launches at the range's edges are
analysed as a capture's first and last are: the first are warm-up, the last on each stream
never counts, and a launch whose host block falls after the range is never waited for.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

_UNITS = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0}
_TIME = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(s|ms|us|ns)?\s*$")


@dataclass(frozen=True)
class TimeRange:
    """``[start_ns, end_ns)`` of the timeline; None: from the beginning, or to the end."""

    start_ns: int | None = None
    end_ns: int | None = None

    def __post_init__(self) -> None:
        for name in ("start_ns", "end_ns"):
            t = getattr(self, name)
            if t is None:
                continue
            if isinstance(t, bool) or not isinstance(t, int | np.integer):
                raise TypeError(f"TimeRange.{name} takes whole nanoseconds (an int) or None, "
                                f"not {type(t).__name__} {t!r}; for times such as '5.5s' use "
                                "TimeRange.parse(start, end)")
            object.__setattr__(self, name, int(t))  # a numpy integer as Python's, for the SQL
        if self.start_ns is not None and self.end_ns is not None and \
                self.end_ns <= self.start_ns:
            raise ValueError(f"the range must end after it starts ({self.start_ns / 1e9:g} s "
                             f"to {self.end_ns / 1e9:g} s)")

    @classmethod
    def parse(cls, start: str | None, end: str | None) -> TimeRange:
        """From times as a person writes them: ``12.5`` (seconds), ``12.5s``, ``300ms``."""
        return cls(*(None if t is None else _nanoseconds(t) for t in (start, end)))

    @property
    def whole(self) -> bool:
        return self.start_ns is None and self.end_ns is None

    def overlapping(self, alias: str = "") -> str:
        """An SQL condition (`` AND ...``) keeping the rows with ``start``/``end`` columns that
        overlap the range; empty for the whole trace. A row that starts in the range is kept
        whatever its end: one that ends before it starts (a damaged export) is read as the
        whole trace reads it (``trace/backwards.py``)."""
        sql = []
        if self.end_ns is not None:
            sql.append(f" AND {alias}start < {self.end_ns}")
        if self.start_ns is not None:
            sql.append(f' AND ({alias}"end" > {self.start_ns} OR {alias}start > '
                       f"{self.start_ns})")
        return "".join(sql)

    def overlaps(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Which rows (``start``/``end`` times) overlap the range: the rows
        :meth:`overlapping` keeps, for a table already read."""
        keep = np.ones(len(start), dtype=bool)
        if self.end_ns is not None:
            keep &= start < self.end_ns
        if self.start_ns is not None:
            keep &= (end > self.start_ns) | (start > self.start_ns)
        return keep

    def of_calls(self, corr_ids: np.ndarray, procs: np.ndarray) -> CallRows:
        """The rows of the calls read (their correlation ids and processes); every row for
        the whole trace. Read from the trace's start (or to its end), every row before its
        calls (after them) too: GPU work of calls the loader does not keep (an eager
        ``cudaLaunchKernel`` before the first call it keeps) is the whole trace's there."""
        if self.whole:
            return EVERY_CALL
        keep = corr_ids >= 0
        ids, procs = corr_ids[keep], procs[keep]
        if not len(ids):
            return CallRows(())
        order = np.argsort(procs, kind="stable")
        procs, ids = procs[order], ids[order]
        first = np.flatnonzero(np.r_[True, procs[1:] != procs[:-1]])
        low = np.minimum.reduceat(ids, first) if self.start_ns is not None else \
            np.zeros(len(first), dtype=np.int64)
        high = np.maximum.reduceat(ids, first) if self.end_ns is not None else \
            np.full(len(first), np.iinfo(np.int64).max)
        return CallRows(tuple(zip(procs[first].tolist(), low.tolist(), high.tolist(),
                                  strict=True)))


@dataclass(frozen=True)
class CallRows:
    """The rows of a per-call table (GPU work, sync and event records) that belong to the
    calls read: per process, the correlation ids between its calls' smallest and largest.

    Correlation ids count up in each process, so those are the rows of its calls in the range
    (and a few neighbours', which the joins to the calls leave out). One range over every
    process's ids would take in long stretches of the others' rows: each process counts from
    its own start."""

    #: (process key, smallest id, largest id); None: every row (the whole trace)
    ranges: tuple[tuple[int, int, int], ...] | None

    def sql(self, has_pid: bool, column: str = "correlationId") -> str:
        """An SQL condition (`` AND ...``) on a table with ``column`` (and ``globalPid``, if
        ``has_pid``; without it, one range for every process); empty for every row."""
        if self.ranges is None:
            return ""
        if not self.ranges:
            return " AND FALSE"  # no call read: none of their rows either
        low, high = min(r[1] for r in self.ranges), max(r[2] for r in self.ranges)
        sql = f" AND {column} BETWEEN {low} AND {high}"  # what storage statistics can skip
        if has_pid and len(self.ranges) > 1:
            sql += " AND (" + " OR ".join(
                f"(globalPid >> 24 = {p} AND {column} BETWEEN {lo} AND {hi})"
                for p, lo, hi in self.ranges) + ")"
        return sql

    def keeps(self, proc: np.ndarray, corr: np.ndarray) -> np.ndarray:
        """Which rows (process keys, correlation ids) :meth:`sql` keeps, for a table already
        read (a row whose process is not known, -1, is kept only where one process called)."""
        if self.ranges is None:
            return np.ones(len(corr), dtype=bool)
        if not self.ranges:
            return np.zeros(len(corr), dtype=bool)
        low, high = min(r[1] for r in self.ranges), max(r[2] for r in self.ranges)
        keep = (corr >= low) & (corr <= high)
        if len(self.ranges) > 1:
            own = np.zeros(len(corr), dtype=bool)
            for p, lo, hi in self.ranges:
                own |= (proc == p) & (corr >= lo) & (corr <= hi)
            keep &= own
        return keep


#: every row of a per-call table
EVERY_CALL = CallRows(None)


#: the whole trace
WHOLE = TimeRange()


def span_of(time_range: object) -> TimeRange:
    """``time_range`` as read: None is the whole trace; anything but a :class:`TimeRange` is
    a TypeError saying how to make one (a tuple of seconds failed deep in the reader)."""
    if time_range is None:
        return WHOLE
    if not isinstance(time_range, TimeRange):
        raise TypeError(f"time_range: a TimeRange, not {type(time_range).__name__} "
                        "(TimeRange.parse('5.5', '6.0') for seconds, TimeRange(start_ns, "
                        "end_ns) for nanoseconds)")
    return time_range



def _nanoseconds(text: str) -> int:
    m = _TIME.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a time: write seconds (12.5), or 12.5s, 300ms, "
                         "250us")
    ns = float(m.group(1)) * _UNITS[m.group(2) or "s"]
    if not math.isfinite(ns) or abs(ns) >= 2**63:  # past any trace's clock (292 years)
        raise ValueError(f"{text!r} is out of range: no trace lasts that long")
    return int(round(ns))
