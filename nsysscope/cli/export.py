"""``nsysscope export``: an analysed trace as a file for another tool (a Perfetto timeline)."""

from __future__ import annotations

from pathlib import Path

import click

from ..analysis import Analysis, analyze_file
from ..analysis.job import analyze_files
from ..batch import expand
from ..export import ExportContext
from ..trace.windows import is_long
from ..util.progress import note
from .app import say
from .options import (
    analysis_options,
    check_writable,
    config_from,
    use_cache,
    write_export,
)
from .paths import INPUT_PATH, OUTPUT_FILE


@click.command("export")
@click.argument("traces", nargs=-1, required=True, type=INPUT_PATH, metavar="TRACE...")
@click.option("--perfetto", "perfetto", required=True, metavar="OUT.json.gz",
              type=OUTPUT_FILE,
              help="Write a Chrome-trace/Perfetto timeline (gzip when named .gz, xz when "
                   ".xz): open it in https://ui.perfetto.dev.")
@click.option("--all-kernels", is_flag=True,
              help="Every kernel, copy and memset of every graph replay (default: one slice "
                   "per replay).")
@analysis_options
def export_command(traces: tuple[str, ...], perfetto: str, all_kernels: bool,
                   warmup: int | None, launch_bound_us: float, nsys: str | None,
                   no_cache: bool = False) -> int:
    """Export TRACE as a zoomable timeline: host threads (CUDA API calls, NVTX ranges), GPU
    streams (graph replays, copies), flow arrows from each launch to its replay and to the
    host call that waited on it, and nsysscope's findings (the class per launch, the overlap
    window, GPU idle gaps named by cause) as tracks of their own. Several traces (or a folder
    or glob) are the files of one job, drawn on one time axis (each file's clock put on the
    first's: 'nsysscope report' says the offsets)."""
    files = [str(p) for p in expand(traces)]
    check_writable(perfetto, "--perfetto", files)
    use_cache(no_cache)
    for trace in files:
        note_whole_read(trace, nsys)
    cfg = config_from(warmup, launch_bound_us)
    a = analyze_file(files[0], cfg, nsys=nsys, events="all") if len(files) == 1 else \
        analyze_files(files, cfg, nsys, events=True)
    trace = files[0] if len(files) == 1 else a.trace.meta.path
    if all_kernels and a.trace.source is None:  # the kernels are read again from the export
        note(f"--all-kernels reads a replay's kernels from an nsys export; a "
             f"{a.trace.meta.profiler.name} trace's replays are drawn as one slice each")
    elif all_kernels and not a.trace.meta.has_graph_nodes:
        note("--all-kernels: this export traced each graph replay as a whole (nsys's default "
             "--cuda-graph-trace=graph) and holds none of its kernels: each replay is drawn as "
             "one slice; capture with --cuda-graph-trace=node to see them")
    n = write_perfetto_file(perfetto, a, all_kernels)
    say(f"Perfetto timeline of {trace} written to {perfetto} ({n} events); open it in "
               "https://ui.perfetto.dev", err=True)
    return 0


def note_whole_read(trace: str, nsys: str | None) -> None:
    """A note, before it starts, that a long ``trace`` (:func:`~nsysscope.trace.windows.is_long`)
    is read whole for a timeline of every event: the other outputs read it in windows, in
    bounded memory, and this read takes memory in proportion to the trace."""
    if is_long(trace, nsys):
        note(f"a Perfetto timeline of every event reads {Path(trace).name} whole (a long trace: "
             "~5.6 GB of memory at 10^6 graph launches); 'nsysscope report TRACE --from A --to "
             "B --perfetto OUT.json.gz' writes the part from A to B")


def write_perfetto_file(path: str, analysis: Analysis, all_kernels: bool = False) -> int:
    """The Perfetto timeline (:func:`~.options.write_export`); the events it holds."""
    return write_export("--perfetto", path, analysis, ExportContext(all_kernels=all_kernels)) \
        or 0
