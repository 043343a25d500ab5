"""What the gate says of two servers' traces besides its checks: what start-up and idle left
out (never a check: each side's steady state is compared, whatever its start-up, its idle time
or its load), and how each graph exec (a batch-size bucket) changed, where both sides replay
several: a regression that sits in a few buckets shows there first."""

from __future__ import annotations

from ..model import GraphExec, Note, Summary

#: at most this many buckets are listed (the most steady launches first)
MAX_LISTED = 8


def serving_notes(base: Summary, cand: Summary) -> list[Note]:
    """The notes (none for two traces without start-up, idle or several graph execs)."""
    notes = []
    if any(s.startup or s.idle for s in (base, cand)):
        notes.append(Note("serving_left_out", {"baseline": _left_out(base),
                                               "candidate": _left_out(cand)}))
    if base.graphs and cand.graphs:
        notes.append(_buckets(base.graphs, cand.graphs))
    return notes


def _left_out(s: Summary) -> dict[str, float | None]:
    """What a side left out: its start-up launches, its idle periods and their time (None:
    none)."""
    return {"startup_launches": s.startup.launches if s.startup else None,
            "idle_periods": s.idle.periods if s.idle else None,
            "idle_us": s.idle.total_us if s.idle else None}


def _keyed(graphs: list[GraphExec]) -> dict[tuple[int, int], GraphExec]:
    """The execs by (their process's place in pid order, exec id): two runs' pids differ."""
    order = {p: i for i, p in enumerate(sorted({g.pid for g in graphs}))}
    return {(order[g.pid], g.graph_exec): g for g in graphs}


def _buckets(base: list[GraphExec], cand: list[GraphExec]) -> Note:
    """Each graph exec's numbers on both sides (``exec 14: 40 -> 38 steady, stalls 0 -> 0,
    launch-bound 2 -> 3, window p50 ...``): execs matched by the trace's id (the same engine
    captures them in the same order), processes by pid order; the most steady launches
    first."""
    b, c = _keyed(base), _keyed(cand)
    keys = sorted(set(b) | set(c), key=lambda k: -max(b[k].steady if k in b else 0,
                                                       c[k].steady if k in c else 0))
    rows: list[dict[str, object]] = []
    for k in keys[:MAX_LISTED]:
        x, y = b.get(k), c.get(k)
        if x is None or y is None:
            rows.append({"exec": k[1], "only_in": "candidate" if x is None else "baseline"})
            continue
        rows.append({"exec": k[1], **{f: [getattr(x, f), getattr(y, f)] for f in (
            "steady", "stalls", "launch_bound", "window_us", "gpu_us")}})
    return Note("graph_execs", {"execs": rows, "more": max(0, len(keys) - MAX_LISTED)})
