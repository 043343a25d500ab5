"""Many traces at once: one row per trace, an aggregate row and the trace that stalls most, as
text, Markdown or JSON (``nsysscope.many/1``)."""

from __future__ import annotations

import json
import os

from ..batch.aggregate import shown_names
from ..model import BatchResult
from ..util.text import DEFAULT_WIDTH, wrap
from ..util.units import plural, us
from .base import cell, md_text

_HEAD = ["rank", "trace", "launches", "steady", "stalls", "stall %", "window p50",
         "GPU idle p50", "GPU busy", "launches/s", "verdict"]
#: with --timings: each trace's wall time, after its numbers
_SECONDS = "seconds"
#: the columns of the first table where the whole one is too wide for the terminal (the rest
#: follow in a second, the rank and trace repeated): what a reader looks for first
_FIRST = ("rank", "trace", "stall %", "GPU busy", "launches/s", "verdict")
#: the columns aligned right (numbers)
_LEFT = frozenset({"trace", "verdict"})
#: the shortest a trace name is cut to
_MIN_CUT = 12


def _num(x: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def _time(v_us: float | None) -> str:
    """A time in the report's units (``185.8 us``, ``2.01 ms``), ``-`` when missing."""
    return "-" if v_us is None else us(v_us)


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


def _head(b: BatchResult) -> list[str]:
    return [*_HEAD[:-1], _SECONDS, _HEAD[-1]] if b.timed else list(_HEAD)


def _rows(b: BatchResult) -> list[list[str]]:
    """One row per trace, then the aggregate row, in :func:`_head`'s columns. A trace that
    failed says so in its verdict cell; its error is listed under the table
    (:func:`_failed`), where a long message cannot widen the table."""
    agg = b.aggregate
    rows = []
    names = shown_names([r.path for r in b.traces])
    for r in b.traces:
        name = names[r.path]
        s = r.summary
        seconds = [_num(r.seconds, "{:.2f}")] if b.timed else []
        if s is None:
            rows.append([r.label, name, "-", "-", "-", "-", "-", "-", "-", "-", *seconds,
                         f"error, exit {r.exit_code}"])
            continue
        rows.append([r.label, name, str(s.launches), str(s.steady_launches), str(r.stalled),
                     f"{r.stall_share:.1%}", _time(s.window_us.p50), _time(s.gpu_gap_us.p50),
                     _num(s.gpu_busy, "{:.1%}"), _num(s.rate), *seconds,
                     s.verdict.split(":")[0]])
    broken = any(r.summary is not None and r.summary.steady_launches and
                 not r.summary.overlap_ok for r in b.traces)
    timed = [_num(b.seconds, "{:.1f}")] if b.timed else []
    rows.append(["all", f"{agg.analysed} of {agg.traces} traces", str(agg.launches),
                 str(agg.steady_launches), str(sum(agg.stalls.values())),
                 f"{agg.stall_share:.1%}", _time(agg.window_p50_us),
                 _time(agg.gpu_idle_p50_us),
                 _num(agg.gpu_busy_mean, "{:.1%}") + " mean",
                 _num(agg.launches_per_s_mean) + " mean", *timed,
                 "OVERLAP BROKEN somewhere" if broken else
                 ("overlap ok" if agg.steady_launches else
                  "nothing steady to judge" if agg.analysed else "")])
    return rows


def _widths(head: list[str], rows: list[list[str]]) -> list[int]:
    return [max(len(head[j]), *(len(r[j]) for r in rows)) for j in range(len(head))]


def _name_width(head: list[str], rows: list[list[str]], width: int) -> int:
    """How wide the trace names may be for the table to fit ``width``: no narrower than
    :data:`_MIN_CUT` or the aggregate row's ``3 of 3 traces``."""
    widths = _widths(head, rows)
    j = head.index("trace")
    other = sum(widths) - widths[j] + 2 * (len(widths) - 1)
    return min(widths[j], max(_MIN_CUT, len(rows[-1][j]), width - other))


#: where a word of a file name ends
_BOUNDARY = frozenset("/_-. ")


def _cut(names: list[str], n: int) -> list[str]:
    """Each of ``names`` in at most ``n`` characters, keeping what tells them apart: the part
    between their common start and common end (``h200_case1_300.sqlite.xz`` beside
    ``h200_case2_300.sqlite.xz``: ``case1``), widened to the start of its word, then to the
    right and the left as far as ``n`` allows, ``…`` where it is cut (cut at their start,
    the three samples all read ``…_300.sqlite.xz``)."""
    if max(map(len, names), default=0) <= n:
        return names
    start = len(os.path.commonprefix(names))
    end = len(os.path.commonprefix([x[::-1] for x in names]))
    out = []
    for name in names:
        a, b = min(start, len(name)), max(len(name) - end, min(start, len(name)))

        def size(a: int, b: int, name: str = name) -> int:
            return (b - a) + (a > 0) + (b < len(name))
        if size(a, b) > n:  # the differing part alone is too long: its end
            a, b = len(name) - (n - 1), len(name)
        while a > 0 and name[a - 1] not in _BOUNDARY and size(a - 1, b) <= n:
            a -= 1
        while b < len(name) and size(a, b + 1) <= n:
            b += 1
        while a > 0 and size(a - 1, b) <= n:
            a -= 1
        out.append(("\u2026" if a > 0 else "") + name[a:b] + ("\u2026" if b < len(name) else ""))
    return out


def _table(head: list[str], rows: list[list[str]], names: int) -> list[str]:
    """``head`` and ``rows`` (the last one the aggregate, under a rule) as aligned text, the
    traces' names longer than ``names`` cut (:func:`_cut`)."""
    j = head.index("trace")
    cut = _cut([r[j] for r in rows[:-1]], names)
    rows = [[*r[:j], c, *r[j + 1:]] for r, c in zip(rows, [*cut, rows[-1][j]], strict=True)]
    widths = _widths(head, rows)

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if h in _LEFT else c.rjust(w)
                         for h, c, w in zip(head, cells, widths, strict=True)).rstrip()

    rule = line(["-" * w for w in widths])
    return [line(head), rule, *(line(r) for r in rows[:-1]), rule, line(rows[-1])]


def render_text(b: BatchResult, width: int | None = None) -> str:
    """The table, within ``width`` columns (the terminal's; 80 when not given): where all the
    columns do not fit, the first table holds :data:`_FIRST` and a second the rest, each
    with the rank and trace; a long trace name or verdict is cut (the full name in the JSON
    output, the full error under the table)."""
    w = width or DEFAULT_WIDTH
    agg = b.aggregate
    head, rows = _head(b), _rows(b)
    lines = [f"nsysscope report: {plural(agg.traces, 'trace')}{how(b)}", ""]
    if sum(_widths(head, rows)) + 2 * (len(head) - 1) <= w:
        lines += _table(head, rows, 10_000)
    else:  # two tables, the trace names cut alike in both
        parts = [list(_FIRST), [h for h in head if h not in _FIRST or h in _FIRST[:2]]]
        cells = [[[r[head.index(h)] for h in part] for r in rows] for part in parts]
        names = min(_name_width(p, c, w) for p, c in zip(parts, cells, strict=True))
        lines += _table(parts[0], cells[0], names) + [""] + _table(parts[1], cells[1], names)
    lines += ["", *wrap(agg.worst_line, w), *_failed(b, w)]
    return "\n".join(lines) + "\n"


def _failed(b: BatchResult, width: int | None = None, md: bool = False) -> list[str]:
    """The traces that could not be analysed, each with its error (none where none failed),
    wrapped to ``width``, or (``md``) as a Markdown list, the errors' names escaped."""
    failed = [r for r in b.traces if r.summary is None]
    if not failed:
        return []
    names = shown_names([r.path for r in b.traces])
    out = [f"{len(failed)} trace(s) could not be analysed:"]
    for r in failed:
        error = str(r.error)  # it names its trace by the path given: named as the table does
        if error.startswith(f"{r.path}: "):
            error = names[r.path] + error[len(r.path):]
        text = f"{error} (exit {r.exit_code})"
        out += [f"- {md_text(text)}"] if md else wrap(text, width, "  - ", "    ")
    return out


def render_markdown(b: BatchResult) -> str:
    head, rows = _head(b), _rows(b)
    lines = [f"## nsysscope report: {b.aggregate.traces} traces{md_text(how(b))}", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows[:-1]]
    lines += ["| " + " | ".join(f"**{cell(c)}**" for c in rows[-1]) + " |", "",
              md_text(b.aggregate.worst_line), *_failed(b, md=True), ""]
    return "\n".join(lines)


def render_json(b: BatchResult) -> str:
    return json.dumps(b.to_dict(), indent=2) + "\n"
