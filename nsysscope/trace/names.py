"""A trace's names as they are read: cut and made printable once, where they enter nsysscope.

Every string of a trace is the sender's: a 1 MB NVTX or kernel name made the HTML report run
for minutes and ``export --all-kernels`` take 19 GB, an escape sequence in a thread's name
reached the terminal (issue 52). Each reader (nsys and Kineto alike) reads a name through
:func:`sql_name` (SQLite hands over at most one character past the cap, never the whole
value) and keeps :func:`~nsysscope.util.text.name_text` of it (cut to
:data:`~nsysscope.util.text.NAME_CAP` characters, then printable): so the analysis, every
renderer and every export only ever see names of bounded length that are safe to print, and
the time and memory of a report follow its rows, not the length of its names.
:func:`cut_names_note` counts the names that were cut, for the report's notes.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from ..model import Note
from ..util.text import NAME_CAP, name_text, was_cut

#: the most characters an HTML-escaped name may take for one of the text (``&#x1F600;``)
_ESCAPED = 10


def sql_name(column: str, escaped: bool = False) -> str:
    """SQL that reads ``column`` (text) as at most one character more than the cap: enough
    to tell a cut name from one at the cap, and no more held in memory (``escaped``: text
    HTML-escaped, as nsys keeps Python frames' names: room for an entity a character)."""
    return f"substr({column}, 1, {(NAME_CAP + 1) * (_ESCAPED if escaped else 1)})"


def names_of(values: Iterable[object]) -> list[str]:
    """:func:`~nsysscope.util.text.name_text` of each of ``values``."""
    return [name_text(v) for v in values]


def name_categorical(codes: np.ndarray, raw: Iterable[object]) -> pd.Categorical:
    """A Categorical of ``name_text(raw[code])`` per code (-1: missing), its categories the
    distinct names present, sorted: raw names that differ only past the cap become one."""
    names = np.array(names_of(raw), dtype=object)
    codes = np.asarray(codes, dtype=np.int64)
    if not len(names):
        return pd.Categorical.from_codes(np.full(len(codes), -1, dtype=np.int64),
                                         categories=pd.Index([], dtype=object))
    used = np.unique(codes[codes >= 0])
    distinct, inverse = np.unique(names[used].astype(object), return_inverse=True) \
        if len(used) else (np.zeros(0, dtype=object), np.zeros(0, dtype=np.int64))
    remap = np.full(len(names) + 1, -1, dtype=np.int64)  # the last: missing stays missing
    remap[used] = inverse
    return pd.Categorical.from_codes(remap[codes], categories=pd.Index(distinct.tolist(),
                                                                         dtype=object))


def cleaned(values: pd.Series | pd.Categorical) -> pd.Categorical:
    """A column of names (text or categorical) as :func:`name_categorical` keeps it."""
    cat = values if isinstance(values, pd.Categorical) else \
        pd.Categorical(pd.Series(values, dtype=object).astype(str))
    return name_categorical(np.asarray(cat.codes), cat.categories)


def cut_names_note(columns: Iterable[Iterable[object]]) -> tuple[Note, ...]:
    """The report's note on the names longer than the cap among the distinct names of
    ``columns`` (their categories, or values), or none."""
    cut = {n for col in columns for n in col if isinstance(n, str) and was_cut(n)}
    return (Note("names_cut", {"names": len(cut), "cap": NAME_CAP}),) if cut else ()
