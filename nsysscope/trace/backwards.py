"""Rows that end before they start: damage the reader keeps as it is, and says.

nsys never writes such a row, but a damaged export (a bad page, a file edited by hand) can
hold some. They are read as they are (dropping them would lose the launch or wait they are),
and the report says how many there were, where before the figures moved without a word
(a CUDA call's negative length shortens the block it is part of)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd

from ..model import Note


def backwards_rows(tables: Iterable[pd.DataFrame],
                   owns: Callable[[np.ndarray], np.ndarray] | None = None) -> int:
    """How many rows of ``tables`` (each with ``start_ns`` and ``end_ns``: CUDA calls, eager
    GPU work, NVTX ranges) end before they start; ``owns``: the rows counted, by start (a
    window's own, so that the rows two windows read count once)."""
    n = 0
    for t in tables:
        start, end = t["start_ns"].to_numpy(), t["end_ns"].to_numpy()
        bad = end < start
        n += int((bad & owns(start)).sum() if owns is not None else bad.sum())
    return n


def backwards_note(n: int) -> tuple[Note, ...]:
    """The reader's note on ``n`` rows that end before they start (none for 0)."""
    return (Note("rows_backwards", {"rows": n}),) if n else ()
