"""The command line's file arguments, apart from the options that need the analysis: ``scrub``
(and a usage error of any command that takes only these) is parsed without importing pandas,
numpy or the renderers (``nsysscope scrub SRC`` without DST took 3-4 s to be refused on a loaded
machine, 1.5 s on an idle one, nearly all of it imports)."""

from __future__ import annotations

from typing import Any

import click


class NonEmptyPath(click.Path):
    """A file or folder name (as text) that is not empty: ``-o "$OUT"`` with ``OUT`` unset
    wrote to stdout, ``--per-launch ""`` wrote nothing, and a trace named ``""`` was read as
    the current folder, all without a word."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(path_type=str, **kwargs)

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if value == "":
            self.fail("an empty file name", param, ctx)
        return super().convert(value, param, ctx)


#: a file a command writes
OUTPUT_FILE = NonEmptyPath(dir_okay=False)
#: a trace or summary a command reads (a folder too, where the command takes several)
INPUT_PATH = NonEmptyPath(readable=False)
