"""Every result type nsysscope produces, and the registry renderers are found through.

The bottom layer above :mod:`nsysscope.errors` and :mod:`nsysscope.util`: plain dataclasses
(stdlib and numpy only; frozen, except the batch results, which a run fills in as its traces
finish) with versioned ``to_dict``/``from_dict``
(:mod:`.schema`). ``summary`` is one trace's result, ``gate`` a comparison of two, ``batch``
many traces at once; ``classes`` holds the :class:`LaunchClass` enum and the one table of
what is said and done about each class (:data:`CLASS_TABLE`).
"""

from . import registry
from .batch import BATCH_SCHEMA, Aggregate, BatchResult, TraceResult
from .classes import (
    CAUSES,
    CLASS_TABLE,
    FIXES,
    GATED_CLASSES,
    LAUNCH_CLASSES,
    NOT_JUDGED,
    STALL_CLASSES,
    ClassRow,
    LaunchClass,
)
from .facts import VERDICT_CASES, WRITTEN, Note, Verdict
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
from .serving import GraphExec, IdlePeriods, Startup
from .sites import LatentSite, Percentiles, SourceLine, StallSite
from .summary import (
    SCHEMA,
    Bursts,
    Distributions,
    IfFixed,
    ProcessSummary,
    Summary,
    TraceInfo,
    counted_steps,
    profiler_of,
    summary_in,
)

__all__ = [
    "BATCH_SCHEMA", "CAUSES", "CHANGED", "CLASS_TABLE", "FAIL", "FIXES", "GATE_SCHEMA",
    "GATED_CLASSES", "IMPROVED", "LAUNCH_CLASSES", "NA", "NOT_JUDGED", "PASS", "SCHEMA",
    "STALL_CLASSES", "VERDICT_CASES", "WRITTEN", "Aggregate", "BatchResult", "Bursts", "Check",
    "ClassRow", "counted_steps", "Distributions", "Finding", "GateResult", "GraphExec",
    "Headline", "IdlePeriods", "IfFixed", "LatentSite", "LaunchClass", "Note", "Percentiles",
    "ProcessSummary", "profiler_of", "registry", "Renderer", "Side", "SiteChange", "SourceLine",
    "StallSite", "Startup", "Summary", "summary_in", "TraceInfo", "TraceResult", "Verdict",
]
