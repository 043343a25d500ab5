"""The per-launch table as ``--per-launch FILE.csv|FILE.parquet`` writes it.

The analysis table (:attr:`nsysscope.Analysis.launches`) made readable for a file: internal
columns (``_*``) dropped, the process id and the operating system's thread id beside nsys's
global thread id, and copy and memory kinds as names instead of nsys's enum codes. Every column
is described in ``docs/per-launch.md``, made from the column contract
(:mod:`nsysscope.analysis.columns`; the tests check the table against it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import IO, Any

import numpy as np
import pandas as pd

from ..analysis.columns import COLUMNS, Kind
from ..trace.apis import COPY_KINDS, MEMORY_KINDS

#: text columns the analysis leaves "" where they do not apply
_BLANK_IS_EMPTY = ("api_chain", "nvtx_path")


def os_ids(global_tid: Any) -> tuple[np.ndarray, np.ndarray]:
    """(pid, OS tid) of nsys global thread ids: ``globalTid = vm << 56 | pid << 24 | tid``."""
    g = pd.to_numeric(pd.Series(global_tid), errors="coerce").fillna(-1).to_numpy(np.int64)
    ok = g >= 0
    return (np.where(ok, (g >> 24) & 0xFFFFFF, -1), np.where(ok, g & 0xFFFFFF, -1))


def _names(values: pd.Series, names: dict[int, str]) -> pd.Series:
    """nsys enum codes as names (``kind N`` for a code nsys added since), empty (None) for
    none."""
    codes = pd.to_numeric(values, errors="coerce")
    known = codes[codes >= 0].astype(np.int64)
    named = known.map(names)
    named = named.where(named.notna(), "kind " + known.astype(str))
    return named.reindex(values.index).astype(object).where(lambda v: v.notna(), None)


def kinds_named(df: pd.DataFrame, prefix: str = "") -> pd.DataFrame:
    """``df`` with its ``{prefix}copy_kind``, ``src_kind`` and ``dst_kind`` columns as names
    (``HtoD``, ``pageable``) instead of nsys's enum codes; blank where there is no copy."""
    names = {f"{prefix}copy_kind": COPY_KINDS, f"{prefix}src_kind": MEMORY_KINDS,
             f"{prefix}dst_kind": MEMORY_KINDS}
    return df.assign(**{c: _names(df[c], kinds) for c, kinds in names.items() if c in df})


def per_launch_table(result: Any) -> pd.DataFrame:
    """The per-launch table of an Analysis (or an OpenTrace), as ``--per-launch`` writes it."""
    parts = list(per_launch_parts(result))
    return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)


def per_launch_parts(result: Any) -> Iterator[pd.DataFrame]:
    """The per-launch table a part at a time: a long trace's time windows, read from disk
    one at a time (:class:`~nsysscope.analysis.stored.SpilledRows`), so that writing it takes
    the memory of one window."""
    rows = getattr(result, "analysis", result).launch_table
    for part in rows.chunks(rows.columns):
        yield _readable(part)


def _readable(df: pd.DataFrame) -> pd.DataFrame:
    """Launches of the analysis table as the per-launch table has them (the module doc)."""
    out = df.drop(columns=[c for c in df.columns if c.startswith("_")]).copy()
    if "tid" in out.columns:
        pid, tid = os_ids(out["tid"])
        at = out.columns.get_loc("tid") + 1
        out.insert(at, "pid", pid)
        out.insert(at + 1, "os_tid", tid)
    if "step" in out.columns:  # numbers, or none: an integer column however the trace starts
        out["step"] = pd.to_numeric(out["step"], errors="coerce").astype("Int64")
    # times, byte counts and thread ids that some launch lacks are floats in the analysis
    # (NaN): whole numbers here, blank where missing, as the column contract says (a CSV said
    # 131666051.0, and a cause_tid written so matched no tid)
    for col in [c for c in out.columns if COLUMNS.get(c) is Kind.MAYBE_INT]:
        if out[col].dtype.kind == "f":
            out[col] = out[col].astype("Int64")
    # no API chain (no block waited) and no enclosing range: empty as every other column that
    # does not apply (the analysis keys sites by these texts, so it keeps them as "")
    for col in _BLANK_IS_EMPTY:
        if col in out.columns:
            out[col] = out[col].where(out[col] != "")
    return kinds_named(out, "cause_")


def write_per_launch_parts(f: IO[bytes], parts: Iterable[pd.DataFrame], parquet: bool) -> None:
    """Write the per-launch table's ``parts`` to ``f`` as one CSV or Parquet file (Parquet
    needs pyarrow: ImportError without it). In Parquet, text is plain strings in every part
    (a part's text can be categorical, each part with its own categories)."""
    if not parquet:
        for k, part in enumerate(parts):
            inert_formulas(part).to_csv(f, index=False, header=k == 0)
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer, schema = None, None
    try:
        for part in parts:
            table = pa.Table.from_pandas(part, preserve_index=False)
            if schema is None:
                schema = pa.schema([pa.field(x.name, _plain_type(x.type)) for x in table.schema],
                                   metadata=table.schema.metadata)
                writer = pq.ParquetWriter(f, schema)
            assert writer is not None
            writer.write_table(table.cast(schema))
    finally:
        if writer is not None:
            writer.close()


#: what makes a spreadsheet read a CSV cell as a formula (``=HYPERLINK(...)`` in a phase's
#: name, ``@SUM``, ``+cmd|...``, ``-2+3``), a tab or carriage return before one too (OWASP's
#: "CSV injection")
_FORMULA = re.compile(r"^[=+\-@\t\r]")


def inert_formulas(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with each text cell that a spreadsheet would run as a formula prefixed with
    ``'`` (shown, not run; the cell's text is otherwise kept). Numbers stay numbers (a
    negative one is not text); the check runs once per distinct text (the categories)."""
    out = df
    for col in df.columns:
        s = df[col]
        if isinstance(s.dtype, pd.CategoricalDtype):
            cats = pd.Series(s.cat.categories)
            if _text(cats) and cats.str.contains(_FORMULA, na=False).any():
                out = out.assign(**{col: s.cat.rename_categories(
                    [_inert(c) if isinstance(c, str) else c for c in cats])})
        elif _text(s):
            bad = s.str.contains(_FORMULA, na=False)
            if bad.any():
                out = out.assign(**{col: s.where(~bad, "'" + s.astype(object).astype(str))})
    return out


def _text(s: pd.Series) -> bool:
    """Whether ``s`` holds text (strings, perhaps with missing values)."""
    if not (s.dtype == object or pd.api.types.is_string_dtype(s.dtype)):
        return False
    try:
        s.str  # noqa: B018 - raises where no value is a string
    except AttributeError:
        return False
    return True


def _inert(text: str) -> str:
    return "'" + text if _FORMULA.match(text) else text


def _plain_type(t: Any) -> Any:
    """An Arrow column type as every part can have it: a dictionary's values, text for a
    column with no value (a part without copies has no copy kind)."""
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.string() if pa.types.is_null(t) else t
