"""Load one normalised :class:`Trace` from any input: the reader table (:data:`READERS`), one
row an input format, says what its files are named (what a folder's traces are), how a file
is told to be one (by content) and how it is read. A new input format is a package beside
:mod:`.nsys` and :mod:`.kineto` and a row here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import UnreadableInput
from .cache import CACHE_SUFFIX
from .formats import file_kind, is_results_db, json_kind
from .kineto import read_kineto
from .normalised import Trace, TraceMeta
from .nsys.read import read_nsys
from .time_range import TimeRange, span_of

__all__ = ["READERS", "TRACE_SUFFIXES", "Reader", "Trace", "TraceMeta", "is_trace_file",
           "is_trace_name", "load",
           "own_output"]


@dataclass(frozen=True)
class Reader:
    """One input format nsysscope reads."""

    name: str  # as an error names it
    #: what a trace file of it is named (a folder's or a glob's traces are these files)
    suffixes: tuple[str, ...]
    #: whether the file at a path is one, by content (never by name); None for the first
    #: reader, which takes what no other claims (and says what is wrong with it)
    claims: Callable[[Path], bool] | None
    #: the file's :class:`Trace` (``nsys``: the nsys that exports a report; a
    #: :class:`TimeRange` only where the format :attr:`TraceMeta.can_window`)
    read: Callable[[Path, str | None, TimeRange], Trace]


def _read_kineto(path: Path, nsys: str | None, span: TimeRange) -> Trace:
    if not span.whole:
        raise UnreadableInput(f"{path}: a time range is read from nsys exports only, not "
                              "from torch.profiler traces")
    return read_kineto(path)


#: every input format, the one that takes what no other claims first
READERS = (
    Reader("nsys export", (".sqlite", ".sqlite.xz", ".sqlite.gz", ".nsys-rep", ".qdrep"),
           None, read_nsys),
    # any JSON: the Kineto reader says what is wrong with JSON that is no trace
    Reader("torch.profiler (Kineto) JSON trace",
           (".trace.json", ".trace.json.gz", ".trace.json.xz"),
           lambda p: json_kind(p) is not None, _read_kineto),
)
#: what a trace file's name ends with, in any format
TRACE_SUFFIXES = tuple(s for r in READERS for s in r.suffixes)


def load(path: str | Path, nsys: str | None = None,
         time_range: TimeRange | None = None) -> Trace:
    """Read the trace at ``path`` (.sqlite, .sqlite.xz/.gz, .nsys-rep, or a torch.profiler
    JSON trace, plain or compressed: told apart by content); of an nsys export, only
    ``time_range`` when given (:mod:`.time_range`)."""
    if json_kind(path) == "timeline":
        raise UnreadableInput(f"{path}: an nsysscope timeline (export or --perfetto output), "
                              "not a trace: open it in https://ui.perfetto.dev, and give "
                              "nsysscope the trace it was made from")
    p = Path(path)
    reader = next((r for r in READERS if r.claims is not None and r.claims(p)), READERS[0])
    return reader.read(p, nsys, span_of(time_range))


def is_trace_name(name: str) -> bool:
    """Whether a file of a folder (or a glob) named ``name`` is taken for a trace: by name,
    as :data:`TRACE_SUFFIXES` says, less nsysscope's own cached exports."""
    n = name.lower()
    return n.endswith(TRACE_SUFFIXES) and not n.endswith(CACHE_SUFFIX)


#: what :func:`~.formats.file_kind` says of a file that is a trace, whatever its name
TRACE_KINDS = frozenset({"an nsys export", "a compressed SQLite file", "an Nsight Systems report",
                         "a torch.profiler trace"})


def is_trace_file(q: Path) -> bool:
    """Whether a file of a folder (or a glob) is taken for a trace: named as one
    (:func:`is_trace_name`), or one by content whatever its name, as a file given alone is
    read (torch.profiler's ``tensorboard_trace_handler`` names its files ``HOST_PID.TIME
    .pt.trace.json``, but a trace saved as ``rank0.json`` was "no trace files in this
    folder" while ``report rank0.json`` read it). Nothing is opened twice for a name that
    says it; nsysscope's cached exports are left out."""
    if is_trace_name(q.name):
        return True
    return not q.name.lower().endswith(CACHE_SUFFIX) and file_kind(q) in TRACE_KINDS


def own_output(q: Path) -> str | None:
    """What of nsysscope's own outputs ``q`` is (judged by content: a folder of traces often
    holds them beside the traces), or None."""
    name = q.name.lower()
    if name.endswith((".sqlite", ".db", ".sqlite3")) and is_results_db(q):
        return "per-launch database"
    try:
        if ".json" in name and json_kind(q) == "timeline":
            return "timeline (export, --perfetto)"
    except (UnreadableInput, OSError):
        pass
    return None
