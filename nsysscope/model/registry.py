"""Where renderers are found: the one contract every output format follows, and its registry.

A renderer draws one kind of result (``kind``: ``"report"`` a trace's summary, ``"gate"`` a
gate result, ``"batch"`` many traces, ``"notebook"`` the HTML blocks Jupyter shows) in one
format (``name``: ``"text"``, ``"json"``, ``"markdown"``, ``"junit"``, ``"html"``...). It
declares the file names that are its format (``extensions``, the one it writes first), how
a message names such a file (``noun``) and whether it is binary; the command line's tables
of formats and extensions are made from these declarations. ``render(result, context)``
returns ``str`` or, when ``is_binary``, ``bytes``; ``context`` (:class:`RenderContext`) is
every option a caller may give and what it already analysed that a format may draw too (the
gate's two sides for the HTML figure). Renderers are handed what they draw: they never load
or analyse anything.

The registry lives here, below every layer that has results, so that ``Summary._repr_html_``
finds the notebook renderer; :mod:`nsysscope.render` registers the shipped renderers when it
is imported, which ``nsysscope``'s own names (``nsysscope.open``, ``nsysscope.Summary``) and
the command line do. A result met before anything imported it shows its plain repr in
Jupyter.

The sentences a result says (``Summary.verdict``, ``Summary.notes``...) are made from the
values it holds by the :class:`Words` that :mod:`nsysscope.render.words` registers here when it
is imported (:mod:`nsysscope.render` imports it): the analysis and the gate decide the values,
only ``render/`` words them. A worker process that writes a result's sentences is handed its
parent's words (:func:`registered_words`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .facts import Note, Verdict
    from .gate import Check, Finding, SiteChange
    from .headline import Headline
    from .summary import ProcessSummary, Summary


@dataclass(frozen=True)
class RenderContext:
    """What a caller hands a renderer beside the result; each format reads the fields it
    declares, and a field left at its default was not given."""

    #: the width text is wrapped at (None: the format's own)
    width: int | None = None
    #: what the gate compared (an Analysis, OpenTrace or Summary), for the HTML figure
    baseline: Any = None
    candidate: Any = None
    #: the relative link to a Perfetto timeline written beside an HTML report
    perfetto: str | None = None
    #: added to an HTML page's footer
    timestamp: datetime | str | None = None


@runtime_checkable
class Renderer(Protocol):
    """The contract of one output format."""

    @property
    def kind(self) -> str: ...  # what it draws: report, gate, batch, notebook
    @property
    def name(self) -> str: ...  # the format: text, json, markdown, junit, html
    @property
    def extensions(self) -> tuple[str, ...]: ...  # the names of its files: (".md", ".markdown")
    @property
    def noun(self) -> str: ...  # a file of it, in a message: "a Markdown", "an HTML"
    @property
    def is_binary(self) -> bool: ...  # render returns bytes

    @property
    def file_extension(self) -> str: ...  # the extension it writes: ``extensions[0]``

    def render(self, result: Any, context: RenderContext) -> str | bytes: ...


_RENDERERS: dict[tuple[str, str], Renderer] = {}


def register(renderer: Renderer) -> Renderer:
    """Add ``renderer`` (replacing one of the same kind and name); returns it."""
    if not isinstance(renderer, Renderer):
        raise TypeError(f"{renderer!r} does not follow the Renderer contract")
    _RENDERERS[(renderer.kind, renderer.name)] = renderer
    return renderer


def renderers(kind: str) -> tuple[Renderer, ...]:
    """The renderers registered for ``kind``, in the order they were registered."""
    return tuple(r for (k, _), r in _RENDERERS.items() if k == kind)


def names(kind: str) -> tuple[str, ...]:
    """The formats registered for ``kind``, in the order they were registered."""
    return tuple(r.name for r in renderers(kind))


def kinds() -> tuple[str, ...]:
    return tuple(dict.fromkeys(k for k, _ in _RENDERERS))


def by_extension(kind: str) -> dict[str, str]:
    """Every file extension a ``kind`` format declares, and that format's name."""
    return {e: r.name for r in renderers(kind) for e in r.extensions}


def get(kind: str, name: str) -> Renderer:
    """The renderer of ``kind`` in format ``name``; LookupError names the ones there are."""
    try:
        return _RENDERERS[(kind, name)]
    except KeyError:
        known = ", ".join(names(kind)) or "none registered (import nsysscope.render)"
        raise LookupError(f"no {kind} renderer '{name}' (known: {known})") from None


def render(kind: str, name: str, result: Any, **options: Any) -> str | bytes:
    """``result`` drawn in format ``name``; ``options``: the fields of :class:`RenderContext`
    (another keyword is a TypeError)."""
    return get(kind, name).render(result, RenderContext(**options))


def render_fragment(name: str, result: Any) -> str | None:
    """The notebook HTML of ``result``, or None (Jupyter then shows the repr) when no
    renderer is registered."""
    r = _RENDERERS.get(("notebook", name))
    if r is None:
        return None
    out = r.render(result, RenderContext())
    return out if isinstance(out, str) else out.decode("utf-8")


class Words(Protocol):
    """What makes a result's sentences from its values (:mod:`nsysscope.render.words`)."""

    def notes(self, notes: Sequence[Note], written: Sequence[str] | None = None) -> list[str]:
        """Each note said; ``written``: the sentences a file held beside them, for a code
        this version does not know."""
        ...

    def verdict(self, verdict: Verdict, of: Summary | ProcessSummary) -> str:
        """The verdict line of ``of`` (a summary, or one of its processes), said."""
        ...

    def headline(self, headline: Headline, of: Summary) -> str:
        """The headline of ``of`` (its ``text`` not yet made), said."""
        ...

    def finding(self, check: Check, sites: Sequence[SiteChange], regression: bool) -> str:
        """A gate finding's message: ``check``'s change, and where its biggest site is."""
        ...

    def gate_verdict(self, passed: bool, checks: Sequence[Check], regressions: Sequence[Finding],
                     improvements: Sequence[Finding], new_latent: int = 0) -> str:
        """The gate's verdict line (``new_latent``: the new patterns not yet costing
        overlap)."""
        ...


_WORDS: list[Words] = []


def register_words(words: Words) -> Words:
    """Make ``words`` the one that says every result's sentences; returns it."""
    _WORDS[:] = [words]
    return words


def registered_words() -> Words | None:
    """The words registered in this process, or None."""
    return _WORDS[0] if _WORDS else None


def words() -> Words:
    """The registered words; LookupError where none is (nothing imported
    :mod:`nsysscope.render`)."""
    if not _WORDS:
        raise LookupError("no words registered to say a result's sentences: import "
                          "nsysscope.render (nsysscope.open and the command line do)")
    return _WORDS[0]
