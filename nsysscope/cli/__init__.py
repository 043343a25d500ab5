"""The ``nsysscope`` command: thin click commands over :mod:`nsysscope.api`.

:mod:`.app` is the group and its error handling, one module per command family
(:mod:`.report`, :mod:`.gate`, :mod:`.scrub`, :mod:`.export`), :mod:`.options` what they share.
"""

from .app import INTERNAL_ERROR, cli
from .export import export_command
from .gate import gate_command, summarize_command
from .report import report_command
from .scrub import scrub_command

cli.add_command(report_command)
cli.add_command(scrub_command)
cli.add_command(summarize_command)
cli.add_command(gate_command)
cli.add_command(export_command)


def main() -> None:
    cli(prog_name="nsysscope")


__all__ = ["INTERNAL_ERROR", "cli", "main"]
