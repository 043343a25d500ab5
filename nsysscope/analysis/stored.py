"""Where a trace's per-launch and per-block rows are kept: in memory, or on disk a time
window at a time.

A trace read whole keeps its rows in one DataFrame (:class:`FrameRows`). A long trace read in
time windows (:mod:`.windows`) writes each window's rows to a temporary folder as the window
is analysed (:class:`SpilledRows`), and every later step reads back the columns it needs and
no more: the memory a step takes is its columns, not the table (the whole per-launch table is
~0.5 KB per launch, 5 GB at 10^7 launches). Both are a :class:`RowStore`: :meth:`frame`
gives chosen columns as one DataFrame, :meth:`chunks` gives them a part at a time (what the
summary's passes read: the memory of one time window's rows), :meth:`update` adds or replaces
whole columns.
"""

from __future__ import annotations

import pickle
import shutil
import tempfile
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

#: a table's columns, each a numpy array or a pandas array (categoricals for text)
Columns = dict[str, Any]


class RowStore(Protocol):
    """A table's rows, read and changed a column at a time."""

    @property
    def columns(self) -> list[str]: ...

    def __len__(self) -> int: ...

    def frame(self, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """``columns`` (default: all) of every row, in order, as one DataFrame."""

    def chunks(self, columns: Sequence[str]) -> Iterator[pd.DataFrame]:
        """``columns`` of consecutive rows, a part at a time, indexed by row position."""

    def update_parts(self, parts: Iterable[Mapping[str, Any]]) -> None:
        """Set whole columns (one value per row, in row order; a new one goes last) a part at
        a time: the k-th mapping, the values of the k-th part :meth:`chunks` gives (each made
        while the parts are read, one in memory at once), one for every part."""

    def close(self) -> None:
        """Let go of the rows now (a folder on disk: deleted)."""


def as_rows(launches: pd.DataFrame | RowStore) -> RowStore:
    """A table given as a DataFrame (a notebook's, a test's) as rows to read."""
    return FrameRows(launches) if isinstance(launches, pd.DataFrame) else launches


def steady_parts(rows: RowStore, columns: Sequence[str],
                 proc: int | None = None) -> Iterator[pd.DataFrame]:
    """``columns`` of the steady launches (of process ``proc``) of ``rows``, a part at a
    time, every part (an empty one too), indexed by launch position: what the summary's
    passes read."""
    for part in rows.chunks(list(dict.fromkeys(["proc", "steady", *columns]))):
        keep = part["steady"].to_numpy(dtype=bool)
        if proc is not None:
            keep = keep & (part["proc"].to_numpy() == proc)
        yield part[keep]


class FrameRows:
    """Rows held in one DataFrame: a trace read whole. Its columns are its own: updating them
    leaves the frame it was made from as it was."""

    def __init__(self, df: pd.DataFrame) -> None:
        self._df = df.copy(deep=False)

    @property
    def columns(self) -> list[str]:
        return list(self._df.columns)

    def __len__(self) -> int:
        return len(self._df)

    def frame(self, columns: Sequence[str] | None = None) -> pd.DataFrame:
        return self._df if columns is None else self._df[list(columns)]

    def chunks(self, columns: Sequence[str]) -> Iterator[pd.DataFrame]:
        """All rows at once: a table held in memory is read in one part."""
        yield self._df[list(columns)].set_axis(pd.RangeIndex(len(self._df)))

    def update_parts(self, parts: Iterable[Mapping[str, Any]]) -> None:
        """One part: the values of every row, by position (a Series' labels are not
        looked at)."""
        for values in parts:
            for name, v in values.items():
                self._df[name] = v.set_axis(self._df.index) if isinstance(v, pd.Series) else v

    def close(self) -> None:
        """Nothing to delete: the frame goes with the last reference to it."""


class SpilledRows:
    """Rows written to a temporary folder a part (one time window's rows) at a time, read
    back a column at a time. The folder goes with :meth:`close` (an analysis that fails or
    is stopped calls it: a process stopped by Ctrl-C may end without running finalizers),
    else when the object does, or when the program ends."""

    def __init__(self) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="nsysscope-rows-"))
        self._remove = weakref.finalize(self, shutil.rmtree, self._folder, True)
        self._names: list[str] = []
        self._lengths: list[int] = []
        self._whole: pd.DataFrame | None = None

    @property
    def columns(self) -> list[str]:
        return list(self._names)

    def __len__(self) -> int:
        return sum(self._lengths)

    def append(self, part: Columns) -> None:
        """Write ``part``, the next rows (every column of the table, the first part's)."""
        if self._lengths and list(part) != self._names:
            raise ValueError(f"a part's columns differ from the table's: {list(part)}")
        n = {len(v) for v in part.values()}
        if len(n) > 1:
            raise ValueError("a part's columns differ in length")
        folder = self._folder / str(len(self._lengths))
        for name, v in part.items():
            _save(folder, name, v)
        self._names = list(part)
        self._lengths.append(n.pop() if n else 0)
        self._whole = None

    def frame(self, columns: Sequence[str] | None = None) -> pd.DataFrame:
        if columns is None:  # the whole table: read once (it is asked for again and again)
            if self._whole is None:
                self._whole = self._read(self._names)
            return self._whole
        return self._read(columns)

    def chunks(self, columns: Sequence[str]) -> Iterator[pd.DataFrame]:
        self._check(columns)
        at = 0
        for k, n in enumerate(self._lengths):
            yield pd.DataFrame({c: _load(self._folder / str(k), c) for c in columns},
                               index=pd.RangeIndex(at, at + n), copy=False)
            at += n

    def update_parts(self, parts: Iterable[Mapping[str, Any]]) -> None:
        given = 0
        for k, values in enumerate(parts):
            given = k + 1
            for name, v in values.items():
                column = _array(v)
                if len(column) != self._lengths[k]:
                    raise ValueError(f"{name}: {len(column)} values for part {k}'s "
                                     f"{self._lengths[k]} rows")
                _save(self._folder / str(k), name, column)
                if name not in self._names:
                    self._names.append(name)
        self._whole = None
        if given != len(self._lengths):
            raise ValueError(f"values for {given} of the {len(self._lengths)} parts")

    def close(self) -> None:
        """Delete the folder now."""
        self._remove()

    def _check(self, columns: Sequence[str]) -> None:
        missing = [c for c in columns if c not in self._names]
        if missing:
            raise KeyError(f"no such columns: {missing}")

    def _read(self, columns: Sequence[str]) -> pd.DataFrame:
        self._check(columns)
        return pd.DataFrame({c: concat([_load(self._folder / str(k), c)
                                        for k in range(len(self._lengths))])
                             for c in columns}, copy=False)


def concat(values: list[Any]) -> Any:
    """One column's parts one after the other: categoricals over their categories in every
    part (a part of objects among them, a window whose text is all missing, made one),
    pandas arrays (nullable integers) as pandas arrays, numpy arrays as one; parts of other
    kinds as pandas joins them."""
    kinds = {type(v) for v in values}
    if pd.Categorical in kinds and all(isinstance(v, pd.Categorical) or v.dtype == object
                                       for v in values):
        values = [v if isinstance(v, pd.Categorical) else pd.Categorical(v) for v in values]
        kinds = {pd.Categorical}
    if kinds == {pd.Categorical}:
        cats = pd.Index(sorted(set().union(*(v.categories for v in values)), key=str))
        return pd.Categorical.from_codes(
            np.concatenate([v.set_categories(cats).codes for v in values]), cats)
    if kinds == {np.ndarray}:
        return np.concatenate(values)
    if len(kinds) == 1 and isinstance(values[0], pd.api.extensions.ExtensionArray):
        return type(values[0])._concat_same_type(values)
    return pd.concat([pd.Series(v, copy=False) for v in values], ignore_index=True).array


def _array(v: Any) -> Any:
    """``v`` as a column: a numpy array, or the pandas array a Series holds (categoricals and
    nullable integers stay what they are)."""
    if isinstance(v, pd.Series):
        return v.array if isinstance(v.dtype, pd.api.extensions.ExtensionDtype) and \
            not pd.api.types.is_string_dtype(v.dtype) else v.to_numpy()
    return v if isinstance(v, pd.api.extensions.ExtensionArray) else np.asarray(v)


def _save(folder: Path, name: str, v: Any) -> None:
    """A column's part: numbers as ``.npy`` (read back without a copy through Python), the
    rest (text, nullable integers) pickled. The other kind's file, of values it replaces,
    goes first: a part is never read back from a file left over. A disk that is full says
    which folder, and what to do (the error would otherwise name no file)."""
    try:
        folder.mkdir(exist_ok=True)
        if isinstance(v, np.ndarray) and v.dtype.kind in "biuf":
            (folder / f"{name}.pkl").unlink(missing_ok=True)
            np.save(folder / f"{name}.npy", v, allow_pickle=False)
        else:
            (folder / f"{name}.npy").unlink(missing_ok=True)
            with open(folder / f"{name}.pkl", "wb") as f:
                pickle.dump(v, f, protocol=pickle.HIGHEST_PROTOCOL)
    except OSError as e:
        raise OSError(e.errno, f"cannot write a long trace's per-launch rows there "
                      f"({e.strerror or e}; ~0.5 KB a graph launch): set TMPDIR to a folder "
                      "with room", str(folder.parent.parent)) from None


def _load(folder: Path, name: str) -> Any:
    numbers = folder / f"{name}.npy"
    if numbers.exists():
        return np.load(numbers, allow_pickle=False)
    with open(folder / f"{name}.pkl", "rb") as f:
        return pickle.load(f)  # noqa: S301 - written by this process, in its own folder
