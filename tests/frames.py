"""Tables compared by value across the ways nsysscope may hold them."""

from __future__ import annotations

import pandas as pd


def comparable(df: pd.DataFrame) -> pd.DataFrame:
    """Text columns as Python objects with None for missing (a windowed analysis holds text
    as categoricals, the whole one as strings; the values are what is compared)."""
    df = df.reset_index(drop=True).copy()
    for c in df.columns:
        if df[c].dtype == object or isinstance(df[c].dtype, pd.CategoricalDtype) or \
                pd.api.types.is_string_dtype(df[c]):
            df[c] = df[c].astype(object).where(df[c].notna(), None)
    return df
