"""nsysscope: find what destroys CPU/GPU overlap in LLM inference engines, from nsys traces.

Typical use in a notebook::

    import nsysscope
    t = nsysscope.open("sample_traces/h200_case1_300.sqlite.xz")
    t.summary()          # verdict, stalls per class, windows, gaps, sites
    t.stalls             # a DataFrame, one row per stalled launch
"""

from .analysis import Analysis, AnalysisConfig, analyze
from .api import OpenTrace, open
from .errors import NsysscopeError
from .gate import compare
from .model import StallSite, Summary
from .trace import Trace, load

__version__ = "0.1.0"

__all__ = ["Analysis", "AnalysisConfig", "NsysscopeError", "OpenTrace", "StallSite", "Summary",
           "Trace", "analyze", "compare", "load", "open", "__version__"]
