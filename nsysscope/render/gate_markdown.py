"""The gate's report as Markdown, sized for a pull-request comment or a job summary.

Layout: a hidden marker (:data:`MARKER`, so a CI step can find and update the gate's own
comment), a short headline, the two sides, the regressions grouped by root cause (the stall
site that grew, with every check it moved and its fix, once), the side-by-side table of checks,
then improvements and notes.
"""

from __future__ import annotations

from ..model import CHANGED, FAIL, IMPROVED, NA, Check, Finding, GateResult, SiteChange
from ..util.units import us
from .base import cell, md_code, md_text
from .findings import check_change
from .gate_text import COLUMNS, NUMERIC, ci, pauses_left_out, side_headline, side_line
from .gate_text import cells as text_cells

ICON = {"pass": "\u2705 pass", FAIL: "\u274c **FAIL**", IMPROVED: "\u2b06\ufe0f improved",
        NA: "\u2796 n/a", CHANGED: "\u2139\ufe0f changed"}
#: the first line of every gate comment: find it to edit the gate's comment in place
MARKER = "<!-- nsysscope-gate -->"


def headline(r: GateResult) -> str:
    """``❌ REGRESSION: 4 of 8 checks fail, 1 root cause``: the comment's short title, with
    the new patterns not yet costing overlap counted, as the verdict line counts them."""
    tested = sum(c.status != NA for c in r.checks)
    n = r.new_patterns
    latent = (f"; {n} new pattern{'s' if n > 1 else ''} not yet costing overlap"
              if n else "")
    if r.passed:
        better = sum(c.status == IMPROVED for c in r.checks)
        return (f"\u2705 PASS: no overlap regression ({tested} checks"
                + (f", {better} improved" if better else "") + ")" + latent)
    failed = sum(c.status == FAIL for c in r.checks)
    causes = len(_groups(r.regressions))
    return (f"\u274c REGRESSION: {failed} of {tested} checks fail, {causes} root "
            f"cause{'s' if causes != 1 else ''}" + latent)


def _groups(findings: tuple[Finding, ...]) -> list[tuple[SiteChange | None, list[Finding]]]:
    """Findings grouped by their root cause: the first (biggest) site each points at; the
    ones with no site (the per-step work itself changed) together at the end."""
    groups: dict[tuple[str, str, str] | None, tuple[SiteChange | None, list[Finding]]] = {}
    for f in findings:
        site = f.sites[0] if f.sites else None
        key = site.key if site else None
        groups.setdefault(key, (site, []))[1].append(f)
    ordered = [g for k, g in groups.items() if k is not None]
    return ordered + ([groups[None]] if None in groups else [])


def _site_line(s: SiteChange) -> str:
    line = (f"{md_code(s.klass)} at {md_text(s.where)}: {s.baseline_count} \u2192 "
            f"{s.candidate_count} launches, {us(s.lost_us)} GPU idle")
    if s.api_chain:
        line += f"; chain {md_code(s.api_chain)}"
    if s.source:
        line += f"; {md_code(s.source)}"
        if s.source_text:
            line += f": {md_code(s.source_text)}"
    return line


def _causes(title: str, findings: tuple[Finding, ...], checks: dict[str, Check]) -> list[str]:
    if not findings:
        return []
    out = ["", f"### {title}"]
    for i, (site, group) in enumerate(_groups(findings), 1):
        head = f"{i}. {_site_line(site)}" if site else \
            f"{i}. no stall site grew: the per-step host or GPU work itself changed"
        out += ["", head]
        for f in group:
            c = checks.get(f.check)
            out.append(f"   - {md_text(check_change(c)) if c is not None else md_text(f.message)}")
        extra = [s for f in group for s in f.sites[1:]]
        seen: set[tuple[str, str, str]] = set()
        for s in extra:
            if s.key not in seen and (site is None or s.key != site.key):
                seen.add(s.key)
                out.append(f"   - also {_site_line(s)}")
        fix = next((f.fix for f in group if f.fix), None)
        if fix:
            out.append(f"   - **Fix:** {md_text(fix)}")
    return out


def render(r: GateResult) -> str:
    checks = {c.name: c for c in r.checks}
    out = [MARKER, f"## nsysscope gate: {headline(r)}", "",
           f"**Candidate:** {md_text(side_headline(r.candidate))}", "",
           f"- baseline: {md_code(side_line(r.baseline))}",
           f"- candidate: {md_code(side_line(r.candidate))}"]
    out += _causes("Regressions, by root cause", r.regressions, checks)
    out += ["", "### Checks", "",
            "| " + " | ".join(COLUMNS) + " |",
            "|" + "|".join("---:" if h in NUMERIC else "---" for h in COLUMNS) + "|"]
    for c in r.checks:
        row = [cell(v) for v in text_cells(c)]
        if c.ci:
            row[3] += f"<br><sub>{cell(ci(c))}</sub>"
        row[6] = ICON.get(c.status, cell(c.status))
        out.append("| " + " | ".join(row) + " |")
    out += _causes("Improvements", r.improvements, checks)
    out += ["", f"<sub>{md_text(pauses_left_out(r))}</sub>"]
    if r.notes:
        out += ["", "<details><summary>Notes</summary>", ""] + [f"- {md_text(n)}" for n in r.notes]
        out += ["", "</details>"]
    return "\n".join(out) + "\n"
