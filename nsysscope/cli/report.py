"""``nsysscope report``: one trace's report, or many traces' table."""

from __future__ import annotations

import dataclasses
import os

import click
import pandas as pd

from .. import render
from ..analysis import analyze
from ..batch import expand, names_many, rank_of, run_batch
from ..errors import UnreadableInput
from ..export import is_db_name, write_db
from ..trace import load
from .export import write_perfetto_file
from .options import analysis_options, config_from, write_output


@click.command("report")
@click.argument("traces", nargs=-1, required=True, type=click.Path(readable=False, path_type=str),
                metavar="TRACE...")
@click.option("--format", "fmt", type=click.Choice(render.REPORT_FORMATS), default="text",
              show_default=True, help="Output format.")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write here instead of stdout.")
@click.option("--per-launch", type=click.Path(dir_okay=False),
              metavar="FILE.csv|FILE.parquet|FILE.db",
              help="Also write the full per-launch table; FILE.db (or .sqlite) is an SQLite "
                   "database with the launches, blocks, sites, summary, processes and meta "
                   "tables, to which several traces (or runs) add theirs.")
@click.option("--perfetto", type=click.Path(dir_okay=False, path_type=str), default=None,
              metavar="OUT.json.gz", help="Also write the trace as a Perfetto timeline (as "
                                           "'nsysscope export --perfetto'); the HTML report "
                                           "links to it.")
@click.option("--source-root", type=click.Path(file_okay=False, path_type=str), default=None,
              metavar="DIR", help="Where the profiled program's source files are, to show the "
                                  "text of each stall's line (default: the trace's working "
                                  "directory, then the current one).")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, metavar="N",
              help="Several traces: analyse N at a time in worker processes (default: one "
                   "per CPU).")
@click.option("--scheduler", metavar="ADDRESS", default=None,
              help="Several traces: analyse them on this Dask distributed scheduler "
                   "(e.g. tcp://host:8786); its workers must see the same paths.")
@click.option("--timings", is_flag=True,
              help="Several traces: show how long each took (off: the same traces give the "
                   "same output).")
@analysis_options
def report_command(traces: tuple[str, ...], fmt: str, output: str | None,
                   per_launch: str | None, warmup: int | None, launch_bound_us: float,
                   nsys: str | None, source_root: str | None = None, jobs: int | None = None,
                   scheduler: str | None = None, timings: bool = False,
                   perfetto: str | None = None) -> int:
    """Analyse TRACE (.sqlite, .sqlite.xz/.gz or .nsys-rep) and report its overlap.

    Several traces, folders or globs (one trace per rank, say) are analysed in parallel:
    one row per trace, an aggregate row, and the rank that stalls most."""
    cfg = config_from(warmup, launch_bound_us)
    if source_root:
        cfg = dataclasses.replace(cfg, source_root=source_root)
    if len(traces) > 1 or scheduler or names_many(traces[0]):
        if perfetto:
            raise click.UsageError("--perfetto takes a single trace")
        if per_launch and not is_db_name(per_launch):
            raise click.UsageError("--per-launch with several traces writes an SQLite "
                                   "database: name a .db or .sqlite file")
        paths = expand(traces)  # a folder or glob with no trace in it is an error first
        if fmt not in render.BATCH_FORMATS:
            raise UnreadableInput(f"--format {fmt} shows one trace; for many traces use "
                                  f"{', '.join(render.BATCH_FORMATS[:-1])} or "
                                  f"{render.BATCH_FORMATS[-1]}")
        batch = run_batch(paths, jobs, scheduler, cfg, nsys, timed=timings,
                          per_launch_db=per_launch)
        write_output(render.render("batch", fmt, batch), output)
        return batch.exit_code
    a = analyze(load(traces[0], nsys=nsys), cfg)
    if per_launch and is_db_name(per_launch):
        write_db(per_launch, a, trace=traces[0], rank=rank_of(traces[0]))
    elif per_launch:
        write_per_launch(a.launches, per_launch)
    context = {}
    if perfetto:
        write_perfetto_file(perfetto, a)
        if fmt == "html":
            here = os.path.dirname(os.path.abspath(output)) if output else os.getcwd()
            context["perfetto"] = os.path.relpath(os.path.abspath(perfetto), here)
    write_output(render.render("report", fmt, a, **context), output)
    return 0


def write_per_launch(df: pd.DataFrame, path: str) -> None:
    out = df.drop(columns=[c for c in df.columns if c.startswith("_")])
    if path.endswith(".parquet"):
        try:
            out.to_parquet(path, index=False)
        except ImportError as e:
            raise UnreadableInput(f"--per-launch {path}: parquet needs pyarrow ({e}); "
                                  "use a .csv name") from None
    elif path.endswith(".csv"):
        out.to_csv(path, index=False)
    else:
        raise UnreadableInput(f"--per-launch {path}: name a .csv, .parquet or .db file")
