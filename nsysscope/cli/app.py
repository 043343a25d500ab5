"""The ``nsysscope`` command group, and the one place failures become a line and an exit code.

Library errors become one line on stderr and their exit code (see :mod:`nsysscope.errors`);
click's own usage errors (a missing argument, an unknown option, a value out of range) become
the same kind of line, exit 2. Nothing here computes anything the notebook API could not.

The commands are imported when they are run, not when the group is: ``nsysscope --version``
never imports pandas, numpy or matplotlib.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
from collections.abc import Iterator
from typing import Any

import click

from ..errors import EXIT_CODES, INTERNAL_ERROR, NsysscopeError
from ..util.text import capped, printable
from ..util.version import __version__

#: command name -> "module:attribute" under nsysscope.cli, imported on first use
COMMANDS = {
    "report": "report:report_command",
    "summarize": "gate:summarize_command",
    "gate": "gate:gate_command",
    "scrub": "scrub:scrub_command",
    "cache": "cache:cache_group",
    "export": "export:export_command",
}


def error_line(message: str) -> str:
    """``nsysscope: error: MESSAGE`` on one line (a message's own line breaks become spaces),
    printable (a trace's or a file's name in it may hold escape sequences) and at most
    :data:`ERROR_CHARS` characters."""
    return "nsysscope: error: " + printable(capped(" ".join(str(message).split()),
                                                   ERROR_CHARS))


#: the longest error message: a line, whatever a library or a trace put in it
ERROR_CHARS = 2000


def _usage_message(e: click.UsageError) -> str:
    msg = e.format_message()
    ctx = e.ctx
    where = ctx.command_path if ctx is not None else "nsysscope"
    return f"{msg} (see '{where} --help')"


class _Cli(click.Group):
    """Turns every failure into one line and a distinct exit code, never a traceback; loads
    each command when it is first used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = COMMANDS.get(cmd_name)
        if spec is None:
            return None
        module, attr = spec.split(":")
        command: click.Command = getattr(importlib.import_module(f"{__package__}.{module}"),
                                         attr)
        if command.callback is not None and not hasattr(command.callback, "__wrapped__"):
            command.callback = _with_python_strings(command.callback)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # past click, which prints an empty line for it first
            raise _Interrupted from None

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
            code = rv if isinstance(rv, int) else 0
        except NsysscopeError as e:
            code = say_error(str(e), e.exit_code)
        except click.exceptions.NoArgsIsHelpError as e:  # bare "nsysscope": the help
            _say(e.ctx.get_help() if e.ctx is not None else e.format_message(), err=False)
            code = 2
        except click.UsageError as e:  # a missing argument, unknown option, bad value
            code = say_error(_usage_message(e), 2)
        except (click.exceptions.Abort, KeyboardInterrupt, _Interrupted):  # Ctrl-C
            # or SIGTERM, where what it stopped turned it into an interrupt (a DuckDB query
            # ends with its own "Interrupted", read as Ctrl-C): said as what it was
            code = say_error("terminated (SIGTERM)", 143) if _TERMINATED else \
                say_error("interrupted", 130)
        except click.ClickException as e:
            code = say_error(e.format_message(), 2 if e.exit_code == 1 else e.exit_code)
        except BrokenPipeError:  # `nsysscope report ... | head`
            code = 0
        except OSError as e:  # the machine, not the program: a folder it may not enter, a
            # full disk or stdout (/dev/full), a read-only file system
            code = say_error(_os_message(e), 2)
        except Exception as e:  # noqa: BLE001 - the promise is: never a traceback
            if os.environ.get("NSYSSCOPE_DEBUG"):
                raise
            code = say_error(f"internal error: {type(e).__name__}: {e} "
                         "(set NSYSSCOPE_DEBUG=1 for the traceback)", INTERNAL_ERROR)
        sys.exit(code)


#: whether SIGTERM came (the program's handler says so: :func:`note_terminated`)
_TERMINATED: list[bool] = []


def note_terminated() -> None:
    """SIGTERM came: the run ends with 143 whatever the exception it ends with."""
    _TERMINATED.append(True)


class _Interrupted(Exception):
    """Ctrl-C while a command ran: said in one line (:meth:`_Cli.main`)."""


def _with_python_strings(callback: Any) -> Any:
    """``callback`` run inside :func:`_python_strings`: once its arguments are parsed, so
    that a usage error is refused before pandas is imported (a command that needs no pandas
    to refuse its arguments, scrub's, answers in a fraction of a second)."""
    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        with _python_strings():
            return callback(*args, **kwargs)
    return run


@contextlib.contextmanager
def _python_strings() -> Iterator[None]:
    """pandas' text columns held as Python strings while a command runs, where pandas would
    hold them in pyarrow when it is installed (pandas 3's "auto"). An analysis makes
    hundreds of small text columns (API chains, NVTX paths, a take of a few rows), and
    pyarrow's conversions cost more than they save there: the light 10^5 report took ~8 %
    longer and ~40 MB more memory with them (bench/README.md, twenty-first session). The
    command line only: the notebook API leaves the user's setting as it is (text of two
    kinds would not merge as text), and the strings and results are the same either way
    (tests/cli/test_string_storage.py)."""
    import pandas as pd  # every command's module imports it already

    with pd.option_context("mode.string_storage", "python"):
        yield


def _say(text: str, err: bool = True) -> None:
    """Print ``text``; a stream that is closed or full (``2>&-``, ``2>/dev/full``) is not a
    reason to change the exit code, which is what a CI step reads."""
    with contextlib.suppress(OSError, ValueError):  # ValueError: a stream closed under Python
        click.echo(text, err=err)


def say(text: str, err: bool = False) -> None:
    """A command's own line (what it wrote, a leak it found), printable: it may quote a
    trace's text or a file's name."""
    click.echo(printable(text, keep="\n\t"), err=err)


def say_error(message: str, code: int) -> int:
    """Say ``message`` as the one error line; ``code`` to exit with."""
    _say(error_line(message))
    return code


def _os_message(e: OSError) -> str:
    """An OSError in the user's words: the file it concerns and why."""
    why = e.strerror or str(e)
    return f"{e.filename}: {why}" if e.filename else f"cannot write the output: {why}"


_CODES = "\n".join(f"  {code:>3}  {text}" for code, text in EXIT_CODES)


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]},
             epilog=f"\b\nExit codes:\n{_CODES}")
@click.version_option(__version__, prog_name="nsysscope")
def cli() -> None:
    """Find what destroys CPU/GPU overlap in an inference engine, from an nsys or
    torch.profiler trace.

    Every error is one line on stderr, 'nsysscope: error: ...', and its exit code (below).
    """
