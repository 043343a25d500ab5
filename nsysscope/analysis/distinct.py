"""Work on a column once per distinct value.

A trace repeats a few API and range names over hundreds of thousands of rows; a pandas
``.str`` call over every row redoes the same work for each repeat, so string work is done on
the distinct values and gathered back by code.
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
