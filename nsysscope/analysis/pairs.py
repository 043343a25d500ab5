"""Find rows by a pair of integer keys: a CUDA call by (thread, correlation id).

Correlation ids restart in every process, so calls are looked up by thread and id. A pandas
MultiIndex over a million API calls is slow to build and to search; :class:`PairIndex` codes
each pair as one integer (its position among the table's distinct values of either key) and
searches a flat index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class PairIndex:
    """The first row of every distinct (a, b) pair of a table."""

    a: pd.Index  # the distinct values of a
    b: pd.Index  # the distinct values of b
    codes: np.ndarray  # the code of each distinct pair, sorted, then a sentinel
    rows: np.ndarray  # the first row of each pair, as ``codes``

    @classmethod
    def of(cls, a: Any, b: Any) -> PairIndex:
        a, b = np.asarray(a), np.asarray(b)
        ua, ub = pd.Index(pd.unique(a)), pd.Index(pd.unique(b))
        code = ua.get_indexer(a).astype(np.int64) * len(ub) + ub.get_indexer(b)
        codes, rows = np.unique(code, return_index=True)  # first row of each pair
        # a last code above every other, found by none, keeps every search in bounds
        return cls(ua, ub, np.append(codes, np.iinfo(np.int64).max), np.append(rows, -1))

    def first_row(self, a: Any, b: Any) -> np.ndarray:
        """The first row of each (a, b) pair in the table (-1: none)."""
        ca, cb = self.a.get_indexer(np.asarray(a)), self.b.get_indexer(np.asarray(b))
        code = np.where((ca >= 0) & (cb >= 0), ca.astype(np.int64) * len(self.b) + cb, -1)
        at = np.searchsorted(self.codes, code)
        return np.where(self.codes[at] == code, self.rows[at], -1)
