"""The sentences results say, made from the values they hold: registered in
:mod:`nsysscope.model.registry` when imported, so that ``Summary.notes`` (and the JSON that
writes them) says what :mod:`.notes` words.

Each kind of sentence is worded in one module: the notes in :mod:`.notes`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..model import Note, registry
from .notes import notes_text


class Words:
    """The one :class:`~nsysscope.model.registry.Words` nsysscope ships."""

    def notes(self, notes: Sequence[Note], written: Sequence[str] | None = None) -> list[str]:
        return notes_text(notes, written)

    def __reduce__(self) -> str:
        """Pickled as this module's :data:`WORDS` (a worker process imports this module, which
        registers it there)."""
        return "WORDS"


WORDS = Words()
registry.register_words(WORDS)

