"""Every file an analysed trace is exported as, in one table (:data:`EXPORTERS`): each
exporter's name, the option that writes it, the extensions of its files, what it needs that
may be missing, and its writer. The command line chooses among them by option and file name,
and names them in its messages from here; a new export is a writer and a row."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..analysis import Analysis
from ..util.atomic import atomic_file
from .db import DB_SUFFIXES, write_db
from .per_launch import per_launch_parts, write_per_launch_parts
from .perfetto import write_perfetto


@dataclass(frozen=True)
class ExportContext:
    """What a caller hands an exporter beside the analysis; each reads what applies to it."""

    #: the trace as the user named it (the database's key for it; None: the trace's path)
    trace: str | None = None
    #: the rank the trace is (from its name), kept beside its rows
    rank: int | None = None
    #: a timeline with every kernel of each graph replay (where the export holds them)
    all_kernels: bool = False


@dataclass(frozen=True)
class Exporter:
    """One kind of file an analysed trace is written as."""

    name: str
    #: the command-line option that writes it
    option: str
    #: what its files are named (the first is the one messages suggest)
    extensions: tuple[str, ...]
    #: writes the file, whole or not at all; returns how many rows or events it wrote (None:
    #: not counted). OSError where it cannot write
    write: Callable[[str, Analysis, ExportContext], int | None]
    #: modules of which it needs one (an optional dependency), and what to say without them
    needs: tuple[str, ...] = ()
    without: str = ""

    def missing(self) -> str | None:
        """What to say where none of the modules it needs is installed; None: it can write."""
        if self.needs and not any(importlib.util.find_spec(m) is not None for m in self.needs):
            return self.without
        return None


def _table(parquet: bool) -> Callable[[str, Analysis, ExportContext], int | None]:
    def write(path: str, a: Analysis, _: ExportContext) -> None:
        with atomic_file(path) as f:
            write_per_launch_parts(f, per_launch_parts(a), parquet=parquet)
    return write


def _db(path: str, a: Analysis, c: ExportContext) -> None:
    write_db(path, a, trace=c.trace, rank=c.rank)


def _perfetto(path: str, a: Analysis, c: ExportContext) -> int:
    return write_perfetto(path, a, c.all_kernels)


#: every export, by option, in the order messages list them
EXPORTERS: tuple[Exporter, ...] = (
    Exporter("csv", "--per-launch", (".csv",), _table(parquet=False)),
    Exporter("parquet", "--per-launch", (".parquet",), _table(parquet=True),
             needs=("pyarrow", "fastparquet"),
             without="writing parquet needs pyarrow: pip install 'nsysscope[parquet]', or "
             "name a .csv file"),
    Exporter("db", "--per-launch", DB_SUFFIXES, _db),
    Exporter("perfetto", "--perfetto", (".json.gz", ".json", ".json.xz"), _perfetto),
)


def exporters_of(option: str) -> tuple[Exporter, ...]:
    """The exports ``option`` writes."""
    return tuple(e for e in EXPORTERS if e.option == option)


def exporter_for(option: str, path: str | Path) -> Exporter | None:
    """The export ``option`` writes to a file named ``path``: the only one it writes, or the
    one of its several whose extension ``path`` has; None for a name none of them has."""
    some = exporters_of(option)
    if len(some) == 1:
        return some[0]
    low = str(path).lower()
    return next((e for e in some if low.endswith(e.extensions)), None)
