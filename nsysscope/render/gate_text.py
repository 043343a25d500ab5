"""The gate's terminal report: verdict, side-by-side table, regressions with their sites and
fixes, improvements, notes. The cell formatting here is shared by the other gate renderers."""

from __future__ import annotations

import textwrap

from ..gate import ListedFinding, arrange
from ..model import CHANGED, FAIL, IMPROVED, NA, Check, Finding, GateResult, Side
from ..util.units import us

COLUMNS = ("metric", "baseline", "candidate", "change", "threshold", "p", "result")
RESULT_WORD = {"pass": "pass", FAIL: "FAIL", IMPROVED: "improved", NA: "n/a", CHANGED: "changed"}


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
    return (f"{s.label}  (nsys {s.nsys_version}, {gpus}, {s.steady_launches} steady of "
            f"{s.launches} launches)")


def site_lines(f: Finding, indent: str = "     ") -> list[str]:
    out = []
    for s in f.sites:
        out.append(f"{indent}at {s.where}: {s.klass} on {s.baseline_count} -> "
                   f"{s.candidate_count} launches, {us(s.lost_us)} GPU idle")
        if s.source:
            text = f": {s.source_text}" if s.source_text else ""
            out.append(f"{indent}   source: {s.source}{text}")
        if s.api_chain:
            out.append(f"{indent}   chain:  {s.api_chain}")
        if s.nvtx_path:
            out.append(f"{indent}   NVTX:   {s.nvtx_path} (first one)")
    return out


def same_as(item: ListedFinding) -> str:
    """What a finding whose every site an earlier one showed says instead of the sites."""
    f = item.finding
    return f"same site{'s' if len(f.sites) > 1 else ''}{' and fix' if f.fix else ''}"


def findings_lines(findings: tuple[Finding, ...]) -> list[str]:
    """Numbered findings; sites and fixes already shown under an earlier one are referred to."""
    out: list[str] = []
    for item in arrange(findings):
        f = item.finding
        out.append(f"  {item.number}. {f.message}")
        if item.only_repeats:
            out.append(f"     {same_as(item)} as {item.repeats[0]}.")
            continue
        out += site_lines(f)
        if f.fix:
            out += textwrap.wrap(f.fix, width=96, initial_indent="     fix: ",
                                 subsequent_indent="          ")
    return out


def render(r: GateResult) -> str:
    out = [f"nsysscope gate: {r.verdict}", "",
           f"  baseline:  {side_line(r.baseline)}",
           f"  candidate: {side_line(r.candidate)}", ""]
    rows = [COLUMNS] + [cells(c) for c in r.checks]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    for i, row in enumerate(rows):
        out.append("  " + "  ".join(f"{v:<{w}}" for v, w in zip(row, widths, strict=True)
                                    ).rstrip())
        if i == 0:
            out.append("  " + "  ".join("-" * w for w in widths))
    for title, findings in (("Regressions", r.regressions), ("Improvements", r.improvements)):
        if not findings:
            continue
        out += ["", title] + findings_lines(findings)
    if r.notes:
        out += ["", "Notes"] + [f"  - {n}" for n in r.notes]
    return "\n".join(out) + "\n"
