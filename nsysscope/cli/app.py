"""The ``nsysscope`` command group, and the one place failures become a line and an exit code.

Library errors become one line on stderr and their exit code (see :mod:`nsysscope.errors`);
nothing here computes anything the notebook API could not.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from ..errors import NsysscopeError
from ..util.version import __version__

INTERNAL_ERROR = 70


class _Cli(click.Group):
    """Turns every failure into one line and a distinct exit code, never a traceback."""

    def main(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
            sys.exit(rv if isinstance(rv, int) else 0)
        except NsysscopeError as e:
            click.echo(f"nsysscope: error: {e}", err=True)
            sys.exit(e.exit_code)
        except click.exceptions.Abort:
            click.echo("nsysscope: aborted", err=True)
            sys.exit(130)
        except click.ClickException as e:
            e.show()
            sys.exit(2 if e.exit_code == 1 else e.exit_code)
        except KeyboardInterrupt:
            sys.exit(130)
        except Exception as e:  # noqa: BLE001 - the promise is: never a traceback
            if os.environ.get("NSYSSCOPE_DEBUG"):
                raise
            click.echo(f"nsysscope: internal error: {type(e).__name__}: {e} "
                       "(set NSYSSCOPE_DEBUG=1 for the traceback)", err=True)
            sys.exit(INTERNAL_ERROR)


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nsysscope")
def cli() -> None:
    """Find what destroys CPU/GPU overlap in an inference engine, from an nsys trace.

    Exit codes: 0 ok, 1 regression (gate), 2 usage or unreadable file, 3 nothing to analyse,
    4 traces not comparable, 5 not an nsys export, 6 nsys missing or too old, 7 the profiler
    lost the data, 70 internal error.
    """
