"""Pictures of an analysed trace: an nsys-like timeline, distributions, per-launch series,
and a baseline/candidate comparison.

Everything returns a :class:`matplotlib.figure.Figure` built without pyplot.
:class:`TracePlots` is the notebook's ``t.plot``; the ``*_figure`` functions are the same
pictures for scripts. Modules: :mod:`.style` (what every figure shares), :mod:`.views` (what a
timeline is drawn from), :mod:`.timeline`, :mod:`.distributions`, :mod:`.series`,
:mod:`.compare`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure

from ...analysis import Analysis
from .compare import compare_figure
from .distributions import distributions_figure
from .picking import pick_launch
from .series import SERIES_POINTS, series_figure
from .style import CLASS_COLORS, OKABE_ITO, NsysscopeFigure
from .timeline import draw_timeline
from .timeline import timeline_figure as _timeline_figure
from .views import TraceViews

__all__ = ["CLASS_COLORS", "OKABE_ITO", "NsysscopeFigure", "TracePlots", "compare_figure",
           "distributions_figure", "draw_timeline", "pick_launch", "series_figure",
           "timeline_figure"]


class TracePlots(TraceViews):
    """Plots of one :class:`~nsysscope.analysis.Analysis` (``t.plot`` in a notebook)."""

    def timeline(self, steps: Sequence[int] | None = None, which: str | None = None,
                 ax: Any = None, *, launches: Sequence[int] | None = None, context: int = 1,
                 title: str | None = None, pid: int | None = None) -> Figure:
        """An nsys-like timeline of a few steps.

        ``steps``: NVTX step numbers (``range(100, 103)``) of process ``pid`` (default: the
        one that launched most graphs; each process numbers its own steps), or launch indices
        when the trace has no ``step N`` ranges; ``launches``: launch indices; ``which``:
        ``"worst"`` (the steady stall that cost the GPU most idle time of its own, not
        counting the host running slower than usual after it; with no stall, the longest GPU
        gap) or ``"typical"`` (the default: a steady launch whose GPU idle gap is close to the
        median, among ordinary neighbours), shown with ``context`` steps before it.
        ``ax``: draw into this axes instead of a new figure.
        """
        return _timeline_figure(self, steps, which, ax, launches=launches, context=context,
                                title=title, pid=pid)

    def distributions(self, kind: str = "cdf") -> Figure:
        """Overlap windows and GPU idle gaps of the steady-state launches, per class."""
        return distributions_figure(self.analysis, kind=kind, name=self.name)

    def series(self, max_points: int = SERIES_POINTS) -> Figure:
        """Per-launch GPU gap, overlap window and launch interval over the capture."""
        return series_figure(self.analysis, max_points=max_points, name=self.name)

    def compare(self, other: Any, labels: tuple[str, str] | None = None) -> Figure:
        """This trace (baseline) next to ``other`` (candidate)."""
        other = getattr(other, "analysis", other)
        return compare_figure(self.analysis, other, labels=labels)

    def _repr_html_(self) -> str:
        return (f"<p>Plots of <code>{self.name}</code>: <code>.timeline(steps=..., "
                "which='worst'|'typical')</code>, <code>.distributions()</code>, "
                "<code>.series()</code>, <code>.compare(other)</code></p>")


def timeline_figure(analysis: Analysis, **kw: Any) -> Figure:
    """Shorthand for ``TracePlots(analysis).timeline(**kw)``."""
    return TracePlots(analysis).timeline(**kw)
