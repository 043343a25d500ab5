"""The gate's report as Markdown, sized for a pull-request comment or a job summary."""

from __future__ import annotations

from ..gate import arrange
from ..model import CHANGED, FAIL, IMPROVED, NA, Finding, GateResult
from ..util.units import us
from .base import cell as _cell
from .gate_text import cells as text_cells
from .gate_text import ci, same_as, side_line

ICON = {"pass": "\u2705 pass", FAIL: "\u274c **FAIL**", IMPROVED: "\u2b06\ufe0f improved",
        NA: "\u2796 n/a", CHANGED: "\u2139\ufe0f changed"}


def _findings(title: str, findings: tuple[Finding, ...]) -> list[str]:
    if not findings:
        return []
    out = ["", f"### {title}", ""]
    for item in arrange(findings):
        f = item.finding
        out.append(f"- **{_cell(f.message)}**")
        if item.only_repeats:
            out.append(f"  - {same_as(item)} as above")
            continue
        for s in f.sites:
            line = f"  - `{s.klass}` at {_cell(s.where)}: {s.baseline_count} \u2192 " \
                   f"{s.candidate_count} launches, {us(s.lost_us)} GPU idle"
            if s.api_chain:
                line += f"; chain `{_cell(s.api_chain)}`"
            if s.source:
                line += f"; `{_cell(s.source)}`"
            if s.source_text:
                line += f": `{_cell(s.source_text)}`"
            out.append(line)
        if f.fix:
            out.append(f"  - **Fix:** {_cell(f.fix)}")
    return out


def render(r: GateResult) -> str:
    icon = "\u2705" if r.passed else "\u274c"
    out = [f"## nsysscope gate: {icon} {_cell(r.verdict)}", "",
           f"- baseline: `{_cell(side_line(r.baseline))}`",
           f"- candidate: `{_cell(side_line(r.candidate))}`", "",
           "| metric | baseline | candidate | change | threshold | p | result |",
           "|---|---:|---:|---:|---|---:|---|"]
    for c in r.checks:
        row = list(text_cells(c))
        if c.ci:
            row[3] += f"<br><sub>{ci(c)}</sub>"
        row[6] = ICON.get(c.status, c.status)
        out.append("| " + " | ".join(_cell(v) for v in row) + " |")
    out += _findings("Regressions", r.regressions)
    out += _findings("Improvements", r.improvements)
    if r.notes:
        out += ["", "<details><summary>Notes</summary>", ""] + [f"- {_cell(n)}" for n in r.notes]
        out += ["", "</details>"]
    return "\n".join(out) + "\n"
