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
4      the gate's two traces are not comparable (different GPU models or profilers)
5      a readable SQLite file that is not an nsys export, a truncated export (or
       compressed file, or torch.profiler trace), or an export schema nsysscope
       does not know
6      a ``.nsys-rep`` needs ``nsys``, and it is missing or too old for the report
7      the profiler lost the data: the trace cannot be trusted
8      nothing steady to judge: every launch is warm-up (``--warmup`` at or
       above the launch count), so there is no steady state to report or gate
70     internal error (a bug; ``NSYSSCOPE_DEBUG=1`` shows the traceback)
=====  =====================================================================

:data:`EXIT_CODES` is this table as data: ``--help`` and the README list it from there.
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


class DamagedExport(NotAnNsysExport):
    """An nsys export damaged past its header, as a disk damages a file: a page that is not
    SQLite, text that is not UTF-8."""


def truncated_compressed(path: object) -> DamagedExport:
    """A compressed trace that ends before its end-of-stream marker: cut off in a copy, as a
    truncated export or torch.profiler trace is, and refused with their exit code (it was 2
    where the uncompressed file's was 5)."""
    return DamagedExport(f"{path}: truncated compressed file (it ends before its end-of-stream "
                         "marker); copy or export it again")


class NsysUnavailable(NsysscopeError):
    """Exporting a ``.nsys-rep`` needs nsys, and none that can read the report was found."""

    exit_code = 6


class ProfilerLostData(NsysscopeError):
    """The export says the profiler dropped events; an analysis would mislead."""

    exit_code = 7


class NothingSteady(NsysscopeError):
    """Every graph launch of the trace is warm-up: there is no steady state to judge (a
    ``--warmup`` at or above the number of launches, or a summary written from such a run)."""

    exit_code = 8


class NewerSchema(UnreadableInput):
    """A result file (summary, gate result) written by a newer nsysscope: its schema's major
    version is higher than this one reads."""

    exit_code = 2


class SomeTracesFailed(NsysscopeError):
    """Several traces were analysed and some could not be: their rows say why; the exit code
    is the first failed trace's."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


#: the internal-error exit code (a bug in nsysscope, never a bad input)
INTERNAL_ERROR = 70

#: every exit code and what it means, short: the CLI's ``--help`` and the README list these
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (0, "ok: analysed (report, summarize), or no regression (gate)"),
    (1, "the gate found a regression"),
    (2, "usage error, or a file that cannot be read or written"),
    (3, "nothing to analyse: no CUDA data, or no CUDA graph launches"),
    (4, "the gate's two sides are not comparable (different GPU models or profilers)"),
    (5, "a damaged trace: not nsys SQLite, truncated, unknown schema, corrupt JSON"),
    (6, "a .nsys-rep needs nsys, and it is missing or too old for the report"),
    (7, "the profiler lost the data (e.g. nsys too old for the CUDA version)"),
    (8, "nothing steady to judge: every launch is warm-up"),
    (INTERNAL_ERROR, "internal error (a bug; NSYSSCOPE_DEBUG=1 shows the traceback)"),
    (130, "interrupted (Ctrl-C)"),
    (143, "terminated (SIGTERM: a CI timeout, docker stop); temporary files removed"),
)
