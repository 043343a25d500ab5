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

    @classmethod
    def of(cls, api: pd.DataFrame) -> ThreadCalls:
        order = np.lexsort((api["start_ns"].to_numpy(), api["tid"].to_numpy()))
        table = api[["tid", "corr_id", "name"]].iloc[order]
        return cls(table, KeyIndex.of(table["tid"], table["corr_id"]), order)

    @property
    def follows_on_thread(self) -> np.ndarray:
        """Per row of ``table``: whether the row before it is a call of the same thread."""
        tid = self.table["tid"].to_numpy()
        return np.concatenate([[False], tid[1:] == tid[:-1]])

    def row(self, tid: Any, corr_id: Any) -> np.ndarray:
        """The row in ``table`` of each call (-1: not traced)."""
        return self.index.first_row(tid, corr_id)
