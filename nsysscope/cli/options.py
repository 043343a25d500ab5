"""Options and output handling shared by every ``nsysscope`` command that analyses a trace.

Everything a command can check before analysing is checked here first (option ranges, where
the output goes, the output format against the file name), so a mistake costs a second and one
line, not a whole analysis.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import click

from .. import render  # noqa: F401 - registers the formats the tables below are made of
from ..analysis import Analysis, AnalysisConfig
from ..errors import NothingSteady, UnreadableInput
from ..export import ExportContext, check_ours, exporter_for, exporters_of, is_db_name
from ..model import Summary, registry
from ..trace.cache import disable_cache, max_bytes
from ..trace.formats import file_kind
from ..trace.time_range import TimeRange
from ..util.atomic import atomic_file, writes_in_place
from ..util.text import DEFAULT_WIDTH, displayable, terminal_width

F = TypeVar("F", bound=Callable[..., Any])

#: extensions that name no format but plainly hold text: written as the text report
TEXT_EXTENSIONS = frozenset({".log", ".out"})




def analysis_options(f: F) -> F:
    """``--warmup``, ``--launch-bound-us``, ``--nsys`` and ``--no-cache``: how a trace is
    read and analysed."""
    f = click.option("--warmup", type=click.IntRange(min=0), default=None, metavar="N",
                     help="Launches to treat as warm-up, 0 or more (default: max(5, 2%)); "
                          "none left to judge: report, summarize and gate exit 8.")(f)
    f = click.option("--launch-bound-us", type=click.FloatRange(min=0, min_open=True),
                     callback=_finite, default=AnalysisConfig.launch_bound_gap_us,
                     show_default=True, metavar="US",
                     help="GPU idle gap (microseconds, > 0) above which a launch with no "
                          "stall counts as launch-bound.")(f)
    f = click.option("--nsys", metavar="PATH", default=None,
                     help="nsys executable for .nsys-rep input (default: $NSYS, then PATH).")(f)
    f = click.option("--no-cache", is_flag=True, default=False,
                     help="Decompress .xz/.gz and export .nsys-rep into a temporary folder "
                          "removed on exit, instead of the cache ('nsysscope cache info').")(f)
    return f


def job_option(f: F) -> F:
    """``--job/--no-job``: several traces are the files of one job (its ranks profiled
    apart), analysed as one server; by default where their collectives pair up."""
    return click.option(
        "--job/--no-job", "job", default=None,
        help="Several traces: analyse them as one job, its ranks profiled apart (one file per "
             "rank or node), as one server: one row per rank, waits in collectives across "
             "the files [default: where the files' collectives pair up].")(f)


def _finite(ctx: click.Context, param: click.Parameter, value: float) -> float:
    """A number option's value, refused when NaN or infinite (NaN passes FloatRange, and a NaN
    threshold silently matches nothing)."""
    if not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number")
    return value


def config_from(warmup: int | None, launch_bound_us: float) -> AnalysisConfig:
    return AnalysisConfig(warmup_launches=warmup, launch_bound_gap_us=launch_bound_us)


def time_range(start: str | None, end: str | None) -> TimeRange:
    """``--from`` and ``--to`` as a :class:`TimeRange`; a bad time is a usage error."""
    try:
        return TimeRange.parse(start, end)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="'--from' / '--to'") from None


def use_cache(no_cache: bool) -> None:
    """``--no-cache``: this run's decompressed and exported files go to a temporary folder.
    A bad ``$NSYSSCOPE_CACHE_MAX`` is refused here, before any work, on a cache hit too (it
    was read only when a new entry was written, after the entry was made)."""
    if no_cache:
        disable_cache()
    else:
        max_bytes()


def require_steady(s: Summary, warmup: int | None) -> None:
    """Exit 8 with one line when no launch is left to judge after the warm-up."""
    if s.steady_launches:
        return
    how = f"--warmup {warmup}" if warmup is not None else "the default warm-up"
    raise NothingSteady(
        f"{s.trace.path}: nothing steady to judge: {how} leaves no steady launch "
        f"({s.launches} graph launch{'es' if s.launches != 1 else ''}, "
        f"{s.warmup_launches} of them warm-up; the last on each stream is never judged); "
        + ("capture more steps" if warmup == 0 else "lower --warmup or capture more steps"))


def output_format(kind: str, fmt: str | None, output: str | None, option: str = "-o") -> str:
    """The format to write: ``--format`` when given, else the one ``output``'s extension names,
    else text. An extension that names no format (``-o launches.csv``, where ``--per-launch``
    was meant) is a usage error unless ``--format`` says what to write (``.log``, ``.out`` and
    no extension are text), as are a ``--format`` the file name contradicts and a file named
    for another format after an ``option`` that is the format (``--junit r.md``)."""
    by_ext = registry.by_extension(kind)  # what a file name's extension says its format is
    suffix = Path(output).suffix.lower() if output else ""
    named = by_ext.get(suffix)
    if fmt is None:
        if named is None and suffix not in TEXT_EXTENSIONS and \
                re.fullmatch(r"\.[a-z]\w*", suffix) and file_kind(Path(output or "")) is None:
            # (a trace there is refused by check_writable, in its own words)
            hint = " (the per-launch table is --per-launch FILE.csv)" if kind == "report" and \
                suffix in (".csv", ".parquet", ".db", ".sqlite") else ""
            raise click.UsageError(
                f"{option} {output}: {suffix} names no {kind} format ("
                f"{', '.join(r.file_extension for r in registry.renderers(kind))}); "
                f"name one of those, or pass --format to write one to this file{hint}")
        return named or "text"
    if named is not None and named != fmt:
        want = registry.get(kind, fmt)
        said = f"{option} {output} names {registry.get(kind, named).noun} file, but"
        if option != "-o":  # --junit FILE and the like: the option is the format
            raise click.UsageError(f"{said} {option} writes {want.noun} file; name a "
                                   f"{want.file_extension} file")
        raise click.UsageError(f"{said} --format {fmt} was given; drop --format (the extension "
                               f"decides) or name a {want.file_extension} file")
    return fmt


def check_distinct(outputs: Iterable[tuple[str, str | None]]) -> None:
    """Refuse two outputs of one run, ``(option, path)``, that name one file: the second
    written would replace the first without a word (``-o out.csv --per-launch out.csv``)."""
    seen: dict[str, str] = {}
    for option, path in outputs:
        if not path:
            continue
        key = os.path.realpath(path)
        if key in seen:
            raise UnreadableInput(f"{seen[key]} and {option} both name {path}; give each output "
                                  "a file of its own")
        seen[key] = option


def check_writable(path: str | None, option: str = "-o", inputs: Iterable[str | Path] = (),
                   database: bool = False) -> None:
    """Refuse, before any analysis, an output path whose folder is missing or not writable,
    that names a folder, or that would write over a trace: one of the command's ``inputs``,
    an nsys report, or an SQLite file (``database``: an SQLite file that is not an nsys export
    may be written into, as ``--per-launch`` adds to its database; :func:`check_per_launch`
    refuses one that ``--per-launch`` did not write)."""
    if not path:
        return
    p = Path(path)
    if p.is_dir():
        raise UnreadableInput(f"{option} {path}: is a directory; name a file")
    if writes_in_place(p):  # /dev/stdout (a pipe to jq, a terminal), /dev/null
        return
    if p.exists() and not p.is_file():  # a FIFO would keep the run waiting for a reader; a
        # disk is no output
        stdout = ", or leave -o out to write to stdout" if option == "-o" else ""
        raise UnreadableInput(f"{option} {path}: not a regular file (a device, a FIFO or a "
                              f"socket); name a file{stdout}")
    if p.exists():
        _refuse_a_trace(p, option, inputs, database)
    folder = p.parent if str(p.parent) else Path(".")
    if not folder.is_dir():
        raise UnreadableInput(f"{option} {path}: cannot write: no such folder {folder}")
    if p.exists() and not os.access(p, os.W_OK) or not p.exists() and \
            not os.access(folder, os.W_OK | os.X_OK):
        raise UnreadableInput(f"{option} {path}: cannot write: permission denied")


def _refuse_a_trace(p: Path, option: str, inputs: Iterable[str | Path], database: bool) -> None:
    for given in inputs:
        try:
            same = os.path.samefile(p, given)
        except OSError:  # an input that is not a file (a folder, a glob): not this one
            same = False
        if same:
            raise UnreadableInput(f"{option} {p}: is the input {given}; nsysscope never writes "
                                  "over its input: name another file")
    kind = file_kind(p)
    if kind is not None and not (database and kind == "an SQLite file"):
        raise UnreadableInput(f"{option} {p}: is {kind}; nsysscope never writes over a trace: "
                              "name another file")


def check_per_launch(path: str | None, inputs: Iterable[str | Path] = ()) -> None:
    """``--per-launch``: a .csv, .parquet or database (.db, .sqlite, .sqlite3) name in a
    writable folder, not a trace (one of ``inputs``, or an nsys export), and for parquet an
    engine to write it, checked before the analysis."""
    if not path:
        return
    exporter = exporter_for("--per-launch", path)
    if exporter is None:
        names = [e.extensions[0] for e in exporters_of("--per-launch")]
        raise UnreadableInput(f"--per-launch {path}: name a {', '.join(names[:-1])} or "
                              f"{names[-1]} file")
    missing = exporter.missing()
    if missing:
        raise UnreadableInput(f"--per-launch {path}: {missing}")
    check_writable(path, "--per-launch", inputs, database=is_db_name(path))
    if is_db_name(path) and Path(path).is_file():
        check_ours(path)


def write_export(option: str, path: str, analysis: Analysis,
                 context: ExportContext | None = None) -> int | None:
    """Write ``analysis`` to ``path`` as the export ``option`` writes to such a file
    (:func:`~nsysscope.export.exporter_for`, checked before the analysis), whole or not at
    all; a write that fails is one line, exit 2. Returns what the exporter counted."""
    exporter = exporter_for(option, path)
    if exporter is None:
        raise UnreadableInput(f"{option} {path}: no export writes this file")
    try:
        return exporter.write(path, analysis, context or ExportContext())
    except ImportError as e:  # checked before the analysis; a broken install still lands here
        raise UnreadableInput(f"{option} {path}: {exporter.missing() or exporter.without} "
                              f"({e})") from None
    except OSError as e:
        raise UnreadableInput(f"{option} {path}: cannot write: {e.strerror or e}") from None


def _utf8(text: str) -> bytes:
    """``text`` as UTF-8; a file name that is not UTF-8, quoted in a report, shows its bad
    bytes as U+FFFD."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return displayable(text).encode("utf-8")


def text_width(output: str | None) -> int:
    """The width text reports wrap to: the terminal's for stdout, 80 for a file."""
    return DEFAULT_WIDTH if output else terminal_width()


def write_output(text: str | bytes, output: str | None, option: str = "-o") -> int:
    """What a renderer returned (text, or bytes from a binary format) to the file ``output``
    (whole or not at all: :mod:`nsysscope.util.atomic`), or to stdout; the bytes written to
    the file (0 for stdout)."""
    if not output:
        click.echo(text, nl=False)
        return 0
    data = text if isinstance(text, bytes) else _utf8(text)
    try:
        with atomic_file(output) as f:
            f.write(data)
    except OSError as e:
        raise UnreadableInput(f"{option} {output}: cannot write: {e.strerror or e}") from None
    return len(data)
