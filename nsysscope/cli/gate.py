"""``nsysscope summarize`` and ``nsysscope gate``: the CI regression gate's commands.

Thin: the comparison is :func:`nsysscope.gate.compare`, the output a registered ``gate``
renderer (one run can write several: text to stdout or ``-o``, and ``--markdown``, ``--junit``,
``--html``, ``--json`` files). Exit codes: :data:`GATE_EXIT_CODES`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from .. import render
from ..analysis import analyze_file
from ..analysis.job import analyze_files
from ..batch import expand, names_many
from ..errors import EXIT_CODES
from ..gate import GateThresholds, compare, is_summary_file, load_thresholds, read_sides
from ..gate.thresholds import source_note
from ..model import Note, registry
from .app import say
from .options import (
    analysis_options,
    check_distinct,
    check_writable,
    config_from,
    output_format,
    require_steady,
    text_width,
    use_cache,
    write_output,
)
from .paths import INPUT_PATH, OUTPUT_FILE, NonEmptyPath

#: every code ``gate`` can exit with (the README's CI snippet lists the same)
GATE_EXIT_CODES = (0, 1, 2, 3, 4, 5, 6, 7, 8, 70)
#: the report files one gate run can write besides its main output: option -> format
EXTRA_OUTPUTS = (("--markdown", "markdown"), ("--junit", "junit"), ("--html", "html"),
                 ("--json", "json"))

F = TypeVar("F", bound=Callable[..., Any])

# option name, field, type, help (the default is shown from GateThresholds)
_THRESHOLD_OPTIONS = (
    ("--stall-pp", "stall_pp", float, "A stall class's share of steady launches may grow by this "
                                      "many percentage points"),
    ("--stall-min-launches", "stall_min_launches", int, "... and fails only when it also grows "
                                                         "by at least this many launches"),
    ("--launch-bound-pp", "launch_bound_pp", float, "The share of launch-bound gaps may grow by "
                                                    "this many percentage points"),
    ("--window-pct", "window_pct", float, "The median overlap window may shrink by this %"),
    ("--window-us", "window_us", float, "... and fails only when it also shrinks by this many us"),
    ("--gap-pct", "gap_pct", float, "The median GPU idle gap may grow by this %"),
    ("--gap-us", "gap_us", float, "... and fails only when it also grows by this many us"),
    ("--idle-pp", "idle_pp", float, "The GPU idle fraction may grow by this many points"),
    ("--rate-pct", "rate_pct", float, "The launch rate (launches/s) and the GPU work per "
                                      "launch are reported as changed beyond this % (not a "
                                      "failure)"),
    ("--fail-on-slowdown", "fail_on_slowdown_pct", float, "Also fail when the launch rate drops, "
                                                          "or the GPU work per launch grows, by "
                                                          "more than this % (0: off)"),
    ("--alpha", "alpha", float, "One-sided significance level of the rank and proportion tests"),
    ("--pause-quantile", "pause_quantile", float, "GPU idle gaps above this quantile are host "
                                                  "pauses, left out of the rate and idle fraction"),
)


def _threshold_options(f: F) -> F:
    defaults = GateThresholds()
    for opt, name, typ, text in reversed(_THRESHOLD_OPTIONS):
        f = click.option(opt, name, type=typ, default=None,
                         help=f"{text} [default: {getattr(defaults, name):g}; "
                              f"pyproject key {name.replace('_', '-')}]")(f)
    return f


def side(spec: str) -> str | list[str]:
    """A side as the command line names it: a trace or summary file, or a folder or glob of
    one job's files (its ranks profiled apart), a list of them."""
    if not names_many(spec):
        return spec
    files = [str(p) for p in expand([spec])]
    return files if len(files) > 1 else files[0]


@click.command("summarize")
@click.argument("traces", nargs=-1, required=True, type=INPUT_PATH, metavar="TRACE...")
@click.option("-o", "--output", type=OUTPUT_FILE, metavar="FILE.json",
              help="Write the summary here instead of stdout.")
@analysis_options
def summarize_command(traces: tuple[str, ...], output: str | None, warmup: int | None,
                      launch_bound_us: float, nsys: str | None, no_cache: bool = False) -> int:
    """Write TRACE's steady-state summary as JSON, with its per-launch distributions: a
    small baseline that 'nsysscope gate' reads in place of the trace (the same JSON as
    'report --format json', field by field: docs/json.md). Several traces (or a folder or
    glob of them) are the files of one job, its ranks profiled apart: summarised as one
    server, one process per rank.

    A trace with no steady launch (all warm-up) is refused with exit 8 and nothing is
    written."""
    named = registry.by_extension("report").get(Path(output).suffix.lower()) if output else None
    if named not in (None, "json"):  # the JSON in a .md file, say: it was written so
        raise click.UsageError(f"-o {output}: summarize writes JSON, not {named}; name a .json "
                               "file (report --format writes the other formats)")
    check_writable(output, inputs=list(traces))
    use_cache(no_cache)
    given = side(traces[0]) if len(traces) == 1 else [str(p) for p in expand(traces)]
    trace = given if isinstance(given, str) else f"{len(given)} files of one job"
    cfg = config_from(warmup, launch_bound_us)
    s = analyze_file(given, cfg, nsys, events="none").summary if isinstance(given, str) else \
        analyze_files(given, cfg, nsys).summary
    require_steady(s, warmup)
    text = render.render("report", "json", s)
    size = write_output(text, output)
    if output:
        say(f"summary of {trace} written to {output} ({s.steady_launches} steady launches, "
                   f"{size / 1024:.0f} KB): {s.verdict}", err=True)
    return 0


@click.command("gate")
@click.argument("baseline", type=INPUT_PATH)
@click.argument("candidate", type=INPUT_PATH)
@click.option("--format", "fmt", type=click.Choice(render.GATE_FORMATS), default=None,
              help="Output format [default: from -o's extension (.txt, .json, .md, .xml for "
                   "junit, .html; text for none, .log or .out; another is refused), else text].")
@click.option("-o", "--output", type=OUTPUT_FILE,
              help="Write the report here; the verdict line still goes to stdout.")
@click.option("--markdown", "markdown_file", type=OUTPUT_FILE, metavar="FILE",
              help="Also write the Markdown report (a PR comment) to FILE.")
@click.option("--junit", "junit_file", type=OUTPUT_FILE, metavar="FILE",
              help="Also write JUnit XML (one test per check) to FILE.")
@click.option("--html", "html_file", type=OUTPUT_FILE, metavar="FILE",
              help="Also write the self-contained HTML page to FILE.")
@click.option("--json", "json_file", type=OUTPUT_FILE, metavar="FILE",
              help="Also write the gate result as JSON to FILE.")
@click.option("--config", "config_file", type=NonEmptyPath(dir_okay=False),
              help="TOML file whose [tool.nsysscope.gate] table sets thresholds (default: the "
                   "first pyproject.toml from the current folder upwards).")
@_threshold_options
@analysis_options
def gate_command(baseline: str, candidate: str, fmt: str | None, output: str | None,
                 markdown_file: str | None, junit_file: str | None, html_file: str | None,
                 json_file: str | None, config_file: str | None, warmup: int | None,
                 launch_bound_us: float, nsys: str | None, no_cache: bool = False,
                 **limits: Any) -> int:
    """Fail (exit 1) when CANDIDATE lost CPU/GPU overlap that BASELINE had.

    Each side is a trace (.sqlite, .sqlite.xz/.gz, .nsys-rep, torch.profiler JSON), a folder
    or glob of one job's files (its ranks profiled apart: compared rank by rank), or a
    summary JSON from 'nsysscope summarize' or 'nsysscope report --format json'. Compares
    steady-state
    per-launch distributions with a noise model (docs/gate.md): stall shares per
    class, the overlap window, the GPU idle gap and fraction, and the launch rate. One run
    writes the text report (stdout, or -o) and any of --markdown, --junit, --html, --json.

    \b
    Exit codes:
    """
    fmt = output_format("gate", fmt, output)
    extra = [(opt, f, path) for (opt, f), path in
             zip(EXTRA_OUTPUTS, (markdown_file, junit_file, html_file, json_file), strict=True)
             if path]
    for opt, f, path in extra:
        output_format("gate", f, path, option=opt)
    outputs = (("-o", output), *((o, p) for o, _, p in extra))
    check_distinct(outputs)
    for option, target in outputs:
        check_writable(target, option, [baseline, candidate])
    use_cache(no_cache)
    settings = _settings_for_summaries(baseline, candidate)
    overrides = {name.replace("_", "-"): v for name, v in limits.items() if v is not None}
    options = {name: opt for opt, name, *_ in _THRESHOLD_OPTIONS}
    thresholds, source = load_thresholds(config_file, overrides, options=options)
    cfg = config_from(warmup, launch_bound_us)
    drawn = fmt == "html" or html_file is not None  # an HTML page draws the sides' timelines
    base, cand = read_sides(side(baseline), side(candidate), cfg, nsys,
                            events="shown" if drawn else "none")
    result = compare(base, cand, thresholds, baseline_label=baseline, candidate_label=candidate)
    if source is not None:
        result = replace(result, note_facts=(*result.note_facts, source_note(source)))
    if settings:
        result = replace(result, note_facts=(*result.note_facts, settings))
    write_output(render.render("gate", fmt, result, baseline=base, candidate=cand,
                               width=text_width(output)), output)
    for opt, f, path in extra:
        write_output(render.render("gate", f, result, baseline=base, candidate=cand), path, opt)
    if output:
        say(f"nsysscope gate: {result.verdict}")
    return result.exit_code


def _settings_for_summaries(baseline: str, candidate: str) -> Note | None:
    """The note when analysis options were given and one side is a summary file, which keeps
    the settings it was written with (None: no such note). Both sides summaries: a usage
    error, as nothing would be analysed with them."""
    ctx = click.get_current_context()
    given = [opt for name, opt in (("warmup", "--warmup"), ("launch_bound_us", "--launch-bound-us"))
             if ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE,
                                                   ParameterSource.ENVIRONMENT)]
    summaries = [side for side in (baseline, candidate) if is_summary_file(side)]
    if not given or not summaries:
        return None
    options = " and ".join(given)
    if len(summaries) == 2:
        raise click.UsageError(
            f"{options} set{'s' if len(given) == 1 else ''} how a trace is analysed, and both "
            "sides are summary files, written with their own settings; write them again with "
            f"'nsysscope summarize TRACE {given[0]} ...', or gate the traces")
    return Note("settings_for_trace_only", {"options": given, "summary": summaries[0]})


# the docstring's own indentation taken out first, so that click wraps its paragraphs
# (appended lines of another indentation kept it: "JSON from   'nsysscope summarize'")
gate_command.help = inspect.cleandoc(gate_command.help or "") + "\n" + "\n".join(
    f"  {code} {text}" for code, text in EXIT_CODES if code in GATE_EXIT_CODES)
