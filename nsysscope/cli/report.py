"""``nsysscope report``: one trace's report, or many traces' table."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import click

from .. import render
from ..analysis import Analysis, analyze_file
from ..analysis.job import analyze_files
from ..batch import expand, names_many, rank_of, run_traces
from ..errors import NothingSteady, SomeTracesFailed, UnreadableInput
from ..export import ExportContext, is_db_name
from ..util.atomic import writes_in_place
from ..util.progress import note
from .export import note_whole_read, write_perfetto_file
from .options import (
    analysis_options,
    check_distinct,
    check_per_launch,
    check_writable,
    config_from,
    job_option,
    output_format,
    require_steady,
    text_width,
    time_range,
    use_cache,
    write_export,
    write_output,
)
from .paths import INPUT_PATH, OUTPUT_FILE


@click.command("report")
@click.argument("traces", nargs=-1, required=True, type=INPUT_PATH,
                metavar="TRACE...")
@click.option("--format", "fmt", type=click.Choice(render.REPORT_FORMATS), default=None,
              help="Output format [default: from -o's extension (.txt, .json, .md, .html; "
                   "text for none, .log or .out; another is refused), else text].")
@click.option("-o", "--output", type=OUTPUT_FILE,
              help="Write here instead of stdout; the extension picks the format.")
@click.option("--per-launch", type=OUTPUT_FILE,
              metavar="FILE.csv|FILE.parquet|FILE.db",
              help="Also write the full per-launch table (columns: docs/per-launch.md; "
                   "parquet needs the [parquet] extra); FILE.db (or .sqlite) is an SQLite "
                   "database with the launches, blocks, sites, summary, processes and meta "
                   "tables, to which several traces (or runs) add theirs.")
@click.option("--perfetto", type=OUTPUT_FILE, default=None,
              metavar="OUT.json.gz", help="Also write the trace as a Perfetto timeline (as "
                                           "'nsysscope export --perfetto'); the HTML report "
                                           "links to it.")
@click.option("--source-root", type=click.Path(exists=True, file_okay=False, path_type=str),
              default=None, metavar="DIR",
              help="The folder the profiled program's source is in, to show the text of each "
                   "stall's line (default: the current one). Only Python files under it are "
                   "read; a path recorded on another machine is matched by its end "
                   "(/home/dev/app/x.py as DIR/app/x.py or DIR/x.py).")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, metavar="N",
              help="Several traces: analyse N at a time in worker processes (default: one "
                   "per CPU).")
@click.option("--scheduler", metavar="ADDRESS", default=None,
              help="Several traces: analyse them on this Dask distributed scheduler "
                   "(e.g. tcp://host:8786); its workers must see the same paths.")
@click.option("--from", "start", metavar="TIME", default=None,
              help="Read the trace from this time on: seconds on the nsys timeline (12.5, "
                   "12.5s, 300ms), as nsys and the report's timelines show them.")
@click.option("--to", "end", metavar="TIME", default=None,
              help="Read the trace up to this time (as --from). A part of a long capture "
                   "takes a part of the memory; its first and last launches count as a "
                   "capture's do (warm-up, never judged).")
@click.option("--timings", is_flag=True,
              help="Several traces: show how long each took (off: the same traces give the "
                   "same output).")
@job_option
@analysis_options
def report_command(traces: tuple[str, ...], fmt: str | None, output: str | None,
                   per_launch: str | None, warmup: int | None, launch_bound_us: float,
                   nsys: str | None, no_cache: bool = False, source_root: str | None = None,
                   jobs: int | None = None, scheduler: str | None = None,
                   timings: bool = False, perfetto: str | None = None,
                   start: str | None = None, end: str | None = None,
                   job: bool | None = None) -> int:
    """Analyse TRACE (.sqlite, .sqlite.xz/.gz, .nsys-rep or a torch.profiler JSON trace) and
    report its overlap.

    Several traces, folders or globs (one trace per rank, say) are analysed in parallel:
    one row per trace, an aggregate row, and the rank that stalls most; the files of one job
    (ranks profiled apart, whose collectives pair up, or --job) are reported as one server,
    one row per rank. Exit codes: 0
    analysed, 2 usage or unreadable file, 3 nothing to analyse, 5 not an nsys export, 6 nsys
    missing or too old, 7 the profiler lost the data, 8 nothing steady to judge (see
    'nsysscope --help')."""
    fmt = output_format("report", fmt, output)
    check_distinct((("-o", output), ("--perfetto", perfetto), ("--per-launch", per_launch)))
    for option, path in (("-o", output), ("--perfetto", perfetto)):
        check_writable(path, option, traces)
    use_cache(no_cache)
    cfg = config_from(warmup, launch_bound_us)
    span = time_range(start, end)
    if source_root:
        cfg = dataclasses.replace(cfg, source_root=source_root)
    many = any(names_many(t) for t in traces)  # a folder or a glob: a table, however many
    paths = expand(traces) if many or len(traces) > 1 else [traces[0]]
    if many or len(paths) > 1:
        if (perfetto and job is False) or not span.whole:
            raise click.UsageError(f"{'--perfetto' if perfetto else '--from/--to'} takes a "
                                   "single trace" + (" or one job" if perfetto else ""))
        if per_launch and not is_db_name(per_launch):
            raise click.UsageError("--per-launch with several traces writes an SQLite "
                                   "database: name a .db or .sqlite file")
        check_writable(output, "-o", paths)  # the traces the folder or glob names
        check_per_launch(per_launch, paths)
        if fmt not in render.BATCH_FORMATS and job is False:
            raise UnreadableInput(f"--format {fmt} shows one trace; for many traces use "
                                  f"{', '.join(render.BATCH_FORMATS[:-1])} or "
                                  f"{render.BATCH_FORMATS[-1]}")
        if perfetto:  # a timeline of one job: every file's events, on one axis
            a = analyze_files([str(p) for p in paths], cfg, nsys, events=True)
            return _report(a, a.trace.meta.path, fmt, output, perfetto, per_launch, warmup)
        batch, together = run_traces(paths, jobs, scheduler, cfg, nsys, timed=timings,
                                     per_launch_db=per_launch, owns_process=True, job=job)
        if together is not None:
            require_steady(together.summary, warmup)
            size = write_output(render.render("report", fmt, together,
                                              width=text_width(output)), output)
            said(output, f"report of {len(paths)} traces as one job written to {output} "
                 f"({fmt}, {kb(size)})")
            return 0
        if fmt not in render.BATCH_FORMATS:
            raise UnreadableInput(f"--format {fmt} shows one trace or one job; these traces "
                                  "are no job (their collectives do not pair up; --job says "
                                  f"they are): for many traces use "
                                  f"{', '.join(render.BATCH_FORMATS[:-1])} or "
                                  f"{render.BATCH_FORMATS[-1]}")
        size = write_output(render.render("batch", fmt, batch, width=text_width(output)), output)
        said(output, f"report of {len(paths)} traces written to {output} ({fmt}, {kb(size)})")
        said(per_launch, f"launches of {sum(t.ok for t in batch.traces)} traces added to the "
             f"per-launch database {per_launch}")
        failed = [t for t in batch.traces if not t.ok]
        if failed:
            raise SomeTracesFailed(
                f"{len(failed)} of {len(batch.traces)} traces could not be analysed (listed "
                f"under the table); the first: {failed[0].error}", batch.exit_code)
        if not batch.aggregate.steady_launches:  # as one trace with nothing steady: exit 8
            how = f"--warmup {warmup}" if warmup is not None else "the default warm-up"
            raise NothingSteady(f"nothing steady to judge: {how} leaves no steady launch in "
                                f"any of the {len(batch.traces)} traces; lower --warmup or "
                                "capture more steps")
        return 0
    traces = (str(paths[0]),)  # a trace named twice (`report T T`) is one trace's report
    if scheduler or jobs or timings:
        used = [o for o, v in (("--scheduler", scheduler), ("-j", jobs), ("--timings", timings))
                if v]
        note(f"{'/'.join(used)} appl{'ies' if len(used) == 1 else 'y'} to several traces; "
             "one trace is analysed here, in this process")
    check_per_launch(per_launch, traces)
    if perfetto and span.whole:
        note_whole_read(traces[0], nsys)
    a = analyze_file(traces[0], cfg, nsys, span, events="all" if perfetto else
                     "shown" if fmt == "html" else "none")
    return _report(a, traces[0], fmt, output, perfetto, per_launch, warmup,
                   rank_of(traces[0], len(a.summary.processes)))


def _report(a: Analysis, trace: str, fmt: str, output: str | None, perfetto: str | None,
            per_launch: str | None, warmup: int | None, rank: int | None = None) -> int:
    """Write the report of one trace or one job (``a``, named ``trace``), and the files asked
    for besides."""
    require_steady(a.summary, warmup)
    steady = f"{a.summary.steady_launches} steady launches"
    if per_launch:
        write_export("--per-launch", per_launch, a, ExportContext(trace=trace, rank=rank))
        said(per_launch, f"{a.summary.launches} launches of {trace} added to the per-launch "
             f"database {per_launch}" if is_db_name(per_launch) else
             f"per-launch table of {trace} written to {per_launch} "
             f"({a.summary.launches} rows)")
    context: dict[str, str] = {}
    if perfetto:
        n = write_perfetto_file(perfetto, a)
        said(perfetto, f"Perfetto timeline of {trace} written to {perfetto} ({n} events); "
             "open it in https://ui.perfetto.dev")
        if fmt == "html":
            here = os.path.dirname(os.path.abspath(output)) if output else os.getcwd()
            context["perfetto"] = os.path.relpath(os.path.abspath(perfetto), here)
    size = write_output(render.render("report", fmt, a, width=text_width(output), **context),
                        output)
    first = a.summary.headline.text if a.summary.headline else a.summary.verdict
    said(output, f"report of {trace} written to {output} ({fmt}, {steady}, {kb(size)}): "
         f"{first}")
    return 0


def said(path: str | None, line: str) -> None:
    """What was written to ``path`` (``report of T written to FILE (text, 293 steady
    launches, 4 KB): HEADLINE``) on stderr, as ``summarize``, ``export`` and ``scrub`` say
    it (``report -o`` wrote in silence); nothing for stdout, nor for ``/dev/stdout`` and
    ``/dev/null``."""
    if path and not writes_in_place(Path(path)):
        click.echo(line, err=True)


def kb(size: int) -> str:
    """A file's size for those lines: ``4 KB``, ``1.2 MB``."""
    return f"{size / 1024:.0f} KB" if size < 1 << 20 else f"{size / (1 << 20):.1f} MB"

