"""CUDA calls that no profiler records so: the same call twice, calls without a thread, or
calls that share a correlation id. Each is damage (a file edited by hand, a bad copy, a
tool that wrote the export badly), and each misled the analysis without a word (issue 52):
every call recorded twice made a step of two "piecewise" launches, and correlation ids all
equal, or every thread id NULL, read as "healthy" or as "the profiler lost the GPU
activity".

The reader keeps one of calls repeated exactly (same thread, times, correlation id and
name: what the export meant), and says how many; it refuses a trace where calls have no
thread or share their correlation id with another call of their process, since nothing then
ties a call to the GPU work it launched or to the thread that waited."""

from __future__ import annotations

import pandas as pd

from ..errors import DamagedExport
from ..model import Note

#: the share of calls that may lack a thread or repeat a correlation id before the trace is
#: refused: none of the 34 nsys exports of the samples (20,000 to 220,000 calls each, three
#: GPU sessions, nsys 2023.4 and 2025.3) nor the 10 torch.profiler captures has one; 1 %
#: lets a few damaged rows through (the report's figures hardly move), not a rewritten table
MAX_DAMAGED = 0.01


def checked_calls(api: pd.DataFrame, path: object, capture: tuple[int, int] | None = None
                  ) -> tuple[pd.DataFrame, tuple[Note, ...]]:
    """``api`` (the CUDA calls read: ``tid``, ``proc``, ``start_ns``, ``end_ns``,
    ``corr_id``, ``name``) with exact repeats read once and calls that start outside the
    ``capture`` (its start and stop, as the profiler recorded them) left out, and the
    reader's notes on them; :class:`DamagedExport` where more than :data:`MAX_DAMAGED` of
    the calls start outside the capture, have no thread or share a correlation id with
    another call of their process."""
    notes: tuple[Note, ...] = ()
    if not len(api):
        return api, notes
    if capture is not None:
        # every call of the 34 sample exports lies inside nsys's record of the capture (the
        # first 2.5-5.9 s after its start, the last 1.0-1.9 s before its stop): one that
        # starts outside (moved by 2^62 ns: a median overlap window of -816 ms) is damage.
        # An end alone out of place (zeroed) is a row that ends before it starts, read as it
        # is with its own note (.backwards)
        outside = ~api["start_ns"].between(*capture)
        n = int(outside.sum())
        if n > MAX_DAMAGED * len(api):
            raise DamagedExport(f"{path}: corrupt export: {n} of {len(api)} CUDA calls start "
                                "outside the capture nsys recorded (their times are damaged)")
        if n:
            api = api[~outside].reset_index(drop=True)
            notes += (Note("calls_outside_capture", {"calls": n}),)
    repeated = api.duplicated(["tid", "start_ns", "end_ns", "corr_id", "name"])
    if repeated.any():
        n = int(repeated.sum())
        api = api[~repeated].reset_index(drop=True)
        notes += (Note("calls_recorded_twice", {"calls": n}),)
    total = len(api)
    no_thread = int((api["tid"] < 0).sum())
    if no_thread > MAX_DAMAGED * total:
        raise DamagedExport(f"{path}: corrupt export: {no_thread} of {total} CUDA calls have "
                            "no thread (globalTid NULL): what waited on what cannot be told")
    known = api[api["corr_id"] >= 0]
    shared = int(known.duplicated(["proc", "corr_id"], keep=False).sum())
    if shared > MAX_DAMAGED * total:
        raise DamagedExport(f"{path}: corrupt export: {shared} of {total} CUDA calls share "
                            "their correlation id with another call of their process (a "
                            "profiler gives each its own): no call can be tied to the GPU "
                            "work it launched")
    return api, notes
