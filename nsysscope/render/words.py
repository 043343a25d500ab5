"""The sentences results say, made from the values they hold: registered in
:mod:`nsysscope.model.registry` when imported, so that ``Summary.notes`` (and the JSON that
writes them) says what :mod:`.notes` words, and the analysis and the gate write the verdict
and the findings' messages as :mod:`.verdict` and :mod:`.findings` word them.

Each kind of sentence is worded in one module: the notes in :mod:`.notes`, the verdict in
:mod:`.verdict`, the headline in :mod:`.headline`, the gate's findings in :mod:`.findings`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..model import (
    Check,
    Finding,
    Headline,
    Note,
    ProcessSummary,
    SiteChange,
    Summary,
    Verdict,
    registry,
)
from .findings import finding_message, gate_verdict
from .headline import headline_text
from .notes import notes_text
from .verdict import verdict_text


class Words:
    """The one :class:`~nsysscope.model.registry.Words` nsysscope ships."""

    def notes(self, notes: Sequence[Note], written: Sequence[str] | None = None) -> list[str]:
        return notes_text(notes, written)

    def verdict(self, verdict: Verdict, of: Summary | ProcessSummary) -> str:
        return verdict_text(verdict, of)

    def headline(self, headline: Headline, of: Summary) -> str:
        return headline_text(headline, of)

    def finding(self, check: Check, sites: Sequence[SiteChange], regression: bool) -> str:
        return finding_message(check, sites, regression)

    def gate_verdict(self, passed: bool, checks: Sequence[Check], regressions: Sequence[Finding],
                     improvements: Sequence[Finding], new_latent: int = 0) -> str:
        return gate_verdict(passed, checks, regressions, improvements, new_latent)

    def __reduce__(self) -> str:
        """Pickled as this module's :data:`WORDS` (a worker process imports this module, which
        registers it there)."""
        return "WORDS"


WORDS = Words()
registry.register_words(WORDS)
