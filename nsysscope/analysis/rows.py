"""What one read of a trace (all of it, or one time window) says of its launches: every
launch paired with the host block it waited in, classified and attributed
(:func:`launch_rows`), and the rows of a whole trace where :func:`.pipeline.finish` reads
them (:class:`TraceRows`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import NothingToAnalyse, ProfilerLostData
from ..trace.apis import LAUNCH_APIS
from ..trace.load import Trace
from ..util.units import timeline_span
from .blocks import block_table, copy_calls
from .calls import ThreadCalls
from .collectives import RankWaits, attach_waits
from .config import AnalysisConfig
from .idle import quiet_columns
from .latent import latent_copies
from .launches import launch_table
from .nvtx import NvtxIndex
from .pairing import attach_blocks
from .projection import step_costs
from .source_lines import no_source_lines
from .startup import graph_builds
from .stored import FrameRows, RowStore
from .streams import coverage, event_records_with_calls, stream_waits
from .verdict import data_loss_reason


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
    #: the graph instantiation calls of the read (:func:`.startup.graph_builds`)
    builds: pd.DataFrame = field(default_factory=pd.DataFrame)


@dataclass
class TraceRows:
    """Every launch and block of a trace, where :func:`.pipeline.finish` reads them: one
    read's rows in memory, or the rows of a long trace's windows put together
    (:mod:`.windows`: on disk, the launches carrying their device's busy time before each
    replay). ``nvtx``: the index of the trace's NVTX ranges, None where the rows of windows
    were put together; ``steps``: the NVTX step ranges (:data:`.summarise.STEP_RANGES`) where
    the trace does not hold them; ``builds``: every graph instantiation call of the trace
    (:func:`.startup.graph_builds`)."""

    launches: RowStore
    blocks: RowStore
    latent: pd.DataFrame
    nvtx: NvtxIndex | None
    steps: RowStore | None = None
    builds: pd.DataFrame = field(default_factory=pd.DataFrame)

    @classmethod
    def of(cls, rows: LaunchRows) -> TraceRows:
        return cls(FrameRows(rows.launches), FrameRows(rows.blocks), rows.latent, rows.nvtx,
                   builds=rows.builds)

    def close(self) -> None:
        """Let go of the rows now (:meth:`.stored.RowStore.close`): an analysis that failed
        or was stopped leaves no folder behind."""
        for store in (self.launches, self.blocks, self.steps):
            if store is not None:
                store.close()


def launch_rows(trace: Trace, cfg: AnalysisConfig, ranks: RankWaits | None = None) -> LaunchRows:
    """Pair, classify and attribute every launch of ``trace`` (:class:`LaunchRows`);
    ``ranks``: the ranks' collective waits (:class:`.collectives.RankWaits`), found from
    ``trace`` when not given (a time window, or a file of a job, is given the whole's)."""
    _require_launches(trace)
    copies = copy_calls(trace)
    calls = ThreadCalls.of(trace.api)
    records = event_records_with_calls(trace)
    nvtx = NvtxIndex.of(trace.nvtx)
    blocks = block_table(trace, copies, calls, records, cfg, nvtx)
    exact = blocks[blocks["exact"] & (blocks["scope"] != "device")]
    reach = coverage(exact, stream_waits(trace, records))
    launches, busy = launch_table(trace)
    launches = attach_blocks(launches, blocks, reach, copies, calls, cfg, **trace.enums)
    # what start-up and idle periods are found from, here where the calls are read
    # start-up is found from every graph instantiation of the trace, in
    # :func:`.pipeline.finish`: these two columns take their place here
    launches["graphs_building"] = launches["graphs_built"] = False
    launches = launches.assign(**quiet_columns(trace, launches))
    # start-up, idle, warm-up and steady state count launches over the whole trace, not one
    # window: their columns take their place in the table here, and
    # :func:`.pipeline.finish` fills them
    launches["startup"] = launches["warmup"] = launches["steady"] = False
    launches["idle_ns"] = np.nan
    ranks = RankWaits.of(trace.collectives) if ranks is None else ranks
    launches = attach_waits(launches, ranks)
    launches = _attribute(trace, launches, nvtx)
    # source lines and bursts need the whole trace, as warm-up does: :func:`.pipeline.finish`
    # fills them
    launches = step_costs(launches.assign(**no_source_lines(launches.index)), blocks)
    launches["burst"] = 0
    return LaunchRows(launches, blocks, busy, latent_copies(trace, copies, nvtx, calls), nvtx,
                      graph_builds(trace))


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
    calls = trace.meta.cuda_calls if trace.meta.cuda_calls >= 0 else len(trace.api)
    if not calls and trace.api.empty and trace.gpu_ops.empty:
        how = trace.meta.profiler.record_cuda
        raise NothingToAnalyse(f"{trace.meta.path}: no CUDA data in this trace (was it captured "
                               f"with {how}, and does the program use the GPU?)")
    raise NothingToAnalyse(
        f"{trace.meta.path}: no CUDA graph launches ({len(trace.gpu_ops)} eager GPU ops, "
        f"{calls} CUDA calls); nsysscope analyses engines that replay CUDA graphs")


def _attribute(trace: Trace, launches: pd.DataFrame, nvtx: NvtxIndex) -> pd.DataFrame:
    """NVTX phase/step/op where each launch was decided: around its paired block, or, with
    no block, what the launching thread was doing when the GPU ran out of work."""
    # a wait on another thread that did not hold the next launch back (a forward thread's
    # scheduler): what the launching thread was doing decided, as for a launch never waited on
    waited = (launches["block"] >= 0) & ((launches["block_tid"] == launches["tid"])
                                         | launches["stall"])
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
