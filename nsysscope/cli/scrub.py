"""``nsysscope scrub``: a copy of a trace that is safe to share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ..util.text import terminal_width, wrap
from .app import error_line, say
from .paths import INPUT_PATH, NonEmptyPath

if TYPE_CHECKING:
    from ..scrub import Leak

_KEEP = (
    ("--keep-process-list", "keep_process_list",
     "Keep every process of the host in PROCESSES/ThreadNames (default: only the traced ones)."),
    ("--keep-program-output", "keep_program_output",
     "Keep the program's stdout/stderr (ProcessStreams, ANALYSIS_FILE)."),
    ("--keep-kernel-string", "keep_kernel_string",
     "Keep the kernel release and build string (uname -r, uname -v)."),
    ("--keep-session-uuid", "keep_session_uuid", "Keep the profiling session's UUID."),
)


class _ScrubCommand(click.Command):
    """``scrub``, refusing a missing DST while its arguments are parsed, before anything is
    imported for the work (it took seconds, importing pandas, to say DST was missing)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        rest = super().parse_args(ctx, args)
        p = ctx.params
        if not p.get("dst") and not p.get("in_place") and not p.get("check"):
            raise click.UsageError("give DST, or --in-place to replace SRC", ctx)
        return rest


@click.command("scrub", cls=_ScrubCommand)
@click.argument("src", type=INPUT_PATH)
@click.argument("dst", type=NonEmptyPath(), required=False)
@click.option("--check", is_flag=True, help="List what would leak; write nothing (exit 1 if "
                                            "anything would).")
@click.option("--in-place", is_flag=True, help="Replace SRC (an uncompressed .sqlite, or a "
                                               "torch.profiler JSON trace, plain or .gz) with "
                                               "its scrubbed copy.")
@click.option("-v", "--verbose", is_flag=True, help="With --check: list every leak, one a "
                                                    "line, after the counts.")
@click.option("-f", "--force", is_flag=True, help="Overwrite DST if it exists.")
@click.option("--drop-kernel-names", is_flag=True, help="Replace kernel names with kernel_<id>.")
@click.option("--drop-nvtx-text", is_flag=True, help="Replace NVTX range text with range_<n>.")
@click.option(_KEEP[0][0], _KEEP[0][1], is_flag=True, help=_KEEP[0][2])
@click.option(_KEEP[1][0], _KEEP[1][1], is_flag=True, help=_KEEP[1][2])
@click.option(_KEEP[2][0], _KEEP[2][1], is_flag=True, help=_KEEP[2][2])
@click.option(_KEEP[3][0], _KEEP[3][1], is_flag=True, help=_KEEP[3][2])
@click.option("--nsys", metavar="PATH", default=None,
              help="nsys executable for .nsys-rep input (default: $NSYS, then PATH).")
@click.option("--slim", is_flag=True,
              help="torch.profiler traces: also drop the python_function events that enclose "
                   "no CUDA call the analysis uses (keeps the stacks around every launch, sync, "
                   "copy, event record and query).")
def scrub_command(src: str, dst: str | None, check: bool, in_place: bool, force: bool,
                  verbose: bool,
                  drop_kernel_names: bool, drop_nvtx_text: bool, nsys: str | None,
                  slim: bool = False, **keep: Any) -> int:
    """Write a copy of SRC safe to share: no environment, paths, user or host names, and (unless
    kept) no host process list, program output, kernel string or session UUID.

    SRC is a .sqlite, .sqlite.xz/.gz or .nsys-rep, or a torch.profiler JSON trace; it is never
    modified (except with --in-place). DST named .xz or .gz is compressed. An existing DST
    needs --force."""
    from .. import scrub as scrubbing  # (pandas) only once the arguments are known good

    if check:
        leaks = scrubbing.find_leaks(src, nsys=nsys, **keep)
        for line in grouped(leaks, verbose, terminal_width()):
            say(line)
        say(f"{len(leaks)} potential leaks in {src}", err=True)
        return 1 if leaks else 0
    result = scrubbing.scrub(src, dst or src, drop_kernel_names=drop_kernel_names,
                             drop_nvtx_text=drop_nvtx_text, in_place=in_place, force=force,
                             nsys=nsys, slim=slim, **keep)
    say(f"scrubbed copy written to {dst or src} ({result.counts()})", err=True)
    if result.remaining:  # the copy scanned again still leaks: say so, exit 1 (as --check)
        for leak in result.remaining:
            say(_line(leak), err=True)
        say(error_line(f"{dst or src}: {len(result.remaining)} potential leaks remain "
                              "after the scrub (listed above): do not share it as it is"),
                   err=True)
        return 1
    return 0


#: examples shown per group of leaks without --verbose
EXAMPLES = 3


def grouped(leaks: list[Leak], verbose: bool = False,
            width: int | None = None) -> list[str]:
    """``--check``'s list: one line per table, column and kind, most first, with how many
    and a few redacted examples (a raw export has hundreds of paths in ``StringIds``: 1,097
    lines, ungrouped, buried the one environment variable), wrapped to ``width``;
    ``verbose`` adds every leak, one a line, after."""
    groups: dict[tuple[str, str], list[Leak]] = {}
    for leak in leaks:
        groups.setdefault((f"{leak.table}.{leak.column}", leak.kind), []).append(leak)
    if not groups:
        return []
    order = sorted(groups, key=lambda k: (-len(groups[k]), k))
    count = max(len(str(len(g))) for g in groups.values())
    out = []
    for k in order:
        found = groups[k]
        seen = list(dict.fromkeys(x.excerpt for x in found))
        more = f", ... ({len(seen) - EXAMPLES} more)" if len(seen) > EXAMPLES else ""
        out += wrap(f"{k[0]} [{k[1]}]: {', '.join(seen[:EXAMPLES])}{more}", width,
                    f"{len(found):>{count}}  ", " " * (count + 4))
    if verbose:
        out += ["", *(_line(leak) for leak in leaks)]
    else:
        out.append(f"(counts per table, column and kind; -v lists each of the {len(leaks)})")
    return out


def _line(leak: Leak) -> str:
    """One leak as ``--check`` lists it: where, what kind, and a redacted excerpt."""
    return f"{leak.table}.{leak.column} [{leak.kind}] {leak.excerpt}"
