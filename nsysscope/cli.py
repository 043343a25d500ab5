"""The ``nsysscope`` command: a thin layer that loads, analyses and renders.

Library errors become one line on stderr and their exit code (see :mod:`nsysscope.errors`);
nothing here computes anything the notebook API could not.
"""

from __future__ import annotations

import dataclasses
import os
import sys

import click

from . import __version__
from .analysis import analyze
from .errors import NsysscopeError, UnreadableInput
from .cli_options import analysis_options, config_from, write_output
from .render import REPORT_FORMATS
from .trace import load

INTERNAL_ERROR = 70


class _Cli(click.Group):
    """Turns every failure into one line and a distinct exit code, never a traceback."""

    def main(self, *args, **kwargs):  # type: ignore[override]
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
            sys.exit(rv if isinstance(rv, int) else 0)
        except NsysscopeError as e:
            click.echo(f"nsysscope: error: {e}", err=True)
            sys.exit(e.exit_code)
        except click.exceptions.Abort:
            click.echo("nsysscope: aborted", err=True)
            sys.exit(130)
        except click.ClickException as e:
            e.show()
            sys.exit(2 if e.exit_code == 1 else e.exit_code)
        except KeyboardInterrupt:
            sys.exit(130)
        except Exception as e:  # noqa: BLE001 - the promise is: never a traceback
            if os.environ.get("NSYSSCOPE_DEBUG"):
                raise
            click.echo(f"nsysscope: internal error: {type(e).__name__}: {e} "
                       "(set NSYSSCOPE_DEBUG=1 for the traceback)", err=True)
            sys.exit(INTERNAL_ERROR)


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nsysscope")
def cli() -> None:
    """Find what destroys CPU/GPU overlap in an inference engine, from an nsys trace.

    Exit codes: 0 ok, 1 regression (gate), 2 usage or unreadable file, 3 nothing to analyse,
    4 traces not comparable, 5 not an nsys export, 6 nsys missing or too old, 7 the profiler
    lost the data, 70 internal error.
    """


@cli.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path(readable=False, path_type=str),
                metavar="TRACE...")
@click.option("--format", "fmt", type=click.Choice(REPORT_FORMATS), default="text",
              show_default=True, help="Output format.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write here instead of stdout.")
@click.option("--per-launch", type=click.Path(dir_okay=False), metavar="FILE.csv|FILE.parquet",
              help="Also write the full per-launch table.")
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
@analysis_options
def report(traces: tuple[str, ...], fmt: str, output: str | None, per_launch: str | None,
           warmup: int | None, launch_bound_us: float, nsys: str | None,
           source_root: str | None = None, jobs: int | None = None,
           scheduler: str | None = None) -> int:
    """Analyse TRACE (.sqlite, .sqlite.xz/.gz or .nsys-rep) and report its overlap.

    Several traces, folders or globs (one trace per rank, say) are analysed in parallel:
    one row per trace, an aggregate row, and the rank that stalls most."""
    cfg = config_from(warmup, launch_bound_us)
    if source_root:
        cfg = dataclasses.replace(cfg, source_root=source_root)
    from . import many
    if len(traces) > 1 or scheduler or many.names_many(traces[0]):
        if per_launch:
            raise click.UsageError("--per-launch takes a single trace")
        text, code = many.report(traces, fmt, jobs, scheduler, cfg, nsys)
        write_output(text, output)
        return code
    trace = traces[0]
    a = analyze(load(trace, nsys=nsys), cfg)
    if per_launch:
        write_per_launch(a.launches, per_launch)
    write_output(render_summary(a, fmt), output)
    return 0


def render_summary(a, fmt: str) -> str:
    from . import render
    if fmt == "html":
        from .render import html
        return html.report(a)
    return {"text": render.text.render, "json": render.json.render,
            "markdown": render.markdown.render}[fmt](a.summary)


def write_per_launch(df, path: str) -> None:
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
        raise UnreadableInput(f"--per-launch {path}: name a .csv or .parquet file")


@cli.command()
@click.argument("src", type=click.Path(readable=False, path_type=str))
@click.argument("dst", type=click.Path(path_type=str), required=False)
@click.option("--check", is_flag=True, help="List what would leak; write nothing.")
@click.option("--in-place", is_flag=True, help="Replace SRC with its scrubbed copy.")
@click.option("--drop-kernel-names", is_flag=True, help="Replace kernel names with kernel_<id>.")
@click.option("--drop-nvtx-text", is_flag=True, help="Replace NVTX range text with range_<n>.")
def scrub(src: str, dst: str | None, check: bool, in_place: bool, drop_kernel_names: bool,
          drop_nvtx_text: bool) -> int:
    """Write a copy of SRC safe to share: no environment, paths, user or host names."""
    from . import scrub as scrubbing
    if check:
        leaks = scrubbing.find_leaks(src)
        for leak in leaks:
            click.echo(f"{leak.table}.{leak.column} [{leak.kind}] {leak.excerpt}")
        click.echo(f"{len(leaks)} potential leaks in {src}", err=True)
        return 1 if leaks else 0
    if not dst and not in_place:
        raise click.UsageError("give DST, or --in-place to replace SRC")
    scrubbing.scrub(src, dst or src, drop_kernel_names=drop_kernel_names,
                    drop_nvtx_text=drop_nvtx_text, in_place=in_place)
    click.echo(f"scrubbed copy written to {dst or src}", err=True)
    return 0


# -- commands defined in their own modules are registered here, one line each -------------
from .cli_gate import gate, summarize  # noqa: E402
cli.add_command(summarize)
cli.add_command(gate)


def main() -> None:
    cli(prog_name="nsysscope")
