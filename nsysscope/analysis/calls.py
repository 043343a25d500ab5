"""Every CUDA call in thread order, found by (thread, correlation id).

Two questions are asked of a call's neighbours on its thread: which call came right before a
sync or a record (the copy that caused a block, :mod:`.pairing`), and whether the call right
after a copy synchronises (:mod:`.latent`). The calls are sorted and indexed once per
analysis for both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .keys import KeyIndex


@dataclass(frozen=True)
class ThreadCalls:
    """``table``: the API calls' ``tid, corr_id, name``, sorted by thread, then start (the
    columns their neighbours are asked about: a copy of the whole table would double the
    memory of the largest one); ``index`` finds them by (thread, correlation id), which is
    unique in a process only."""

    table: pd.DataFrame
    index: KeyIndex
    #: the rows of ``table`` as positions in the API table (for its other columns)
    order: np.ndarray
    #: each row's start (ns): a thread's calls in a time span (:meth:`busy_between`)
    starts: np.ndarray

    @classmethod
    def of(cls, api: pd.DataFrame) -> ThreadCalls:
        order = np.lexsort((api["start_ns"].to_numpy(), api["tid"].to_numpy()))
        table = api[["tid", "corr_id", "name"]].iloc[order]
        return cls(table, KeyIndex.of(table["tid"], table["corr_id"]), order,
                   api["start_ns"].to_numpy()[order])

    def busy_between(self, tid: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Per (thread, start, end): whether the thread made a call that started in
        ``[start, end]``."""
        tids = self.table["tid"].to_numpy()
        out = np.zeros(len(tid), dtype=bool)
        for t in np.unique(tid):  # a few threads
            rows = np.flatnonzero(tid == t)
            own = self.starts[np.searchsorted(tids, t, side="left"):
                              np.searchsorted(tids, t, side="right")]
            out[rows] = np.searchsorted(own, end[rows], side="right") > \
                np.searchsorted(own, start[rows], side="left")
        return out

    @property
    def follows_on_thread(self) -> np.ndarray:
        """Per row of ``table``: whether the row before it is a call of the same thread."""
        tid = self.table["tid"].to_numpy()
        return np.concatenate([[False], tid[1:] == tid[:-1]])

    def row(self, tid: Any, corr_id: Any) -> np.ndarray:
        """The row in ``table`` of each call (-1: not traced)."""
        return self.index.first_row(tid, corr_id)
