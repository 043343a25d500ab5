"""Every result type nsysscope produces, and the registry renderers are found through.

The bottom layer above :mod:`nsysscope.errors` and :mod:`nsysscope.util`: plain dataclasses
(stdlib and numpy only; frozen, except the batch results, which a run fills in as its traces
finish) with versioned ``to_dict``/``from_dict``
(:mod:`.schema`). ``summary`` is one trace's result, ``gate`` a comparison of two, ``batch``
many traces at once; ``classes`` holds the :class:`LaunchClass` enum.
"""

from . import registry
from .batch import BATCH_SCHEMA, Aggregate, BatchResult, TraceResult
from .classes import CAUSES, FIXES, GATED_CLASSES, LAUNCH_CLASSES, STALL_CLASSES, LaunchClass
from .gate import (
    CHANGED,
    FAIL,
    GATE_SCHEMA,
    IMPROVED,
    NA,
    PASS,
    Check,
    Finding,
    GateResult,
    Side,
    SiteChange,
)
from .headline import Headline
from .registry import Renderer
from .summary import (
    SCHEMA,
    Bursts,
    Distributions,
    IfFixed,
    LatentSite,
    Percentiles,
    ProcessSummary,
    SourceLine,
    StallSite,
    Summary,
    TraceInfo,
    counted_steps,
    profiler_of,
    summary_in,
)

__all__ = [
    "BATCH_SCHEMA", "CAUSES", "CHANGED", "FAIL", "FIXES", "GATED_CLASSES", "GATE_SCHEMA",
    "IMPROVED", "LAUNCH_CLASSES",
    "NA", "PASS", "SCHEMA", "STALL_CLASSES", "Aggregate", "BatchResult", "Bursts", "Check",
    "Distributions", "Finding", "GateResult", "Headline", "IfFixed", "LatentSite", "LaunchClass",
    "Percentiles",
    "ProcessSummary", "Renderer", "Side",
    "SiteChange", "SourceLine", "StallSite", "Summary", "TraceInfo", "TraceResult",
    "counted_steps", "profiler_of", "registry", "summary_in",
]
