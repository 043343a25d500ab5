"""The overlap analysis: pure functions from a :class:`~nsysscope.trace.Trace` to tables and
a :class:`~nsysscope.model.Summary`. Nothing here reads files, prints or plots."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import NothingToAnalyse, ProfilerLostData
from ..model import Distributions, Percentiles, Summary, TraceInfo
from ..trace.load import Trace
from ..trace.python_samples import PythonSamples, read_python_samples
from .blocks import block_table, copy_calls
from .collectives import attach_waits, collective_waits
from .config import AnalysisConfig
from .launches import launch_table
from .nvtx import enclosing
from .pairing import KLASSES, STALL_KLASSES, attach_blocks
from .processes import process_table, totals, warmup_and_steady
from .sites import stall_sites
from .source_lines import attach_source_lines, stall_windows
from .streams import coverage, stream_waits
from .verdict import data_loss_reason, notes_for, verdict_line

__all__ = ["Analysis", "AnalysisConfig", "analyze", "KLASSES", "STALL_KLASSES"]

_MAX_DISTRIBUTION = 4000


@dataclass
class Analysis:
    """One analysed trace: the per-launch and per-block tables, and their summary."""

    trace: Trace
    config: AnalysisConfig
    launches: pd.DataFrame
    blocks: pd.DataFrame
    summary: Summary
    #: one row per process that launched graphs (see :mod:`.processes`)
    processes: pd.DataFrame
    #: the Python samples inside the stalls' blocks (status says why there are none)
    python_samples: PythonSamples | None = None

    @property
    def stalls(self) -> pd.DataFrame:
        return self.launches[self.launches["stall"]]


def analyze(trace: Trace, cfg: AnalysisConfig | None = None,
            python_samples: PythonSamples | None = None) -> Analysis:
    """Analyse ``trace``. Stalls are attributed to Python lines with ``python_samples``, read
    from the trace's export when not given (only the samples inside the stalls' blocks)."""
    cfg = cfg or AnalysisConfig()
    _require_launches(trace)
    copies = copy_calls(trace)
    blocks = block_table(trace, copies, cfg)
    exact = blocks[blocks["exact"] & (blocks["scope"] != "device")]
    reach = coverage(exact, stream_waits(trace))
    launches = launch_table(trace)
    launches = attach_blocks(launches, blocks, reach, copies, trace.api, cfg, **trace.enums)
    launches["warmup"], launches["steady"] = warmup_and_steady(launches, cfg)
    launches = attach_waits(launches, collective_waits(trace.collectives))
    launches = _attribute(trace, launches)
    if python_samples is None:
        python_samples = _python_samples(trace, launches)
    launches = attach_source_lines(launches, python_samples, cfg)
    summary, processes = summarize(trace, launches, cfg, python_samples)
    return Analysis(trace, cfg, launches, blocks, summary, processes, python_samples)


def _python_samples(trace: Trace, launches: pd.DataFrame) -> PythonSamples:
    if trace.python is not None:  # stacks the trace holds itself (torch.profiler)
        return trace.python
    if trace.source is None:
        return PythonSamples.none()
    return read_python_samples(trace.source, windows=stall_windows(launches))


def _require_launches(trace: Trace) -> None:
    n = int(trace.api["name"].isin({"cudaGraphLaunch", "cuGraphLaunch"}).sum())
    if n:
        return
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


def _attribute(trace: Trace, launches: pd.DataFrame) -> pd.DataFrame:
    """NVTX phase/step/op where each launch was decided: around its paired block, or, with
    no block, what the launching thread was doing when the GPU ran out of work."""
    waited = launches["block"] >= 0
    tids = launches["block_tid"].where(waited, launches["tid"]).to_numpy()
    times = launches["block_start_ns"].where(waited, launches["gpu_end_ns"]).to_numpy()
    enc = enclosing(trace.nvtx, tids, np.nan_to_num(times, nan=-1.0))
    for col in ("nvtx_path", "phase", "op"):
        launches[col] = enc[col].to_numpy()
    # a launch belongs to the step whose range encloses the launch call itself
    launches["step"] = enclosing(trace.nvtx, launches["tid"].to_numpy(),
                                 launches["api_start_ns"].to_numpy())["step"].to_numpy()
    # the op of a readback encloses its copy more tightly than the sync: prefer the copy's
    has_cause = waited & launches["cause_start_ns"].notna()
    if has_cause.any():
        cause = enclosing(trace.nvtx, launches.loc[has_cause, "cause_tid"].to_numpy(dtype=np.int64),
                          launches.loc[has_cause, "cause_start_ns"].to_numpy())
        launches.loc[has_cause, "op"] = pd.Series(cause["op"].to_numpy(), index=launches.index[has_cause]) \
            .fillna(launches.loc[has_cause, "op"])
    names = dict(zip(trace.threads["tid"], trace.threads["thread_name"]))
    tid = launches["block_tid"].where(waited, launches["tid"])
    launches["thread"] = tid.map(names).fillna("").astype(str) + " (" + \
        (tid & 0xFFFFFF).astype(str) + ")"
    return launches


def summarize(trace: Trace, launches: pd.DataFrame, cfg: AnalysisConfig,
              python_samples: PythonSamples | None = None) -> tuple[Summary, pd.DataFrame]:
    """The summary of the launches marked ``steady``, and the per-process table it totals."""
    processes = process_table(trace, launches)
    warm = int(launches["warmup"].sum())
    steady = launches[launches["steady"]]
    counts = steady["klass"].value_counts()
    classes = {k: int(counts.get(k, 0)) for k in KLASSES}
    stalls = {k: classes[k] for k in STALL_KLASSES}
    sites = stall_sites(launches)
    busy, per_s = totals(processes)
    summary = Summary(
        trace=TraceInfo(path=trace.meta.path, nsys_version=trace.meta.nsys_version,
                        schema_version=trace.meta.schema_version, gpus=trace.meta.gpus,
                        graph_trace=trace.meta.graph_trace),
        verdict="", overlap_ok=True, launches=len(launches), steady_launches=len(steady),
        warmup_launches=warm, stalls=stalls, classes=classes,
        no_wait=int((~steady["waited"]).sum()),
        window_us=Percentiles.of(steady["window_ns"].to_numpy() / 1e3),
        gpu_gap_us=Percentiles.of(steady["gpu_idle_ns"].to_numpy() / 1e3),
        gpu_busy=busy, launches_per_s=per_s, steps_per_s=_steps_per_s(trace, steady),
        sites=sites, notes=notes_for(trace, launches, python_samples, sites), config=cfg.to_dict(),
        distributions=_distributions(steady))
    ok, line = verdict_line(summary, cfg)
    return Summary(**{**summary.__dict__, "verdict": line, "overlap_ok": ok}), processes


def _steps_per_s(trace: Trace, steady: pd.DataFrame) -> float | None:
    """NVTX ``step N`` ranges per second over the steady launches' span."""
    nv = trace.nvtx
    if nv.empty or steady.empty:
        return None
    t0, t1 = steady["api_start_ns"].min(), steady["api_start_ns"].max()
    steps = nv[nv["text"].str.match(r"^\s*(?:step|iter(?:ation)?)[\s_#:=-]*\d+\s*$", case=False)]
    steps = steps[(steps["start_ns"] >= t0) & (steps["start_ns"] < t1)]
    if len(steps) < 2:
        return None
    return round(float((len(steps) - 1) / ((steps["start_ns"].max() - steps["start_ns"].min()) / 1e9)), 2)


def _distributions(steady: pd.DataFrame) -> Distributions:
    s = steady
    if len(s) > _MAX_DISTRIBUTION:  # an evenly spaced sample keeps the time structure
        s = s.iloc[np.linspace(0, len(s) - 1, _MAX_DISTRIBUTION).astype(int)]

    def us(col: str) -> list[float | None]:
        v = (s[col] / 1e3).round(2)
        return [None if pd.isna(x) else float(x) for x in v]

    return Distributions(window_us=us("window_ns"), gpu_idle_us=us("gpu_idle_ns"),
                         klass=[str(k) for k in s["klass"]], sampled_from=len(steady))
