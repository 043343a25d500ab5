"""What the gate says of two servers' traces besides its checks: what start-up and idle left
out (never a check: each side's steady state is compared, whatever its start-up, its idle time
or its load), and how each graph exec (a batch-size bucket) changed, where both sides replay
several: a regression that sits in a few buckets shows there first."""

from __future__ import annotations

from ..model import GraphExec, Summary
from ..util.units import us

#: at most this many buckets are listed (the most steady launches first)
MAX_LISTED = 8


def serving_notes(base: Summary, cand: Summary) -> list[str]:
    """The notes (none for two traces without start-up, idle or several graph execs)."""
    notes = []
    if any(s.startup or s.idle for s in (base, cand)):
        notes.append("start-up and idle periods are left out of every check: baseline "
                     f"{_left_out(base)}; candidate {_left_out(cand)}")
    if base.graphs and cand.graphs:
        notes.append(_buckets(base.graphs, cand.graphs))
    return notes


def _left_out(s: Summary) -> str:
    parts = []
    if s.startup:
        parts.append(f"{s.startup.launches} start-up launches")
    if s.idle:
        parts.append(f"{s.idle.periods} idle periods ({us(s.idle.total_us)})")
    return ", ".join(parts) or "none"


def _keyed(graphs: list[GraphExec]) -> dict[tuple[int, int], GraphExec]:
    """The execs by (their process's place in pid order, exec id): two runs' pids differ."""
    order = {p: i for i, p in enumerate(sorted({g.pid for g in graphs}))}
    return {(order[g.pid], g.graph_exec): g for g in graphs}


def _buckets(base: list[GraphExec], cand: list[GraphExec]) -> str:
    """``per graph exec (...), baseline -> candidate: exec 14: 40 -> 38 steady, stalls 0 ->
    0, launch-bound 2 -> 3, window p50 ...``: execs matched by the trace's id (the same engine
    captures them in the same order), processes by pid order."""
    b, c = _keyed(base), _keyed(cand)
    keys = sorted(set(b) | set(c), key=lambda k: -max(b[k].steady if k in b else 0,
                                                       c[k].steady if k in c else 0))
    rows = []
    for k in keys[:MAX_LISTED]:
        x, y = b.get(k), c.get(k)
        if x is None or y is None:
            rows.append(f"exec {k[1]}: only in the {'candidate' if x is None else 'baseline'}")
            continue
        rows.append(f"exec {k[1]}: {x.steady} -> {y.steady} steady, stalls {x.stalls} -> "
                    f"{y.stalls}, launch-bound {x.launch_bound} -> {y.launch_bound}, window "
                    f"p50 {us(x.window_us)} -> {us(y.window_us)}, GPU p50 {us(x.gpu_us)} -> "
                    f"{us(y.gpu_us)}")
    more = f"; {len(keys) - MAX_LISTED} more" if len(keys) > MAX_LISTED else ""
    return ("per graph exec (a batch bucket, matched by the trace's id; most steady launches "
            "first), baseline -> candidate: " + "; ".join(rows) + more)
