"""The ``nsysscope`` command: thin click commands over :mod:`nsysscope.api`.

:mod:`.app` is the group and its error handling, one module per command family
(:mod:`.report`, :mod:`.gate`, :mod:`.scrub`, :mod:`.cache`, :mod:`.export`), :mod:`.options`
what they share. The group imports a command's module only when that command runs
(``--version`` stays fast).
"""

from .app import COMMANDS, INTERNAL_ERROR, cli


def main() -> None:
    cli(prog_name="nsysscope")


__all__ = ["COMMANDS", "INTERNAL_ERROR", "cli", "main"]
