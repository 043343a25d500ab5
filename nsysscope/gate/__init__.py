"""The regression gate: did the candidate lose CPU/GPU overlap the baseline had?

``compare`` (:mod:`.compare`) compares two sides (read by :mod:`.sides`) into a
:class:`~nsysscope.model.GateResult`; :mod:`.checks` holds each metric's rule, :mod:`.stats`
the tests behind them, :mod:`.findings` the sites of what changed (their messages are worded in
``render/findings.py``),
:mod:`.thresholds` the settings. Pure: no printing; renderers format the result.

What is compared, when each check fails, the noise model and its calibration on the H200
samples: README.md, section "Regression gate" (and "The noise model, and why").
"""

from .checks import pause_excess_us
from .compare import compare
from .sides import (
    is_summary_file,
    part_summary,
    read_side,
    read_sides,
    read_summary,
    summary_of,
)
from .stats import (
    bootstrap_median_diff,
    mann_whitney_greater,
    mann_whitney_less,
    two_proportion_greater,
)
from .thresholds import GateThresholds, load_thresholds

__all__ = ["GateThresholds", "bootstrap_median_diff", "compare",
           "is_summary_file", "load_thresholds", "mann_whitney_greater", "mann_whitney_less",
           "pause_excess_us", "read_side", "read_sides", "read_summary", "summary_of",
           "two_proportion_greater", "part_summary"]
