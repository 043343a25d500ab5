"""Where renderers are found: the one contract every output format follows, and its registry.

A renderer draws one kind of result (``kind``: ``"report"`` a trace's summary, ``"gate"`` a
gate result, ``"batch"`` many traces, ``"notebook"`` the HTML blocks Jupyter shows) in one
format (``name``: ``"text"``, ``"json"``, ``"markdown"``, ``"junit"``, ``"html"``...).
``render(result, **context)`` returns ``str`` or, when ``is_binary``, ``bytes``; ``context`` is
what the caller already analysed that a format may draw too (the gate's two sides for the HTML
figure). Renderers are handed what they draw: they never load or analyse anything.

The registry lives here, below every layer that has results, so that ``Summary._repr_html_``
finds the notebook renderer without importing :mod:`nsysscope.render`: that package registers
its renderers when it is imported. ``import nsysscope`` no longer imports it up front (the
command line starts faster), so the registry loads the shipped renderers by name the first
time one is looked up and none is registered yet: a plugin lookup, not an import of a higher
layer.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol, runtime_checkable

#: the package whose import registers the renderers nsysscope ships
DEFAULT_RENDERERS = "nsysscope.render"


@runtime_checkable
class Renderer(Protocol):
    """The contract of one output format."""

    @property
    def kind(self) -> str: ...  # what it draws: report, gate, batch, notebook
    @property
    def name(self) -> str: ...  # the format: text, json, markdown, junit, html
    @property
    def file_extension(self) -> str: ...  # ".txt", ".json", ...
    @property
    def is_binary(self) -> bool: ...  # render returns bytes

    def render(self, result: Any, **context: Any) -> str | bytes: ...


_RENDERERS: dict[tuple[str, str], Renderer] = {}
_defaults_loaded = False


def _ensure_defaults() -> None:
    """Import the shipped renderers once, the first time the registry is asked for one."""
    global _defaults_loaded
    if not _defaults_loaded:
        _defaults_loaded = True
        importlib.import_module(DEFAULT_RENDERERS)


def register(renderer: Renderer) -> Renderer:
    """Add ``renderer`` (replacing one of the same kind and name); returns it."""
    if not isinstance(renderer, Renderer):
        raise TypeError(f"{renderer!r} does not follow the Renderer contract")
    _RENDERERS[(renderer.kind, renderer.name)] = renderer
    return renderer


def names(kind: str) -> tuple[str, ...]:
    """The formats registered for ``kind``, in the order they were registered."""
    _ensure_defaults()
    return tuple(name for k, name in _RENDERERS if k == kind)


def kinds() -> tuple[str, ...]:
    _ensure_defaults()
    return tuple(dict.fromkeys(k for k, _ in _RENDERERS))


def get(kind: str, name: str) -> Renderer:
    """The renderer of ``kind`` in format ``name``; LookupError names the ones there are."""
    _ensure_defaults()
    try:
        return _RENDERERS[(kind, name)]
    except KeyError:
        known = ", ".join(names(kind)) or "none registered (import nsysscope.render)"
        raise LookupError(f"no {kind} renderer '{name}' (known: {known})") from None


def render(kind: str, name: str, result: Any, **context: Any) -> str | bytes:
    return get(kind, name).render(result, **context)


def render_fragment(name: str, result: Any) -> str | None:
    """The notebook HTML of ``result``, or None (Jupyter then shows the repr) when no
    renderer is registered."""
    _ensure_defaults()
    r = _RENDERERS.get(("notebook", name))
    if r is None:
        return None
    out = r.render(result)
    return out if isinstance(out, str) else out.decode("utf-8")
