"""The launch rows of a trace made a time window at a time: one window after the other (a
long trace read in windows, :mod:`nsysscope.trace.windows`: :func:`windowed_rows`) or all at
once in forked processes (:func:`parallel_rows`); :mod:`.pipeline` chooses.

Each window's :class:`~nsysscope.analysis.LaunchRows` are kept for what the window owns (the
launches whose call starts in it, the blocks, busy time, copies and NVTX steps that start in
it), put together, and finished as the whole trace's rows would be: warm-up, steady state,
source lines, bursts and the summary see every launch (step costs are made per window read,
from its blocks and margins). The windows' launches, blocks and NVTX steps go to disk as
each window is done (:class:`~.stored.SpilledRows`), and those steps read back the columns
they need a window at a time: memory holds one window's events and rows, not the whole
trace's events, nor its per-launch table.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..trace.apis import LAUNCH_APIS
from ..trace.arrays import workers
from ..trace.backwards import backwards_note, backwards_rows
from ..trace.load import Trace
from ..trace.slices import trace_in
from ..trace.windows import MARGIN_LAUNCHES, Window, plan_windows
from ..util.forks import can_fork, map_forked
from ..util.memory import release_free_pages, return_freed_memory
from .collectives import RankWaits
from .config import AnalysisConfig
from .keys import KeyIndex
from .launches import BUSY_BEFORE, busy_before_time
from .nvtx import STEP_COLUMNS, step_ranges
from .rows import LaunchRows, TraceRows, launch_rows
from .stored import Columns, FrameRows, RowStore, SpilledRows, concat

#: launches a window of a parallel analysis holds at least (fewer: the processes would
#: cost more than they save; bench/README.md)
PARALLEL_LAUNCHES = 10_000


def parallel_rows(trace: Trace, cfg: AnalysisConfig, parts: int | None = None,
                  margin: int = MARGIN_LAUNCHES) -> TraceRows | None:
    """The launch rows of ``trace``, its windows analysed at once in processes forked from
    this one (:func:`~nsysscope.util.forks.map_forked`), one per CPU (``parts``: how many
    windows); None where one process would do as well: a trace of fewer than
    :data:`PARALLEL_LAUNCHES` launches a window, one CPU, or an OS that cannot fork.

    Each window is the rows a read of its time range gives (:func:`.slices.trace_in`), and
    the windows' rows put together are the whole trace's (the module's doc)."""
    launches = trace.api.loc[trace.api["name"].isin(LAUNCH_APIS), ["proc", "start_ns"]]
    n = parts or min(workers(), len(launches) // PARALLEL_LAUNCHES)
    if n < 2 or not can_fork():
        return None
    windows = plan_windows(launches, per_window=-(-len(launches) // n), margin=margin)
    ranks = RankWaits.of(trace.collectives)  # once, from every kernel (as windows do)

    def owned(w: Window) -> _Owned:
        return _Owned.of(launch_rows(trace_in(trace, w.read), cfg, ranks), w)

    done = list(_counted(map_forked(owned, windows)))
    return _numbered(TraceRows(FrameRows(_join([p.launches for p in done])),
                               FrameRows(_join([p.blocks for p in done])),
                               _latent([p.latent for p in done]), None,
                               builds=_builds([p.builds for p in done])))


@dataclass
class WindowPart:
    """What the analysis of one window gives the whole trace's: what it owns
    (:class:`_Owned`), its own NVTX step ranges, how many of its own rows end before they
    start (the reader's note), and, of the first window, the trace without its events
    (:func:`_outline`)."""

    owned: _Owned
    steps: dict[str, np.ndarray]
    backwards: int
    outline: Trace | None


def window_part(trace: Trace, window: Window, first: bool, cfg: AnalysisConfig,
                ranks: RankWaits | None = None) -> WindowPart:
    """The :class:`WindowPart` of ``window``, read as ``trace`` (``first``: the trace's
    first window); ``ranks``: the whole trace's collective waits
    (:class:`.collectives.RankWaits`)."""
    nv = trace.nvtx
    own = step_ranges(nv[window.owns(nv["start_ns"].to_numpy())])
    return WindowPart(_Owned.of(launch_rows(trace, cfg, ranks), window),
                      {c: own[c].to_numpy() for c in STEP_COLUMNS},
                      backwards_rows((trace.api, trace.gpu_ops, nv), window.owns),
                      _outline(trace) if first else None)


def windowed_rows(parts: Iterable[WindowPart]) -> tuple[Trace, TraceRows]:
    """The rows of the whole trace from its windows' ``parts``, in order (on disk, its NVTX
    step ranges too), and the trace without its events (what :func:`.pipeline.finish`
    reads)."""
    return_freed_memory()
    steps = SpilledRows()
    launches, blocks = SpilledRows(), SpilledRows()
    rows = TraceRows(launches, blocks, pd.DataFrame(), None, steps)
    latent, builds, outlines = [], [], []
    backwards = 0  # the windows' own rows that end before they start (the reader's note)

    def owned() -> Iterator[_Owned]:
        nonlocal backwards
        for part in parts:
            if part.outline is not None:
                outlines.append(part.outline)
            steps.append(part.steps)
            backwards += part.backwards
            yield part.owned
            del part  # the next window's rows take its place

    try:
        for own in _counted(owned()):
            launches.append(own.launches)
            blocks.append(own.blocks)
            latent.append(own.latent)
            builds.append(own.builds)
            del own
            release_free_pages()
        if not outlines:
            raise ValueError("no window to analyse")
        rows.latent, rows.builds = _latent(latent), _builds(builds)
        outline = outlines[0]  # its reader's note counted the first window's rows only
        meta = replace(outline.meta, reader_notes=backwards_note(backwards))
        return replace(outline, meta=meta), _numbered(rows)
    except BaseException:
        rows.close()  # now: a process stopped by Ctrl-C may exit without finalizers
        raise


def _outline(trace: Trace) -> Trace:
    """``trace`` without its events: its identity (as of the whole trace), threads and
    processes."""
    return replace(
        trace, meta=replace(trace.meta, time_range_ns=None),
        **{t: getattr(trace, t).iloc[:0] for t in (
            "api", "graph_work", "gpu_ops", "syncs", "event_records", "nvtx", "collectives")})


@dataclass
class _Owned:
    """What one window owns (the module's doc), as columns that own their memory (written
    to disk, or joined a column at a time in :func:`parallel_rows`). ``busy``: the window's
    own GPU busy time per (process, device), which every later window's launches count
    before them (the busy intervals themselves, ~7 per launch, are not kept: at 10^6
    launches they were 120 MB)."""

    launches: Columns
    blocks: Columns
    busy: dict[tuple[int, int], float]
    latent: pd.DataFrame
    builds: pd.DataFrame  # the graph instantiations that start in the window

    @classmethod
    def of(cls, rows: LaunchRows, w: Window) -> _Owned:
        launches = columns_of(rows.launches[w.owns(rows.launches["api_start_ns"].to_numpy())])
        since: dict[tuple[int, int], float] = {}
        if w.start_ns is not None:  # what the read holds before the window is earlier ones'
            since = busy_before_time(rows.busy, w.start_ns)
            _add_busy(launches, {k: -b for k, b in since.items()})
        until = {} if w.end_ns is None else busy_before_time(rows.busy, w.end_ns)
        return cls(
            launches=launches,
            blocks=columns_of(rows.blocks[w.owns(rows.blocks["start_ns"].to_numpy())]),
            busy={k: b - since.get(k, 0.0) for k, b in until.items()},
            latent=rows.latent[w.owns(rows.latent["start_ns"].to_numpy())],
            builds=rows.builds[w.owns(rows.builds["start_ns"].to_numpy())])


def _add_busy(launches: Columns, busy: dict[tuple[int, int], float]) -> None:
    """Add ``busy`` (per process and device) to the launches' busy-before columns (a
    window's rows count them from the window's start, the earlier windows' busy time added
    as they are joined)."""
    proc, device = launches["proc"], launches["device"]
    for (p, d), b in busy.items():
        on = (proc == p) & (device == d)
        for c in BUSY_BEFORE:
            launches[c][on] += b


def columns_of(df: pd.DataFrame) -> Columns:
    """``df``'s columns, copied out of its blocks, text as categoricals: a few names (API
    chains, NVTX paths, threads) repeat over every launch, and a Python string per row and
    column would make the windows' rows together as big as the events they replace. Other
    pandas arrays (nullable integers: a source line) stay what they are."""
    out: Columns = {}
    for c in df.columns:
        v = df[c]
        text = isinstance(v.dtype, pd.CategoricalDtype | pd.StringDtype) or \
            pd.api.types.infer_dtype(v, skipna=True) == "string"  # not a column of numbers
        # held as objects (the NVTX step number)
        out[c] = pd.Categorical(v) if text else v.array.copy() \
            if isinstance(v.dtype, pd.api.extensions.ExtensionDtype) else v.to_numpy().copy()
    return out


def _counted(parts: Iterable[_Owned]) -> Iterator[_Owned]:
    """``parts`` in the trace's order, each one's launches counting the busy time of the
    parts before it (a window's rows count it from the window's start)."""
    earlier: dict[tuple[int, int], float] = {}
    for p in parts:
        _add_busy(p.launches, earlier)
        earlier = {k: earlier.get(k, 0.0) + p.busy.get(k, 0.0) for k in {*earlier, *p.busy}}
        yield p


def _join(parts: list[Columns]) -> pd.DataFrame:
    """The parts' columns one after the other, a column at a time (each part's copy of it
    dropped as it is joined)."""
    return pd.DataFrame({c: concat([p.pop(c) for p in parts]) for c in list(parts[0])},
                        copy=False)


def _latent(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """The parts' latent copies as one read lists them: every upload, then every
    readback."""
    latent = pd.concat(parts, ignore_index=True)
    latent = latent.iloc[np.argsort(latent["kind"].to_numpy() != "cpu_to_gpu", kind="stable")]
    return latent.reset_index(drop=True)


def _numbered(rows: TraceRows) -> TraceRows:
    """The parts' rows numbered as one trace's: launches and blocks again from 0, a launch's
    block found by its thread and start (:func:`_paired`), a part at a time."""
    for table, column in ((rows.launches, "launch"), (rows.blocks, "block")):
        table.update_parts({column: part.index.to_numpy()} for part in table.chunks([column]))
    rows.launches.update_parts(_paired(rows.launches, rows.blocks))
    return rows


def _paired(launches: RowStore, blocks: RowStore) -> Iterator[dict[str, np.ndarray]]:
    """Per part of ``launches``, the number of each launch's block among every block
    (``blocks``: numbered, in the same parts). A block starts after the launch it waits on
    (it waits for work already queued), in the launch's part or a later one: the blocks'
    parts are read ahead as far as the part's latest block, and those of earlier parts
    dropped."""
    ahead = enumerate(blocks.chunks(["tid", "start_ns"]))
    held: list[tuple[int, pd.DataFrame]] = []
    for k, part in enumerate(launches.chunks(["block", "block_tid", "block_start_ns"])):
        held = [(j, b) for j, b in held if j >= k - 1]
        block = part["block"].to_numpy().copy()
        waited = block >= 0
        if waited.any():
            latest = part["block_start_ns"].to_numpy()[waited].max()
            while not held or held[-1][0] < k or not held[-1][1]["start_ns"].max() >= latest:
                j, b = next(ahead, (-1, None))
                if b is None:
                    break
                held.append((j, b))
            near = pd.concat([b for _, b in held])
            at = KeyIndex.of(near["tid"], near["start_ns"]).first_row(
                part.loc[waited, "block_tid"].to_numpy(dtype=np.int64),
                part.loc[waited, "block_start_ns"].to_numpy(dtype=np.int64))
            block[waited] = np.where(at >= 0, near.index.to_numpy()[at], -1)
        yield {"block": block}


def _builds(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """The parts' graph instantiations together (:func:`.startup.graph_builds`)."""
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
