"""Work on a column, or on rows, once per distinct value.

A trace repeats a few API and range names over hundreds of thousands of rows; a pandas
``.str`` call over every row redoes the same work for each repeat, so string work is done on
the distinct values (or rows) and gathered back by code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd


def per_distinct(values: pd.Series, f: Callable[[pd.Series], pd.Series],
                 missing: Any) -> np.ndarray:
    """``f(values)`` as an array aligned with ``values``, computed on its distinct values only
    (``f`` must work row by row); a missing value gets ``missing``."""
    codes, uniques = pd.factorize(values)
    out = np.asarray(f(pd.Series(uniques, dtype=object)))
    with_missing = np.append(out, np.array([missing], dtype=out.dtype))  # code -1 takes it
    return np.take(with_missing, np.asarray(codes, dtype=np.intp))


def per_distinct_row(frame: pd.DataFrame, f: Callable[[pd.DataFrame], Any]) -> np.ndarray:
    """``f(frame)`` as an array aligned with ``frame``'s rows, computed on its distinct rows
    only (``f`` must work row by row; missing values are values like the others)."""
    codes = np.asarray(frame.groupby(list(frame.columns), dropna=False, sort=False,
                                     observed=True).ngroup(), dtype=np.intp)
    first = np.unique(codes, return_index=True)[1]  # groups are numbered as they first come
    return np.take(np.asarray(f(frame.iloc[first])), codes)
