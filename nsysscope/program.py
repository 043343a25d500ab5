"""The ``nsysscope`` program's entry point (``[project.scripts]``, ``python -m nsysscope``).

Its one job before the command line runs: a Ctrl-C while the command line's modules are still
being imported (click, then pandas and numpy for most commands: the first ~0.2 s, longer on a
loaded machine) leaves as any interrupt does, with ``nsysscope: error: interrupted`` and exit
130, not a 20-line traceback through the import machinery. Nothing needs cleaning up yet:
no file has been opened. Once the imports are done, :func:`nsysscope.cli.run` takes over the
signals (a Ctrl-C then goes through every clean-up).
"""

from __future__ import annotations

import os
import signal
import sys


def run() -> None:
    """Import the command line with Ctrl-C leaving quietly, then run it."""
    quiet = signal.getsignal(signal.SIGINT) is signal.default_int_handler  # not ignored (nohup)
    if quiet:
        signal.signal(signal.SIGINT, _while_importing)
    from .cli import run as run_cli

    if quiet:  # the command line's own handling from here (it installs it over the default)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    run_cli()


def _while_importing(signum: int, frame: object) -> None:
    try:
        sys.stderr.write("nsysscope: error: interrupted\n")
        sys.stderr.flush()
    finally:
        os._exit(128 + signum)
