"""The gate's terminal report: verdict, side-by-side table, regressions with their sites and
fixes, improvements, notes. The cell formatting here is shared by the other gate renderers.

Every line fits ``width`` columns (the terminal's, 80 by default): prose is wrapped, and a
table too wide for the terminal is split in two (the values, then each check's threshold and
p-value).
"""

from __future__ import annotations

from ..model import CHANGED, FAIL, IMPROVED, NA, Check, Finding, GateResult, Side
from ..util.text import DEFAULT_WIDTH, wrap
from ..util.units import us
from .gate_parts import ListedFinding, arrange
from .report_parts import captured_by

COLUMNS = ("metric", "baseline", "candidate", "change", "threshold", "p", "result")
#: the columns of numbers (right-aligned in Markdown and HTML)
NUMERIC = frozenset({"baseline", "candidate", "change", "p"})
RESULT_WORD = {"pass": "pass", FAIL: "FAIL", IMPROVED: "improved", NA: "n/a", CHANGED: "changed"}
def pauses_left_out(r: GateResult) -> str:
    """Where a gate's numbers differ from ``nsysscope report``'s for the same trace, and why
    (the note every gate output ends with)."""
    q = 100 * float(r.thresholds.get("pause_quantile", 0.99))
    if q >= 100:
        return ("The gate keeps host pauses in its GPU idle fraction and launch rate "
                "(--pause-quantile 1), as 'nsysscope report' does.")
    return (f"The gate's GPU idle fraction and launch rate leave host pauses out (GPU idle "
            f"gaps above the p{q:g} of their own, --pause-quantile), so they can differ from "
            "the GPU busy and launches/s of 'nsysscope report' for the same trace.")


def value(c: Check, v: float | None) -> str:
    if v is None:
        return "n/a"
    if c.unit == "%":
        return f"{v:.1f}%"
    if c.unit == "us":
        return us(v)
    return f"{v:.1f}{c.unit}"


def change(c: Check) -> str:
    if c.change is None:
        return "-"
    if c.unit == "%":
        return f"{c.change:+.1f} pp"
    rel = f" ({c.change_pct:+.1f}%)" if c.change_pct is not None else ""
    if c.unit == "us":
        return f"{'+' if c.change >= 0 else '-'}{us(abs(c.change))}{rel}"
    return f"{c.change:+.1f}{c.unit}{rel}"


def ci(c: Check) -> str:
    if not c.ci:
        return ""
    return f"95% CI {us(c.ci[0])} .. {us(c.ci[1])}"


def p_value(c: Check) -> str:
    if c.p_value is None:
        return "-"
    return "<1e-16" if c.p_value < 1e-16 else f"{c.p_value:.2g}"


def cells(c: Check) -> tuple[str, ...]:
    """One table row: metric, baseline, candidate, change, threshold, p, result."""
    return (c.label, value(c, c.baseline), value(c, c.candidate), change(c), c.threshold,
            p_value(c), RESULT_WORD.get(c.status, c.status))


def side_line(s: Side) -> str:
    gpus = ", ".join(s.gpus) or "GPU unknown"
    return (f"{s.label}  ({captured_by(s.nsys_version)}, {gpus}, {s.steady_launches} steady of "
            f"{s.launches} launches)")


def side_headline(s: Side) -> str:
    """What a side's report says first (its headline; its verdict where it has none)."""
    return s.headline or s.verdict


def site_lines(f: Finding, indent: str = "     ", width: int | None = None) -> list[str]:
    """A finding's sites, one block each; ``width`` wraps them (None: one line per item)."""
    w = width or 10_000
    out = []
    sub = indent + " " * 11
    for s in f.sites:
        out += wrap(f"at {s.where}: {s.klass} on {s.baseline_count} -> {s.candidate_count} "
                    f"launches, {us(s.lost_us)} GPU idle", w, indent, indent + "   ")
        if s.source:
            text = f": {s.source_text}" if s.source_text else ""
            out += wrap(f"{s.source}{text}", w, f"{indent}   source: ", sub)
        if s.api_chain:
            out += wrap(s.api_chain, w, f"{indent}   chain:  ", sub)
        if s.nvtx_path:
            out += wrap(f"{s.nvtx_path} (first one)", w, f"{indent}   NVTX:   ", sub)
    return out


def same_as(item: ListedFinding) -> str:
    """What a finding whose every site an earlier one showed says instead of the sites."""
    f = item.finding
    return f"same site{'s' if len(f.sites) > 1 else ''}{' and fix' if f.fix else ''}"


def findings_lines(findings: tuple[Finding, ...], width: int = DEFAULT_WIDTH) -> list[str]:
    """Numbered findings; sites and fixes already shown under an earlier one are referred to."""
    out: list[str] = []
    for item in arrange(findings):
        f = item.finding
        out += wrap(f.message, width, f"  {item.number}. ", "     ")
        if item.only_repeats:
            out.append(f"     {same_as(item)} as {item.repeats[0]}.")
            continue
        out += site_lines(f, width=width)
        if f.fix:
            out += wrap(f.fix, width, "     fix: ", " " * 10)
    return out


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for i, row in enumerate(rows):
        out.append("  " + "  ".join(f"{v:<{w}}" for v, w in zip(row, widths, strict=True)
                                    ).rstrip())
        if i == 0:
            out.append("  " + "  ".join("-" * w for w in widths))
    return out


def table_lines(r: GateResult, width: int = DEFAULT_WIDTH) -> list[str]:
    """The side-by-side table of checks; split in two when it does not fit ``width``. The
    checks of one process (``process0/...``) follow a row that names it, their metrics
    without the prefix, so that several processes do not widen the table."""
    rows: list[tuple[str, ...]] = [COLUMNS]
    scoped = any("/" in c.name for c in r.checks)
    scope = None
    for c in r.checks:
        here = c.name.split("/", 1)[0] if "/" in c.name else ""
        if scoped and here != scope:
            rows.append((f"{here or 'all processes'}:",) + ("",) * (len(COLUMNS) - 1))
        scope = here
        row = cells(c)
        rows.append((row[0].removeprefix(f"{scope}: "),) + row[1:] if scope else row)
    full = _table(rows)
    if max(len(line) for line in full) <= width:
        return full
    values = [tuple(row[i] for i in (0, 1, 2, 3, 6)) for row in rows]
    rules = [tuple(row[i] for i in (0, 4, 5)) for row in rows]
    return _table(values) + ["", *wrap("Each check's threshold (the change that fails it) and "
                                       "the p-value of its test:", width, "  ")] + _table(rules)


def render(r: GateResult, width: int | None = None) -> str:
    w = width or DEFAULT_WIDTH
    out = wrap(r.verdict, w, "nsysscope gate: ", "  ")
    out += ["", *wrap(f"baseline:  {side_line(r.baseline)}", w, "  ", " " * 13),
            *wrap(f"candidate: {side_line(r.candidate)}", w, "  ", " " * 13),
            *wrap(side_headline(r.candidate), w, " " * 13, " " * 15), ""]
    out += table_lines(r, w)
    for title, findings in (("Regressions", r.regressions), ("Improvements", r.improvements)):
        if not findings:
            continue
        out += ["", title] + findings_lines(findings, w)
    out += ["", "Notes"]
    for n in (*r.notes, pauses_left_out(r)):
        out += wrap(n, w, "  - ")
    return "\n".join(out) + "\n"
