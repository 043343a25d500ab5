"""Find rows by two integer keys: a CUDA call by (thread, correlation id).

Correlation ids restart in every process, so calls are looked up by thread and id. A pandas
MultiIndex over a million API calls is slow to build and to search; :class:`KeyIndex` packs
each key into one int64 (the code of ``a`` among its few distinct values, then ``b``: a
CUDA correlation id fits in 32 bits) and searches the sorted keys. Rows of one thread come
in time order, and so mostly in correlation-id order: sorting them is cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

#: ``b`` values packed as they are (+1, so that -1, "none", packs too)
_B_BITS = 32


@dataclass(frozen=True)
class KeyIndex:
    """The first row of every distinct (a, b) pair of a table."""

    a: pd.Index  # the distinct values of a
    b: np.ndarray | None  # the sorted distinct values of b, where b does not fit in 32 bits
    keys: np.ndarray  # the key of each distinct pair, sorted, then a sentinel
    rows: np.ndarray  # the first row of each pair, as ``keys``

    @classmethod
    def of(cls, a: Any, b: Any) -> KeyIndex:
        a, b = np.asarray(a), np.asarray(b, dtype=np.int64)
        ca, ua = pd.factorize(a)
        fits = not len(b) or (b.min() >= -1 and b.max() < (1 << _B_BITS) - 1)
        ub = None if fits else np.unique(b)
        cb = b + 1 if ub is None else np.searchsorted(ub, b)
        keys, rows = np.unique((ca.astype(np.int64) << _B_BITS) | cb, return_index=True)
        # a last key above every other, found by none, keeps every search in bounds
        return cls(pd.Index(ua), ub, np.append(keys, np.iinfo(np.int64).max),
                   np.append(rows, -1))

    def first_row(self, a: Any, b: Any) -> np.ndarray:
        """The first row of each (a, b) pair in the table (-1: none)."""
        ca = self.a.get_indexer(np.asarray(a))
        b = np.asarray(b, dtype=np.int64)
        if self.b is None:
            cb = b + 1
            known = (b >= -1) & (b < (1 << _B_BITS) - 1)
        else:
            cb = np.minimum(np.searchsorted(self.b, b), max(len(self.b) - 1, 0))
            known = self.b[cb] == b if len(self.b) else np.zeros(len(b), dtype=bool)
        key = np.where((ca >= 0) & known, (ca.astype(np.int64) << _B_BITS) | cb, -1)
        at = np.searchsorted(self.keys, key)
        return np.where(self.keys[at] == key, self.rows[at], -1)


def join_first(left: pd.DataFrame, right: pd.DataFrame, on: list[str],
               how: str = "left") -> pd.DataFrame:
    """``left.merge(right.drop_duplicates(on), on=on, how=how)`` for two integer keys (``b``
    may be missing in ``left``: it matches nothing), found through a :class:`KeyIndex`
    instead of pandas' hash join: ``left``'s rows in order (``inner``: those with a match)
    and ``right``'s other columns, missing where nothing matched (integers then become
    floats, as in a merge)."""
    if how not in ("left", "inner"):
        raise ValueError(f"join_first: how={how!r}")
    a, b = on
    key_b = left[b].to_numpy()
    known = ~pd.isna(key_b)
    row = KeyIndex.of(right[a], right[b]).first_row(
        left[a].to_numpy(), np.where(known, key_b, 0).astype(np.int64))
    row[~known] = -1
    out = left.reset_index(drop=True)
    if how == "inner":
        out, row = out[row >= 0].reset_index(drop=True), row[row >= 0]
    for col in right.columns.drop(on):
        # label -1 is missing from the right rows' labels: reindex leaves it missing
        out[col] = right[col].reset_index(drop=True).reindex(row).to_numpy()
    return out
