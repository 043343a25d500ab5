"""The overlap analysis: pure functions from a :class:`~nsysscope.trace.Trace` to tables and
a :class:`~nsysscope.model.Summary`. Nothing here parses files, prints or plots
(:func:`.pipeline.analyze_file` only asks the trace layer for a trace, whole or in windows).
The front door is :mod:`.pipeline`; this module only re-exports it."""

from __future__ import annotations

from .config import AnalysisConfig
from .pipeline import Analysis, Events, analyze, analyze_file, analyze_windows, finish
from .rows import LaunchRows, TraceRows, launch_rows
from .summarise import summarize

__all__ = ["Analysis", "AnalysisConfig", "Events", "LaunchRows", "TraceRows", "analyze",
           "analyze_file", "analyze_windows", "finish", "launch_rows", "summarize"]
