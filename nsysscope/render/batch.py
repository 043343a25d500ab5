"""Many traces at once: one row per trace, an aggregate row and the trace that stalls most, as
text, Markdown or JSON (``nsysscope.many/1``)."""

from __future__ import annotations

import json

from ..batch.aggregate import shown_names
from ..model import BatchResult
from ..util.units import plural
from .base import cell, md_text

_HEAD = ["rank", "trace", "launches", "steady", "stalls", "stall %", "window p50 us",
         "GPU idle p50 us", "GPU busy", "launches/s", "verdict"]


def _num(x: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def how(b: BatchResult) -> str:
    """How the traces were analysed, for the title, with ``--timings`` only: workers or
    cluster, and the wall time. Without it the output is the same bytes for the same traces,
    whatever ``-j`` or the machine's CPU count (the default ``-j``)."""
    if not b.timed:
        return ""
    text = f" on the Dask cluster at {b.scheduler}" if b.scheduler else \
        f" ({b.workers} worker process{'es' if b.workers > 1 else ''})"
    if b.seconds is not None:
        text += f", {b.seconds:.1f} s"
    return text


def _rows(b: BatchResult) -> list[list[str]]:
    agg = b.aggregate
    rows = []
    names = shown_names([r.path for r in b.traces])
    for r in b.traces:
        name = names[r.path]
        s = r.summary
        if s is None:
            rows.append([r.label, name, "-", "-", "-", "-", "-", "-", "-", "-",
                         f"error: {r.error}"])
            continue
        rows.append([r.label, name, str(s.launches), str(s.steady_launches), str(r.stalled),
                     f"{r.stall_share:.1%}", _num(s.window_us.p50), _num(s.gpu_gap_us.p50),
                     _num(s.gpu_busy, "{:.1%}"), _num(s.launches_per_s),
                     s.verdict.split(":")[0]])
    broken = any(r.summary is not None and r.summary.steady_launches and
                 not r.summary.overlap_ok for r in b.traces)
    rows.append(["all", f"{agg.analysed} of {agg.traces} traces", str(agg.launches),
                 str(agg.steady_launches), str(sum(agg.stalls.values())),
                 f"{agg.stall_share:.1%}", _num(agg.window_p50_us), _num(agg.gpu_idle_p50_us),
                 _num(agg.gpu_busy_mean, "{:.1%}") + " mean",
                 _num(agg.launches_per_s_mean) + " mean",
                 "OVERLAP BROKEN somewhere" if broken else
                 ("overlap ok" if agg.steady_launches else
                  "nothing steady to judge" if agg.analysed else "")])
    return rows


def render_text(b: BatchResult) -> str:
    agg = b.aggregate
    rows = _rows(b)
    widths = [max(len(_HEAD[j]), *(len(r[j]) for r in rows)) for j in range(len(_HEAD) - 1)]
    right = {0, 2, 3, 4, 5, 6, 7, 8, 9}

    def fmt(cells: list[str]) -> str:
        out = [c.rjust(widths[j]) if j in right else c.ljust(widths[j])
               for j, c in enumerate(cells[:-1])]
        return "  ".join(out + [cells[-1]]).rstrip()

    rule = fmt(["-" * w for w in widths] + ["-" * 7])
    lines = [f"nsysscope report: {plural(agg.traces, 'trace')}{how(b)}", "", fmt(_HEAD), rule]
    lines += [fmt(r) for r in rows[:-1]]
    lines += [rule, fmt(rows[-1]), "", agg.worst_line, *_failed(b)]
    return "\n".join(lines) + "\n"


def _failed(b: BatchResult) -> list[str]:
    """The line saying how many traces failed (none where none did)."""
    n = b.aggregate.failed
    return [f"{n} trace(s) could not be analysed (see their rows)."] if n else []


def render_markdown(b: BatchResult) -> str:
    rows = _rows(b)
    lines = [f"## nsysscope report: {b.aggregate.traces} traces{md_text(how(b))}", "",
             "| " + " | ".join(_HEAD) + " |", "|" + "---|" * len(_HEAD)]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows[:-1]]
    lines += ["| " + " | ".join(f"**{cell(c)}**" for c in rows[-1]) + " |", "",
              md_text(b.aggregate.worst_line), *_failed(b), ""]
    return "\n".join(lines)


def render_json(b: BatchResult) -> str:
    return json.dumps(b.to_dict(), indent=2) + "\n"
