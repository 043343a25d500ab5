"""What the gate's verdict and findings say: the verdict line (``REGRESSION: 4 of 9 checks
fail: ...``), a check's change (``GPU idle gap p50: 30.6 us -> 2.01 ms (+1.98 ms, +6486%)``)
and the place it points at. The gate decides the checks and the sites that changed; their
sentences are made here (``GateResult.verdict``, ``Finding.message``, through the registered
words: :mod:`.words`), and the Markdown report lists each check's change under its site."""

from __future__ import annotations

from collections.abc import Sequence

from ..model import NA, Check, Finding, SiteChange
from ..util.units import us


def check_change(c: Check) -> str:
    """A finding's first line: the metric's change."""
    assert c.baseline is not None and c.candidate is not None and c.change is not None
    if c.unit == "%":
        base = f"{c.label}: {c.baseline:.1f}% -> {c.candidate:.1f}% ({c.change:+.1f} pp)"
        return base + (f", {c.detail}" if c.metric.startswith("stalls.") else "")
    if c.unit == "us":
        return (f"{c.label}: {us(c.baseline)} -> {us(c.candidate)} "
                f"({'+' if c.change >= 0 else '-'}{us(abs(c.change))}, {c.change_pct:+.1f}%)")
    return (f"{c.label}: {c.baseline:.1f}{c.unit} -> {c.candidate:.1f}{c.unit} "
            f"({c.change_pct:+.1f}%)")


def finding_message(c: Check, sites: Sequence[SiteChange], regression: bool) -> str:
    """The finding's line: the check's change, and where its biggest site is (or, for a
    regression of a check of no class, that no stall site grew)."""
    msg = check_change(c)
    if sites:
        return msg + f"; at {sites[0].where}" + (f" ({sites[0].api_chain})"
                                                 if sites[0].api_chain else "")
    if regression and not c.metric.startswith("stalls."):
        msg += "; no stall site grew: the per-step host or GPU work itself changed"
    return msg


def gate_verdict(passed: bool, checks: Sequence[Check], regressions: Sequence[Finding],
                 improvements: Sequence[Finding], new_latent: int = 0) -> str:
    """The one line that says what the gate decided (``new_latent``: how many patterns not
    yet costing overlap the candidate added)."""
    tested = sum(c.status != NA for c in checks)
    by_name = {c.name: c for c in checks}
    latent = (f"; {new_latent} new pattern{'s' if new_latent > 1 else ''} not yet costing "
              "overlap (notes)") if new_latent else ""
    if passed:
        line = f"PASS: no overlap regression ({tested} checks)"
        if improvements:
            line += "; improved: " + "; ".join(_short(by_name[f.check], f) for f in improvements)
        return line + latent
    return (f"REGRESSION: {len(regressions)} of {tested} checks fail: "
            + "; ".join(_short(by_name[f.check], f) for f in regressions)) + latent


def _short(c: Check, f: Finding) -> str:
    """One clause of the verdict line."""
    if c.metric.startswith("stalls."):
        where = f" at {f.sites[0].where}" if f.sites else ""
        return f"{c.label} {c.baseline:.1f}% -> {c.candidate:.1f}%{where}"
    if c.unit == "%":
        return f"{c.label} {c.baseline:.1f}% -> {c.candidate:.1f}%"
    if c.unit == "us":
        return f"{c.label} {us(c.baseline)} -> {us(c.candidate)} ({c.change_pct:+.0f}%)"
    return f"{c.label} {c.baseline:.1f}{c.unit} -> {c.candidate:.1f}{c.unit} ({c.change_pct:+.1f}%)"
