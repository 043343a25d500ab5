"""What every figure shares: the figure class, labels and colours per class, axis helpers.

Figures are built without pyplot (no global state; a notebook shows the returned figure once,
a script saves it). Times on the axes are microseconds or milliseconds, whichever reads better.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import Formatter, FuncFormatter

from ...model import CLASS_TABLE, STALL_CLASSES
from ...util.units import axis_us
from ..palette import CLASS_COLORS, OKABE_ITO

__all__ = ["CLASS_COLORS", "OKABE_ITO", "NsysscopeFigure"]


#: matplotlib's warning for each character its font lacks (CJK or emoji in an NVTX range, a
#: thread or a file name, drawn as a box): dozens of lines on stderr for one figure
_MISSING_GLYPH = r"Glyph \d+ .*missing from (current )?font"  # matplotlib < 3.9: "current"


@contextmanager
def plain_drawing() -> Iterator[None]:
    """Text drawn as it is, never as matplotlib math (a ``$`` in an NVTX range, a thread name
    or a source line italicised the text between two of them, or stopped the figure: a
    ``$\\cmd{$`` is an unknown symbol), and a character the font lacks drawn as a box
    without a warning."""
    with matplotlib.rc_context({"text.parse_math": False}), warnings.catch_warnings():
        warnings.filterwarnings("ignore", _MISSING_GLYPH, UserWarning)
        yield


#: :func:`plain_drawing` as the decorator of every public figure function
plain_text = plain_drawing()


def figure_png(fig: Figure, dpi: int) -> bytes:
    """``fig`` as PNG bytes, drawn plainly (:func:`plain_drawing`)."""
    buf = io.BytesIO()
    with plain_drawing():
        fig.savefig(buf, format="png", dpi=dpi, facecolor="white")
    return buf.getvalue()


class NsysscopeFigure(Figure):
    """A plain :class:`~matplotlib.figure.Figure` that also shows itself in Jupyter when
    pyplot (and so the inline backend's formatters) was never imported."""

    def _repr_png_(self) -> bytes:
        return figure_png(self, dpi=90)


#: the legend of a launch of each class, and of a host wait before it (the class table's)
CLASS_LABELS: dict[str, str] = {r.klass: r.label for r in CLASS_TABLE}
BLOCK_LABELS: dict[str, str] = {r.klass: r.wait_label for r in CLASS_TABLE if r.wait_label}
STALLS = STALL_CLASSES
#: the order classes are listed in legends and bar charts: the judged ones
SHOWN_ORDER = tuple(r.klass for r in CLASS_TABLE if r.judged)
GRAPH_COLOR = OKABE_ITO["blue"]
EAGER_COLOR = OKABE_ITO["sky_blue"]
#: a copy call on the host: yellow, so it never reads as the GPU's light-blue eager work
COPY_CALL_COLOR = OKABE_ITO["yellow"]
COPY_CALL_EDGE = "#8C8200"
OTHER_CALL_COLOR = "#C8C8C8"
UNPAIRED_WAIT_COLOR = "#7F7F7F"
NVTX_COLORS = ("#E4E4E4", "#F1F1F1")
IDLE_COLOR = "#7F7F7F"
GRID_COLOR = "#E5E5E5"
#: legend text: readable at the size the HTML pages show the figures (about 9 pt)
LEGEND_SIZE = 9.0
LEGEND_COLUMNS = 3


def class_order(klasses: Iterable[str]) -> list[str]:
    """The stall classes, launch-bound and healthy among ``klasses`` (a class per launch), in
    legend order. The distinct classes are found in C: a set built from a categorical column
    element by element took 0.05 s per figure at 10^5 launches."""
    present = set(pd.unique(np.asarray(klasses, dtype=object)))
    return [str(k) for k in SHOWN_ORDER if k in present]


def label_us(axis: Any) -> None:
    """Label ``axis`` (``ax.xaxis`` or ``ax.yaxis``) in µs or ms. On a log scale the minor
    ticks that matplotlib labels (an axis spanning less than about a decade) get the same
    units: its own labels are maths text, which these figures never parse, so they showed as
    raw ``$\\mathdefault{3\\times10^{4}}$``."""
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: axis_us(v)))
    if axis.get_scale() == "log":
        axis.set_minor_formatter(_LabelledMinorUs(axis.get_minor_formatter()))


class _LabelledMinorUs(Formatter):
    """The minor ticks ``inner`` (matplotlib's log formatter) chooses to label, in µs or ms."""

    def __init__(self, inner: Formatter) -> None:
        self.inner = inner

    def set_axis(self, axis: Any) -> None:
        super().set_axis(axis)
        self.inner.set_axis(axis)

    def set_locs(self, locs: Any) -> None:
        super().set_locs(locs)
        self.inner.set_locs(locs)

    def __call__(self, x: float, pos: int | None = None) -> str:
        return axis_us(x) if self.inner(x, pos) else ""


def use_log(values: np.ndarray) -> bool:
    """Log scale when the values span more than about a decade and a half, or when a few
    outliers lie far beyond the bulk (case 2's idle gaps: most near 170 µs, two launch-bound
    gaps near 2.5 ms), which a linear axis would squash the bulk against."""
    v = values[np.isfinite(values) & (values > 0)]
    if len(v) < 2:
        return False
    return bool(v.max() / max(v.min(), 1.0) > 30 or v.max() > 6 * max(np.median(v), 1.0))


def fig_ax(ax: Any, figsize: tuple[float, float]) -> tuple[Figure, Any, bool]:
    """``ax``'s figure and ``ax``, or a new figure with one axes (and True: it is ours)."""
    if ax is not None:
        return ax.figure, ax, False
    fig = NsysscopeFigure(figsize=figsize)
    return fig, fig.add_subplot(1, 1, 1), True


def axes_width_chars(ax: Any) -> float:
    """About how many 7.5 pt characters fit across the axes."""
    fig = ax.figure
    w_in = fig.get_figwidth() * ax.get_position().width
    return float(max(20.0, w_in * 72 / (7.5 * 0.6)))


def ranges(ids: Sequence[int]) -> str:
    """``3-7`` for a run of ids, else the first eight."""
    ids = sorted(set(int(i) for i in ids))
    if not ids:
        return "(none)"
    if ids == list(range(ids[0], ids[-1] + 1)) and len(ids) > 2:
        return f"{ids[0]}-{ids[-1]}"
    return ", ".join(map(str, ids[:8])) + ("..." if len(ids) > 8 else "")
