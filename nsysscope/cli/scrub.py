"""``nsysscope scrub``: a copy of a trace that is safe to share."""

from __future__ import annotations

import click

from .. import scrub as scrubbing


@click.command("scrub")
@click.argument("src", type=click.Path(readable=False, path_type=str))
@click.argument("dst", type=click.Path(path_type=str), required=False)
@click.option("--check", is_flag=True, help="List what would leak; write nothing.")
@click.option("--in-place", is_flag=True, help="Replace SRC with its scrubbed copy.")
@click.option("--drop-kernel-names", is_flag=True, help="Replace kernel names with kernel_<id>.")
@click.option("--drop-nvtx-text", is_flag=True, help="Replace NVTX range text with range_<n>.")
@click.option("--slim", is_flag=True,
              help="torch.profiler traces: also drop the python_function events that enclose "
                   "no CUDA call the analysis uses (keeps the stacks around every launch, sync, "
                   "copy, event record and query).")
def scrub_command(src: str, dst: str | None, check: bool, in_place: bool,
                  drop_kernel_names: bool, drop_nvtx_text: bool, slim: bool = False) -> int:
    """Write a copy of SRC safe to share: no environment, paths, user or host names."""
    if check:
        leaks = scrubbing.find_leaks(src)
        for leak in leaks:
            click.echo(f"{leak.table}.{leak.column} [{leak.kind}] {leak.excerpt}")
        click.echo(f"{len(leaks)} potential leaks in {src}", err=True)
        return 1 if leaks else 0
    if not dst and not in_place:
        raise click.UsageError("give DST, or --in-place to replace SRC")
    scrubbing.scrub(src, dst or src, drop_kernel_names=drop_kernel_names,
                    drop_nvtx_text=drop_nvtx_text, in_place=in_place, slim=slim)
    click.echo(f"scrubbed copy written to {dst or src}", err=True)
    return 0
