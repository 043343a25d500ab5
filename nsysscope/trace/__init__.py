"""Reading traces: one normalised :class:`Trace` (:mod:`.normalised`) from any input, by the
reader table of :mod:`.load`: :mod:`.nsys` (an SQLite export, found for a report or a
compressed export; every schema difference between nsys versions is handled there and nowhere
else) and :mod:`.kineto` (torch.profiler JSON). What a trace can do is said by
:class:`TraceMeta`'s fields, never by its format's name outside this package."""

from .load import Trace, TraceMeta, load
from .nsys.sources import resolve
from .time_range import TimeRange

__all__ = ["TimeRange", "Trace", "TraceMeta", "load", "resolve"]
