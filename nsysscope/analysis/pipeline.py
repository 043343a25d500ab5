"""The analysis of one trace, end to end: :func:`analyze_file` reads a trace (whole, or a
long one in time windows: :mod:`.windows`) and :func:`analyze` analyses one already loaded;
both end in :func:`finish`, which makes the steady state, source lines, bursts and the
:class:`~nsysscope.model.Summary` from the rows of every launch (:mod:`.rows`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Literal, get_args

import pandas as pd

from ..model import Summary
from ..trace.load import Trace, load
from ..trace.python_samples import PythonSamples, read_python_samples
from ..trace.time_range import TimeRange, span_of
from ..trace.windows import TraceWindows, in_windows
from .bursts import bursts_by_part
from .collectives import RankWaits
from .config import AnalysisConfig, config_of
from .idle import idle_by_part, step_periods
from .latent import latent_sites
from .launches import busy_from_first_replay
from .nvtx import STEP_COLUMNS, NvtxIndex, step_ranges
from .processes import warmup_and_steady
from .rows import TraceRows, launch_rows
from .source_lines import (
    LINE_COLUMNS,
    SOURCE_READS,
    attach_source_lines,
    is_stalled,
    stall_blocks,
)
from .startup import building_by_part, startup_by_part
from .stored import RowStore
from .summarise import summarize
from .windows import parallel_rows, window_part, windowed_rows

#: what of a trace's events an analysis keeps (:func:`analyze_file`)
Events = Literal["none", "shown", "all"]
EVENTS: tuple[Events, ...] = get_args(Events)


@dataclass
class Analysis:
    """One analysed trace: the per-launch and per-block tables, and their summary. The
    tables are :attr:`launches` and :attr:`blocks`; a long trace keeps them on disk
    (:mod:`.stored`) and reads them when asked for, :attr:`launch_table` a few columns at a
    time."""

    trace: Trace
    config: AnalysisConfig
    launch_table: RowStore = field(repr=False)
    block_table: RowStore = field(repr=False)
    summary: Summary
    #: one row per process that launched graphs (see :mod:`.processes`)
    processes: pd.DataFrame
    #: the trace's NVTX ranges indexed, where the analysis made the index (else :attr:`nvtx`
    #: makes it when asked: a parallel analysis indexes only parts of the trace)
    nvtx_index: NvtxIndex | None = field(default=None, repr=False)
    #: the Python samples inside the stalls' blocks (status says why there are none)
    python_samples: PythonSamples | None = None
    #: the NVTX step ranges (:data:`.nvtx.STEP_COLUMNS`) where :attr:`trace` does not hold
    #: them (a long trace read in windows: on disk); a summary made again reads them
    steps: RowStore | None = field(default=None, repr=False)
    #: reads the trace's events in a time range, where :attr:`trace` holds none (a long
    #: trace analysed in windows, its events asked for): a timeline reads the time it shows
    read_events: Callable[[TimeRange], Trace] | None = field(default=None, repr=False)

    @property
    def launches(self) -> pd.DataFrame:
        """One row per graph launch (columns: docs/per-launch.md)."""
        return self.launch_table.frame()

    @property
    def blocks(self) -> pd.DataFrame:
        """One row per host block."""
        return self.block_table.frame()

    @property
    def stalls(self) -> pd.DataFrame:
        return self.launches[self.launches["stall"]]

    @property
    def holds_events(self) -> bool:
        """Whether :attr:`trace` holds the trace's events (a long trace analysed in windows
        holds none: :attr:`read_events` reads them again, where it is set)."""
        return self.steps is None

    def step_ranges(self) -> pd.DataFrame:
        """The trace's NVTX ``step N`` ranges (:data:`.nvtx.STEP_COLUMNS`), in the trace's
        order."""
        if self.steps is not None:
            return self.steps.frame(STEP_COLUMNS)
        return step_ranges(self.trace.nvtx)

    @property
    def nvtx(self) -> NvtxIndex:
        """The trace's NVTX ranges, indexed (depths, cleaned names)."""
        if self.nvtx_index is None:
            self.nvtx_index = NvtxIndex.of(self.trace.nvtx)
        return self.nvtx_index


def analyze_file(path: str | Path, cfg: AnalysisConfig | None = None, nsys: str | None = None,
                 time_range: TimeRange | None = None, events: Events = "shown",
                 collectives: bool = False) -> Analysis:
    """Load and analyse the trace at ``path`` (or ``time_range`` of it). A long one is read in
    windows, in bounded memory. ``events``: what of the trace's events the analysis keeps in
    :attr:`Analysis.trace` for what is drawn from them: ``"none"``; ``"shown"``, for
    timelines of a few steps (a long trace keeps none, and reads the time a timeline shows
    again: :attr:`Analysis.read_events`); or ``"all"``, for a timeline of the whole trace
    (read whole). ``collectives``: keep the trace's NCCL kernels in the analysis's trace
    even where it keeps no other event (what a job of several files lines its ranks up by:
    :mod:`.job`)."""
    cfg = config_of(cfg)
    if events not in EVENTS:
        raise ValueError(f"events: one of {', '.join(map(repr, EVENTS))}, not {events!r}")
    long = events != "all" and span_of(time_range).whole
    windows = in_windows(path, nsys=nsys) if long else None
    if windows is not None:
        analysis = analyze_windows(windows, cfg, collectives)
        if events == "shown":
            analysis.read_events = partial(load, Path(path).absolute(), nsys)  # (a notebook
            # may change its folder before it draws)
        return analysis
    trace = load(path, nsys=nsys, time_range=time_range)
    rows = parallel_rows(trace, cfg)
    return analyze(trace, cfg) if rows is None else finish(trace, rows, cfg)


def analyze(trace: Trace, cfg: AnalysisConfig | None = None,
            python_samples: PythonSamples | None = None) -> Analysis:
    """Analyse ``trace``. Stalls are attributed to Python lines with ``python_samples``, read
    from the trace's export when not given (only the samples inside the stalls' blocks)."""
    if not isinstance(trace, Trace):
        raise TypeError(f"analyze() takes a Trace from nsysscope.load(path), not "
                        f"{type(trace).__name__}; nsysscope.open(path) loads and analyses "
                        "in one call")
    cfg = config_of(cfg)
    return finish(trace, TraceRows.of(launch_rows(trace, cfg)), cfg, python_samples)


def analyze_windows(windows: TraceWindows, cfg: AnalysisConfig | None = None,
                    collectives: bool = False) -> Analysis:
    """The :class:`Analysis` of a trace read in ``windows`` (closed once read, so that the
    export and its copy are closed before the summary is made; the windows analysed in
    processes of their own where they are read from the export: :meth:`.TraceWindows.each`).
    Its ``trace`` holds what the summary reads (the first window's identity and processes),
    not the events (but the NCCL kernels, with ``collectives``); its rows are on disk
    (:mod:`.stored`), their text as categoricals."""
    cfg = config_of(cfg)
    with windows:
        kernels = windows.collectives()
        ranks = RankWaits.of(kernels)
        parts = windows.each(partial(window_part, cfg=cfg, ranks=ranks))
        try:
            outline, rows = windowed_rows(parts)
        finally:
            parts.close()  # now, not when collected: its processes are stopped
    if collectives:
        outline = replace(outline, collectives=kernels)
    del kernels
    try:
        return finish(outline, rows, cfg)
    except BaseException:
        rows.close()  # now: a process stopped by Ctrl-C may exit without finalizers
        raise


def finish(trace: Trace, rows: TraceRows, cfg: AnalysisConfig,
           python_samples: PythonSamples | None = None) -> Analysis:
    """The steady state, source lines, bursts and summary of ``rows``, the launch rows of
    ``trace`` (of all its windows together, where ``trace`` holds only what the summary
    reads: :func:`analyze_windows`). Each step reads the launches a part at a time
    (a long trace's parts are its time windows, on disk: :mod:`.stored`) and sets its
    columns part by part."""
    launches, blocks = rows.launches, rows.blocks
    # busy time counted from each process's first replay, wherever the read began
    launches.update_parts(busy_from_first_replay(launches))
    launches.update_parts(bursts_by_part(launches, blocks))
    # a server's start-up and idle periods are not its steady state (issue 56)
    launches.update_parts(building_by_part(launches, rows.builds))
    launches.update_parts(startup_by_part(launches))
    launches.update_parts(idle_by_part(launches, step_periods(launches)))
    launches.update_parts(warmup_and_steady(launches, cfg))
    if python_samples is None:
        python_samples = _python_samples(trace, launches)
    if python_samples.ok and not python_samples.samples.empty:
        _attach_source_lines(launches, python_samples, cfg)
    summary, processes = summarize(trace, launches, cfg, python_samples,
                                   latent_sites(rows.latent, launches), rows.steps)
    return Analysis(trace, cfg, launches, blocks, summary, processes, rows.nvtx,
                    python_samples, rows.steps)


def _python_samples(trace: Trace, launches: RowStore) -> PythonSamples:
    if trace.python is not None:  # stacks the trace holds itself (torch.profiler)
        return trace.python
    if trace.source is None:
        return PythonSamples.none()
    return read_python_samples(trace.source, spans=lambda: stall_blocks(_stalled(launches)),
                               path=trace.meta.path)


def _stalled(launches: RowStore) -> pd.DataFrame:
    """The stalled launches that waited in a block (what source lines are found for), with
    the columns :func:`.source_lines.attach_source_lines` reads."""
    return pd.concat([part[is_stalled(part)] for part in launches.chunks(SOURCE_READS)])


def _attach_source_lines(launches: RowStore, samples: PythonSamples,
                         cfg: AnalysisConfig) -> None:
    """Name the stalls' source lines (:func:`.source_lines.attach_source_lines`, on the
    stalled launches: every other launch keeps no line)."""
    named = attach_source_lines(_stalled(launches), samples, cfg)[LINE_COLUMNS]

    def parts() -> Iterator[pd.DataFrame]:
        for part in launches.chunks(LINE_COLUMNS):
            own = named[(named.index >= part.index[0]) & (named.index <= part.index[-1])] \
                if len(part) else named.iloc[:0]
            for c in LINE_COLUMNS:
                part.loc[own.index, c] = own[c]
            yield part

    launches.update_parts(parts())
