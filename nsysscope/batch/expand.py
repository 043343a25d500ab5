"""Which trace files a command line names: files as given, folders' trace files, globs."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable
from pathlib import Path

from ..errors import UnreadableInput
from ..trace.load import TRACE_SUFFIXES, is_trace_file, own_output
from ..util.progress import note

_RANK = re.compile(r"(?:^|[^a-z])(?:rank|rk|proc|gpu|dev(?:ice)?|node)[_\-.=]?(\d+)", re.I)
_EXPLICIT = re.compile(r"(?i)[^a-z]?(?:rank|rk)")  # of the _RANK words, those that say rank
_GLOB = re.compile(r"[*?\[]")


# -- which files ---------------------------------------------------------------------------------

def names_many(spec: str) -> bool:
    """Whether one command-line argument stands for several traces: a folder or a glob."""
    p = Path(spec)
    return p.is_dir() or (bool(_GLOB.search(spec)) and not p.exists())


def expand(specs: Iterable[str | Path]) -> list[Path]:
    """Trace files named by ``specs``: files as given, folders' trace files (not recursive,
    sorted), and glob patterns (``**`` recurses). Duplicates are dropped; a folder or glob
    with no trace in it is an error. A folder or glob, and a file among several (a glob the
    shell expanded), leave out nsysscope's own outputs (``--per-launch all.sqlite`` written
    beside the traces, a timeline), with a note."""
    given = [str(spec) for spec in specs]
    out: list[Path] = []
    seen: set[str] = set()
    again: list[Path] = []

    def add(p: Path) -> None:
        key = os.path.abspath(p)
        if key not in seen:
            seen.add(key)
            out.append(p)
        elif p.is_file() and p not in again:
            again.append(p)

    for spec in given:
        p = Path(spec)
        if p.is_dir():
            found = _traces(sorted(q for q in p.iterdir() if q.is_file()))
            if not found:
                raise UnreadableInput(f"{spec}: no trace files in this folder (by name: "
                                      f"{', '.join(TRACE_SUFFIXES)}; or by content)")
            for q in _natural(found):
                add(q)
        elif _GLOB.search(spec) and not p.exists():
            found = _traces(Path(q) for q in glob.glob(spec, recursive=True) if Path(q).is_file())
            if not found:
                raise UnreadableInput(f"{spec}: no trace file matches")
            for q in _natural(found):
                add(q)
        elif not (len(given) > 1 and p.is_file() and _left_out(p)):
            add(p)  # a missing or unreadable file gets its error row from the worker
    if not out and given:
        raise UnreadableInput(f"no trace among {', '.join(given)}: each is nsysscope's own "
                              "output (see the notes above)")
    for p in again:  # a trace named twice (a glob and its folder, say) is one trace
        note(f"{p}: named more than once; analysed once")
    return out


def _traces(files: Iterable[Path]) -> list[Path]:
    """The trace files of ``files`` found in a folder or by a glob: by name or by content
    (:func:`~nsysscope.trace.load.is_trace_file`), less nsysscope's own outputs (per-launch
    databases, timelines) that sit among them."""
    return [q for q in files if is_trace_file(q) and not _left_out(q)]


def _left_out(q: Path) -> bool:
    """Whether ``q`` is one of nsysscope's own outputs, said in a note."""
    own = own_output(q)
    if own:
        note(f"{q}: left out: nsysscope's {own}, not a trace")
    return own is not None


def _natural(paths: Iterable[Path]) -> list[Path]:
    """rank2 before rank10."""
    def key(p: Path) -> list[int | str]:
        return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", str(p))]
    return sorted(paths, key=key)


def rank_of(path: str | Path, processes: int = 1) -> int | None:
    """The rank a trace's file name names (``rank3``, ``gpu_3``, ``proc-3``...), if any, and
    if the trace holds one process (``processes``, when known): a file of several is no one
    rank's, whatever its name says."""
    matches = list(_RANK.finditer(Path(path).name))
    if not matches or processes > 1:
        return None
    # an explicit rank wins over a device or node number (rank1_gpu0 is rank 1); else the last
    ranked = [m for m in matches if _EXPLICIT.match(m.group(0))]
    return int((ranked or matches)[-1].group(1))
