"""Traces of several files as one: each file's events put on one time axis and given process
keys of their own (the files of one job: :mod:`nsysscope.analysis.job`), then joined table
by table. What a timeline of the whole job is drawn from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from .normalised import Trace, TraceMeta

#: each table's columns that hold a time on its file's clock
TIMES = {"api": ("start_ns", "end_ns"), "graph_work": ("gpu_start_ns", "gpu_end_ns"),
         "gpu_ops": ("start_ns", "end_ns"), "nvtx": ("start_ns", "end_ns"),
         "collectives": ("start_ns", "end_ns")}
#: each table's columns that hold a process key, and a thread id (nsys's global id: the
#: process above bit 24)
PROCESS_KEYS = {"api": ("proc",), "graph_work": ("proc",), "gpu_ops": ("proc",),
                "syncs": ("proc",), "event_records": ("proc",), "processes": ("proc",),
                "collectives": ("proc",)}
THREAD_KEYS = {"api": ("tid",), "nvtx": ("tid",), "threads": ("tid",)}
TABLES = ("api", "graph_work", "gpu_ops", "syncs", "event_records", "nvtx", "threads",
          "processes", "collectives")
#: where a file's own keys are made distinct: bits of the global id's hardware field, above
#: the VM id (a process key's bits 32-38, a thread id's 56-62), one value per file
KEY_BITS = 32
THREAD_KEY_BITS = 56
MAX_FILES = 1 << 7


def moved(trace: Trace, offset_ns: int) -> Trace:
    """``trace`` with every event's time moved by ``offset_ns``."""
    if not offset_ns:
        return trace
    return replace(trace, **{t: getattr(trace, t).assign(**{
        c: getattr(trace, t)[c] + offset_ns for c in cols if c in getattr(trace, t)})
        for t, cols in TIMES.items()})


def keyed(df: pd.DataFrame, i: int, processes: Sequence[str],
          threads: Sequence[str]) -> pd.DataFrame:
    """``df`` with file ``i``'s process keys (columns ``processes``) and thread ids
    (``threads``) made its own (:data:`KEY_BITS`)."""
    if i >= MAX_FILES:
        raise ValueError(f"more than {MAX_FILES} files whose processes share ids")
    cols = {c: _xor(df[c], i << KEY_BITS) for c in processes if c in df}
    cols |= {c: _xor(df[c], i << THREAD_KEY_BITS) for c in threads if c in df}
    return df.assign(**cols) if cols else df


def _xor(values: pd.Series, bits: int) -> Any:
    """``values`` with ``bits`` flipped where they name a process or thread (not -1, not
    missing: a launch without a block has no block thread). A column of floats (ids with
    gaps) becomes nullable integers: a thread id past 2^53 has no exact float."""
    if pd.api.types.is_integer_dtype(values.dtype):
        v = values.to_numpy()
        return np.where(v != -1, v ^ bits, v)
    ids = values.astype("Int64")
    return ids.where(ids.isna() | (ids == -1), ids ^ bits).array


def rekeyed(trace: Trace, i: int) -> Trace:
    """``trace`` with file ``i``'s process keys and thread ids made its own."""
    return replace(trace, **{t: keyed(getattr(trace, t), i, PROCESS_KEYS.get(t, ()),
                                      THREAD_KEYS.get(t, ())) for t in TABLES})


def joined(traces: Sequence[Trace], meta: TraceMeta) -> Trace:
    """The traces' tables one after the other, as one trace named by ``meta`` (each already
    on the common axis, with keys of its own)."""
    return replace(traces[0], meta=meta, source=None,
                   **{t: _concat([getattr(x, t) for x in traces]) for t in TABLES})


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The frames one after the other, text that was categorical kept so (each file's
    categories joined)."""
    out = pd.concat(frames, ignore_index=True)
    for c in frames[0].columns:
        if isinstance(frames[0][c].dtype, pd.CategoricalDtype) and \
                not isinstance(out[c].dtype, pd.CategoricalDtype):
            out[c] = out[c].astype("category")
    return out
