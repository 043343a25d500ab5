"""``nsysscope cache info|clear``: the user cache of decompressed traces and exports."""

from __future__ import annotations

import click

from ..errors import UnreadableInput
from ..trace import cache
from ..util.units import plural
from .app import say


@click.group("cache")
def cache_group() -> None:
    """The cache of decompressed .xz/.gz traces and .nsys-rep exports.

    It lives in $NSYSSCOPE_CACHE (else $XDG_CACHE_HOME/nsysscope, else ~/.cache/nsysscope) and
    holds at most $NSYSSCOPE_CACHE_MAX (default 2G; 0 for no limit): the least recently used
    files go first. --no-cache on report, summarize and gate leaves it alone. Exports written
    beside a report (NAME.nsysscope-cache.sqlite) are not part of it.
    """


@cache_group.command("info")
def info_command() -> int:
    """Where the cache is, how many files it holds, their size and the cap."""
    folder = cache.cache_dir()
    items = cache.entries(folder)
    total = sum(c.size for c in items)
    cap = cache.max_bytes()
    state = "" if folder.is_dir() else "  (not a folder)" if folder.exists() else \
        "  (not created yet)"
    say(f"folder:  {folder}{state}")
    say(f"files:   {len(items)}")
    say(f"size:    {cache.human(total)}")
    say(f"limit:   {cache.human(cap) if cap is not None else 'none'}  "
               "(NSYSSCOPE_CACHE_MAX; least recently used files are removed first)")
    for c in reversed(items[-5:]):
        say(f"  {cache.human(c.size):>9}  {c.path.name}")
    if len(items) > 5:
        say(f"  ... and {len(items) - 5} older")
    return 0


@cache_group.command("clear")
def clear_command() -> int:
    """Remove the cache's files from its folder (files it did not make stay)."""
    n, size = cache.clear()
    folder = cache.cache_dir()
    left = cache.entries(folder)
    if left:  # a folder it may not write: it said "removed 0 files" and exited 0
        raise UnreadableInput(f"{folder}: removed {plural(n, 'file')}, but {len(left)} could not "
                              "be removed (is the folder writable?)")
    say(f"removed {plural(n, 'file')} ({cache.human(size)}) from {folder}")
    return 0
