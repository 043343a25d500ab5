"""The notebook-friendly front door: ``t = nsysscope.open("trace.sqlite")``.

It calls what the CLI calls (:func:`~nsysscope.analysis.pipeline.analyze_file`, the renderers),
with the trace's events kept for its plots, as ``report -o x.html`` keeps them (a long trace's
are read again for the steps a timeline shows: ``t.analysis.trace`` holds none); it only keeps
the results around and shows them as DataFrames and rich HTML. Importing it imports
:mod:`nsysscope.render`, which registers the renderers that ``_repr_html_`` finds.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from . import render  # noqa: F401 - registers the renderers
from .analysis import Analysis, AnalysisConfig, analyze, analyze_file
from .analysis.config import config_of
from .analysis.job import analyze_files
from .gate import compare
from .model import GateResult, StallSite, Summary, registry
from .trace import TimeRange, Trace, load

if TYPE_CHECKING:
    from .render.plots import TracePlots

__all__ = ["Analysis", "AnalysisConfig", "GateResult", "OpenTrace", "StallSite", "Summary",
           "TimeRange", "Trace", "analyze", "compare", "load", "open"]


class OpenTrace:
    """One analysed trace (or the files of one job, as one server), explorable in a
    notebook."""

    def __init__(self, path: str | Path | Sequence[str | Path],
                 config: AnalysisConfig | None = None, nsys: str | None = None,
                 time_range: TimeRange | None = None) -> None:
        if isinstance(path, (str, Path)):
            self.path = Path(path)
            self.analysis: Analysis = analyze_file(path, config, nsys=nsys,
                                                   time_range=time_range, events="shown")
            return
        if time_range is not None:
            raise ValueError("time_range: a part of one trace; the files of a job are read "
                             "whole")
        self.path = Path(path[0])
        self.analysis = analyze_files(list(path), config_of(config), nsys)

    # the tables are copies (or selections, new frames too): a notebook that drops or
    # overwrites a column of one must not change what the summary, the plots and the other
    # tables are made of
    @property
    def launches(self) -> pd.DataFrame:
        """One row per graph launch: timing, paired block, window, gap, class, attribution."""
        return self.analysis.launches.copy()

    @property
    def blocks(self) -> pd.DataFrame:
        """Every host block (sync or blocking copy) and what it waited on."""
        return self.analysis.blocks.copy()

    @property
    def stalls(self) -> pd.DataFrame:
        """The steady-state launches whose waiting block let the GPU run dry: the rows the
        summary's stall counts are made of (warm-up left out, as in the report). Every stall,
        warm-up included, is :attr:`all_stalls`."""
        stalls = self.analysis.stalls
        return stalls[stalls["steady"]]

    @property
    def all_stalls(self) -> pd.DataFrame:
        """Every stalled launch, warm-up included (``t.launches[t.launches.stall]``)."""
        return self.analysis.stalls  # a selection: a new frame

    @property
    def processes(self) -> pd.DataFrame:
        """One row per process that launched graphs (an engine, or a tensor-parallel rank):
        pid, name, device, launch counts, a column per class, GPU busy, launches/s and time
        in collectives. ``proc`` is the process key the other tables use (``waited_for``
        names a peer by it)."""
        return self.analysis.processes.copy()

    @property
    def summary(self) -> Summary:
        """The summary: verdict, headline, stalls per class, windows, gaps, sites (a property,
        as ``launches``, ``stalls`` and ``processes`` are; ``t.summary()`` still works, with a
        DeprecationWarning)."""
        return self.analysis.summary

    @cached_property
    def plot(self) -> TracePlots:
        """Plots of this trace: ``t.plot.timeline(...)``, ``t.plot.distributions()``."""
        from .render.plots import TracePlots  # matplotlib only when a plot is asked for
        return TracePlots(self.analysis)

    def __repr__(self) -> str:
        s = self.analysis.summary
        n, every = len(self.stalls), len(self.all_stalls)
        more = f", {every - n} more in warm-up (t.all_stalls)" if every > n else ""
        return (f"<nsysscope trace {self.path.name}: {s.verdict}; t.stalls: {n} "
                f"steady-state stalls{more}>")

    def _repr_html_(self) -> str | None:
        return registry.render_fragment("summary", self.analysis.summary)


def open(path: str | Path | Sequence[str | Path],  # noqa: A001
         config: AnalysisConfig | None = None, nsys: str | None = None,
         time_range: TimeRange | None = None) -> OpenTrace:
    """Load and analyse a trace (.sqlite, .sqlite.xz/.gz, .nsys-rep, or a torch.profiler
    JSON trace, plain or .gz), or only ``time_range`` of an nsys export's timeline; a list of
    paths: the files of one job (its ranks profiled apart), analysed as one server
    (:func:`~nsysscope.analysis.job.analyze_files`)."""
    return OpenTrace(path, config, nsys, time_range)
