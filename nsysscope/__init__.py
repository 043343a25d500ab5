"""nsysscope: find what destroys CPU/GPU overlap in LLM inference engines, from nsys traces.

Typical use in a notebook::

    import nsysscope
    t = nsysscope.open("sample_traces/h200_case1_300.sqlite.xz")
    t.summary            # headline, verdict, stalls per class, windows, gaps, sites
    t.stalls             # a DataFrame, one row per stalled steady-state launch

``nsysscope.open`` is available but not in ``__all__``: ``from nsysscope import *`` must not
shadow the builtin ``open``. The layers, bottom up: errors and util, model, trace, analysis,
gate and batch, render, api, cli (docs/architecture.md).

The names below are imported on first use (PEP 562), so ``import nsysscope`` and
``nsysscope --version`` do not pay for pandas and matplotlib until something is analysed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import NsysscopeError
from .util.version import __version__

if TYPE_CHECKING:
    from .api import (
        Analysis,
        AnalysisConfig,
        GateResult,
        OpenTrace,
        StallSite,
        Summary,
        TimeRange,
        Trace,
        analyze,
        compare,
        load,
    )
    from .api import open as open  # noqa: F401

__all__ = ["Analysis", "AnalysisConfig", "GateResult", "NsysscopeError", "OpenTrace",
           "StallSite", "Summary", "TimeRange", "Trace", "__version__", "analyze", "compare",
           "load"]

_FROM_API = {"Analysis", "AnalysisConfig", "GateResult", "OpenTrace", "StallSite", "Summary",
             "TimeRange", "Trace", "analyze", "compare", "load", "open"}


def __getattr__(name: str) -> Any:
    if name in _FROM_API:
        value = getattr(importlib.import_module(".api", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'nsysscope' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _FROM_API)
