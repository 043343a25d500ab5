"""What the gate's findings say: a check's change (``GPU idle gap p50: 30.6 us -> 2.01 ms
(+1.98 ms, +6486%)``) and the place it points at. The gate decides the checks and the sites
that changed; their sentences are made here (``Finding.message``, through the registered
words: :mod:`.words`), and the Markdown report lists each check's change under its site."""

from __future__ import annotations

from collections.abc import Sequence

from ..model import Check, SiteChange
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
