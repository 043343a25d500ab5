"""Options and output handling shared by every ``nsysscope`` command that analyses a trace."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ..analysis import AnalysisConfig
from ..errors import UnreadableInput

F = TypeVar("F", bound=Callable[..., Any])


def analysis_options(f: F) -> F:
    """``--warmup``, ``--launch-bound-us`` and ``--nsys``: how a trace is analysed."""
    f = click.option("--warmup", type=int, default=None, metavar="N",
                     help="Launches to treat as warm-up (default: max(5, 2%)).")(f)
    f = click.option("--launch-bound-us", type=float, default=AnalysisConfig.launch_bound_gap_us,
                     show_default=True, help="GPU idle gap above which a launch with no stall "
                                             "counts as launch-bound.")(f)
    f = click.option("--nsys", metavar="PATH", default=None,
                     help="nsys executable for .nsys-rep input (default: $NSYS, then PATH).")(f)
    return f


def config_from(warmup: int | None, launch_bound_us: float) -> AnalysisConfig:
    return AnalysisConfig(warmup_launches=warmup, launch_bound_gap_us=launch_bound_us)


def write_output(text: str | bytes, output: str | None) -> None:
    """What a renderer returned (text, or bytes from a binary format) to the file ``output``,
    or to stdout."""
    if output:
        try:
            if isinstance(text, bytes):
                Path(output).write_bytes(text)
            else:
                Path(output).write_text(text, encoding="utf-8")
        except OSError as e:
            raise UnreadableInput(f"{output}: cannot write: {e.strerror or e}") from None
    else:
        click.echo(text, nl=False)
