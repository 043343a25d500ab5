"""The ways nsysscope refuses an input, each with its own exit code.

Every error is one line a user can act on. The CLI turns them into that line on stderr and
the exit code below; the library just raises them.

=====  =====================================================================
code   meaning
=====  =====================================================================
0      analysed (report), or no regression (gate)
1      the gate found a regression
2      usage error, or the file cannot be read at all (missing, empty, a
       directory, no permission, random bytes, corrupt compression)
3      nothing to analyse: no CUDA data, or no CUDA graph launches
4      the gate's two traces are not comparable (other GPU, no launches in common)
5      a readable SQLite file that is not an nsys export, a truncated export, or
       an export schema nsysscope does not know
6      a ``.nsys-rep`` needs ``nsys``, and it is missing or too old for the report
7      the profiler lost the data: the trace cannot be trusted
=====  =====================================================================
"""

from __future__ import annotations


class NsysscopeError(Exception):
    """Base class: a one-line message and the process exit code that goes with it."""

    exit_code = 2


class UnreadableInput(NsysscopeError):
    """The file is missing, empty, a directory, unreadable, or not SQLite at all."""

    exit_code = 2


class NothingToAnalyse(NsysscopeError):
    """The trace is a valid export but holds no CUDA work or no graph launches."""

    exit_code = 3


class NotComparable(NsysscopeError):
    """The gate's two sides cannot be compared."""

    exit_code = 4


class NotAnNsysExport(NsysscopeError):
    """SQLite, but not an nsys export nsysscope can read (foreign, truncated, unknown schema)."""

    exit_code = 5


class NsysUnavailable(NsysscopeError):
    """Exporting a ``.nsys-rep`` needs nsys, and none that can read the report was found."""

    exit_code = 6


class ProfilerLostData(NsysscopeError):
    """The export says the profiler dropped events; an analysis would mislead."""

    exit_code = 7


class NewerSchema(UnreadableInput):
    """A result file (summary, gate result) written by a newer nsysscope: its schema's major
    version is higher than this one reads."""

    exit_code = 2
