"""What the gate's renderers say alike: the findings as a list shows them (:func:`arrange`),
each numbered, with what an earlier one already showed (text, HTML)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..model import Finding, SiteChange


@dataclass(frozen=True)
class ListedFinding:
    """A finding as a list shows it: numbered from 1, with what an earlier one already showed."""

    number: int
    finding: Finding
    new_sites: tuple[SiteChange, ...]  # sites no earlier finding showed
    repeats: tuple[int, ...]  # the earlier findings that showed this one's other sites
    fix_shown_in: int | None  # the earlier finding that showed the same fix

    @property
    def only_repeats(self) -> bool:
        """Every site of this finding was shown under an earlier one."""
        return bool(self.finding.sites) and not self.new_sites


def arrange(findings: Sequence[Finding]) -> list[ListedFinding]:
    """Number ``findings`` and mark which of their sites and fixes an earlier one showed."""
    first_site: dict[tuple[str, str, str], int] = {}
    first_fix: dict[str, int] = {}
    out = []
    for i, f in enumerate(findings, 1):
        new = tuple(s for s in f.sites if s.key not in first_site)
        repeats = tuple(dict.fromkeys(first_site[s.key] for s in f.sites
                                      if s.key in first_site))
        for s in new:
            first_site.setdefault(s.key, i)
        fix_shown_in = first_fix.get(f.fix) if f.fix else None
        if f.fix and fix_shown_in is None:
            first_fix[f.fix] = i
        out.append(ListedFinding(i, f, new, repeats, fix_shown_in))
    return out
