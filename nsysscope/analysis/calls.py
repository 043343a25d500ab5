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

from .pairs import PairIndex


@dataclass(frozen=True)
class ThreadCalls:
    """``table``: the API calls' ``tid, corr_id, name``, sorted by thread, then start (the
    columns their neighbours are asked about: a copy of the whole table would double the
    memory of the largest one); ``index`` finds them by (thread, correlation id), which is
    unique in a process only."""

    table: pd.DataFrame
    index: PairIndex

    @classmethod
    def of(cls, api: pd.DataFrame) -> ThreadCalls:
        order = np.lexsort((api["start_ns"].to_numpy(), api["tid"].to_numpy()))
        table = api[["tid", "corr_id", "name"]].iloc[order]
        return cls(table, PairIndex.of(table["tid"], table["corr_id"]))

    def row(self, tid: Any, corr_id: Any) -> np.ndarray:
        """The row in ``table`` of each call (-1: not traced)."""
        return self.index.first_row(tid, corr_id)
