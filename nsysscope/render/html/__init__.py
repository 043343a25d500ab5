"""HTML: one self-contained page per report or gate, and fragments for Jupyter.

:mod:`.page` is what every page shares, :mod:`.report` and :mod:`.gate` the two pages,
:mod:`.fragments` the notebook blocks.
"""

from .fragments import gate_fragment, summary_fragment
from .gate import gate_page
from .page import figure, figure_png
from .report import report_page

__all__ = ["figure", "figure_png", "gate_fragment", "gate_page", "report_page",
           "summary_fragment"]
