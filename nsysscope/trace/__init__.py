"""Reading nsys traces: find a readable SQLite export for any input, then load one
normalised :class:`Trace` from it. Every schema difference between nsys versions is handled
in this package and nowhere else."""

from .load import Trace, TraceMeta, load
from .sources import resolve
from .time_range import TimeRange

__all__ = ["TimeRange", "Trace", "TraceMeta", "load", "resolve"]
