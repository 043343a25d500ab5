"""The overlap analysis: pure functions from a :class:`~nsysscope.trace.Trace` to tables and
a :class:`~nsysscope.model.Summary`. Nothing here parses files, prints or plots
(:func:`.windows.analyze_file` only asks the trace layer for a trace, whole or in windows)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import NothingToAnalyse, ProfilerLostData
from ..model import Summary
from ..trace.apis import LAUNCH_APIS
from ..trace.load import Trace
from ..trace.python_samples import PythonSamples, read_python_samples
from ..trace.time_range import TimeRange
from ..util.units import timeline_span
from .blocks import block_table, copy_calls
from .bursts import bursts_by_part
from .calls import ThreadCalls
from .collectives import attach_waits, collective_waits, communicators
from .config import AnalysisConfig, config_of
from .latent import latent_copies, latent_sites
from .launches import busy_from_first_replay, launch_table
from .nvtx import STEP_COLUMNS, NvtxIndex, step_ranges
from .pairing import attach_blocks
from .processes import warmup_and_steady
from .projection import step_costs
from .source_lines import (
    LINE_COLUMNS,
    SOURCE_READS,
    attach_source_lines,
    is_stalled,
    no_source_lines,
    stall_windows,
)
from .stored import FrameRows, RowStore
from .streams import coverage, event_records_with_calls, stream_waits
from .summarise import summarize
from .verdict import data_loss_reason

__all__ = ["Analysis", "AnalysisConfig", "LaunchRows", "TraceRows", "analyze", "finish",
           "launch_rows", "summarize"]


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


@dataclass
class LaunchRows:
    """What one read of a trace (all of it, or one time window) says of its launches: the
    per-launch and per-block tables, the device busy intervals, the copies that may break
    overlap later (:func:`.latent.latent_copies`) and the NVTX ranges. Everything in it
    depends only on the events near each launch, so the rows of consecutive windows of a
    trace put together are the rows of the whole (:mod:`.windows`)."""

    launches: pd.DataFrame
    blocks: pd.DataFrame
    busy: pd.DataFrame
    latent: pd.DataFrame
    nvtx: NvtxIndex


@dataclass
class TraceRows:
    """Every launch and block of a trace, where :func:`finish` reads them: one read's rows in
    memory, or the rows of a long trace's windows put together (:mod:`.windows`: on disk, the
    launches carrying their device's busy time before each replay). ``nvtx``: the index of
    the trace's NVTX ranges, None where the rows of windows were put together; ``steps``: the
    NVTX step ranges (:data:`.summarise.STEP_RANGES`) where the trace does not hold them."""

    launches: RowStore
    blocks: RowStore
    latent: pd.DataFrame
    nvtx: NvtxIndex | None
    steps: RowStore | None = None

    @classmethod
    def of(cls, rows: LaunchRows) -> TraceRows:
        return cls(FrameRows(rows.launches), FrameRows(rows.blocks), rows.latent, rows.nvtx)

    def close(self) -> None:
        """Let go of the rows now (:meth:`.stored.RowStore.close`): an analysis that failed
        or was stopped leaves no folder behind."""
        for store in (self.launches, self.blocks, self.steps):
            if store is not None:
                store.close()


def launch_rows(trace: Trace, cfg: AnalysisConfig, groups: pd.Series | None = None) -> LaunchRows:
    """Pair, classify and attribute every launch of ``trace`` (:class:`LaunchRows`);
    ``groups``: the ranks' groups (:func:`.collectives.communicators`), found from ``trace``
    when not given (a time window is given the whole trace's)."""
    _require_launches(trace)
    copies = copy_calls(trace)
    calls = ThreadCalls.of(trace.api)
    records = event_records_with_calls(trace)
    blocks = block_table(trace, copies, calls, records, cfg)
    exact = blocks[blocks["exact"] & (blocks["scope"] != "device")]
    reach = coverage(exact, stream_waits(trace, records))
    launches, busy = launch_table(trace)
    launches = attach_blocks(launches, blocks, reach, copies, calls, cfg, **trace.enums)
    # warm-up and steady state count launches over the whole trace, not one window: their
    # columns take their place in the table here, and :func:`finish` fills them
    launches["warmup"] = launches["steady"] = False
    groups = communicators(trace.collectives) if groups is None else groups
    launches = attach_waits(launches, collective_waits(trace.collectives, groups=groups), groups)
    nvtx = NvtxIndex.of(trace.nvtx)
    launches = _attribute(trace, launches, nvtx)
    # source lines and bursts need the whole trace, as warm-up does: :func:`finish` fills them
    launches = step_costs(launches.assign(**no_source_lines(launches.index)), blocks)
    launches["burst"] = 0
    return LaunchRows(launches, blocks, busy, latent_copies(trace, copies, nvtx, calls), nvtx)


def finish(trace: Trace, rows: TraceRows, cfg: AnalysisConfig,
           python_samples: PythonSamples | None = None) -> Analysis:
    """The steady state, source lines, bursts and summary of ``rows``, the launch rows of
    ``trace`` (of all its windows together, where ``trace`` holds only what the summary
    reads: :func:`.windows.analyze_windows`). Each step reads the launches a part at a time
    (a long trace's parts are its time windows, on disk: :mod:`.stored`) and sets its
    columns part by part."""
    launches, blocks = rows.launches, rows.blocks
    # busy time counted from each process's first replay, wherever the read began
    launches.update_parts(busy_from_first_replay(launches))
    launches.update_parts(warmup_and_steady(launches, cfg))
    if python_samples is None:
        python_samples = _python_samples(trace, launches)
    if python_samples.ok and not python_samples.samples.empty:
        _attach_source_lines(launches, python_samples, cfg)
    launches.update_parts(bursts_by_part(launches, blocks))
    summary, processes = summarize(trace, launches, cfg, python_samples,
                                   latent_sites(rows.latent, launches), rows.steps)
    return Analysis(trace, cfg, launches, blocks, summary, processes, rows.nvtx,
                    python_samples, rows.steps)


def _python_samples(trace: Trace, launches: RowStore) -> PythonSamples:
    if trace.python is not None:  # stacks the trace holds itself (torch.profiler)
        return trace.python
    if trace.source is None:
        return PythonSamples.none()
    return read_python_samples(trace.source, windows=lambda: stall_windows(_stalled(launches)),
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


def _require_launches(trace: Trace) -> None:
    n = int(trace.api["name"].isin(LAUNCH_APIS).sum())
    if n:
        return
    span = trace.meta.time_range_ns
    if span:  # what is missing may be only missing from the part read
        m = trace.meta
        hint = (f"pick a range inside the graph launches ({timeline_span(*m.launches_span_ns)})"
                if m.launches_span_ns else "the capture "
                f"({timeline_span(m.capture_start_ns, m.capture_end_ns)}) has none anywhere")
        raise NothingToAnalyse(
            f"{m.path}: no CUDA graph launches from {timeline_span(*span)} "
            f"({len(trace.api)} CUDA calls there); {hint}")
    lost = data_loss_reason(trace)
    if lost:
        raise ProfilerLostData(f"{trace.meta.path}: {lost}")
    if trace.api.empty and trace.gpu_ops.empty:
        how = "ProfilerActivity.CUDA" if trace.meta.format == "kineto" else "-t cuda"
        raise NothingToAnalyse(f"{trace.meta.path}: no CUDA data in this trace (was it captured "
                               f"with {how}, and does the program use the GPU?)")
    raise NothingToAnalyse(
        f"{trace.meta.path}: no CUDA graph launches ({len(trace.gpu_ops)} eager GPU ops, "
        f"{len(trace.api)} CUDA calls); nsysscope analyses engines that replay CUDA graphs")


def _attribute(trace: Trace, launches: pd.DataFrame, nvtx: NvtxIndex) -> pd.DataFrame:
    """NVTX phase/step/op where each launch was decided: around its paired block, or, with
    no block, what the launching thread was doing when the GPU ran out of work."""
    waited = launches["block"] >= 0
    tids = launches["block_tid"].where(waited, launches["tid"]).to_numpy()
    times = launches["block_start_ns"].where(waited, launches["gpu_end_ns"]).to_numpy()
    enc = nvtx.enclosing(tids, np.nan_to_num(times, nan=-1.0))
    for col in ("nvtx_path", "phase", "op"):
        launches[col] = enc[col].to_numpy()
    # a launch belongs to the step whose range encloses the launch call itself
    launches["step"] = nvtx.enclosing(launches["tid"].to_numpy(),
                                      launches["api_start_ns"].to_numpy())["step"].to_numpy()
    # the op of a readback encloses its copy more tightly than the sync: prefer the copy's
    has_cause = waited & launches["cause_start_ns"].notna()
    if has_cause.any():
        cause = nvtx.enclosing(launches.loc[has_cause, "cause_tid"].to_numpy(dtype=np.int64),
                               launches.loc[has_cause, "cause_start_ns"].to_numpy())
        launches.loc[has_cause, "op"] = pd.Series(cause["op"].to_numpy(),
                                                  index=launches.index[has_cause]) \
            .fillna(launches.loc[has_cause, "op"])
    names = dict(zip(trace.threads["tid"], trace.threads["thread_name"], strict=False))
    tid = launches["block_tid"].where(waited, launches["tid"])
    # built once per thread, not per launch (a few threads make every launch)
    codes, tids = pd.factorize(tid)
    labels = tids.map(names).fillna("").astype(str) + " (" + (tids & 0xFFFFFF).astype(str) + ")"
    launches["thread"] = pd.Series(labels.take(codes), index=launches.index)
    return launches
