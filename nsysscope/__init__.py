"""nsysscope: find what destroys CPU/GPU overlap in LLM inference engines, from nsys traces.

Typical use in a notebook::

    import nsysscope
    t = nsysscope.open("sample_traces/h200_case1_300.sqlite.xz")
    t.summary()          # verdict, stalls per class, windows, gaps, sites
    t.stalls             # a DataFrame, one row per stalled launch

``nsysscope.open`` is available but not in ``__all__``: ``from nsysscope import *`` must not
shadow the builtin ``open``. The layers, bottom up: errors and util, model, trace, analysis,
gate and batch, render, api, cli (README, "Architecture").
"""

from .api import (
    Analysis,
    AnalysisConfig,
    GateResult,
    OpenTrace,
    StallSite,
    Summary,
    Trace,
    analyze,
    compare,
    load,
)
from .api import open as open  # re-exported, but kept out of __all__ (see above)
from .errors import NsysscopeError
from .util.version import __version__

__all__ = ["Analysis", "AnalysisConfig", "GateResult", "NsysscopeError", "OpenTrace",
           "StallSite", "Summary", "Trace", "__version__", "analyze", "compare", "load"]
