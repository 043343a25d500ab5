"""The Renderer contract's implementation for the formats nsysscope ships, and what they share."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..model import Summary, registry, summary_in


@dataclass(frozen=True)
class FunctionRenderer:
    """A :class:`~nsysscope.model.Renderer` made of a function ``fn(result, **context)``.

    ``fn`` receives only the context keywords it names (a text renderer takes none, the gate
    page takes ``baseline`` and ``candidate``)."""

    kind: str
    name: str
    file_extension: str
    fn: Callable[..., str | bytes]
    is_binary: bool = False

    def render(self, result: Any, **context: Any) -> str | bytes:
        params = inspect.signature(self.fn).parameters
        takes = {k: v for k, v in context.items() if k in params}
        return self.fn(result, **takes)


def register(kind: str, name: str, file_extension: str, fn: Callable[..., str | bytes],
             is_binary: bool = False) -> FunctionRenderer:
    r = FunctionRenderer(kind, name, file_extension, fn, is_binary)
    registry.register(r)
    return r


def as_summary(result: Any) -> Summary:
    """The :class:`Summary` a report renderer draws: the result itself, or its ``summary``
    (an Analysis's attribute, an OpenTrace's method)."""
    s = summary_in(result)
    if s is None:
        raise TypeError(f"cannot render a {type(result).__name__} as a report: give a Summary, "
                        "an Analysis or an OpenTrace")
    return s


def cell(v: object) -> str:
    """A Markdown table cell: pipes escaped, on one line."""
    return str(v).replace("|", "\\|").replace("\n", " ")
