"""The Renderer contract's implementation for the formats nsysscope ships, and what they share."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..model import Summary, registry, summary_in
from ..model.registry import RenderContext
from ..util.text import printable


@dataclass(frozen=True)
class FunctionRenderer:
    """A :class:`~nsysscope.model.Renderer` made of a function ``fn(result, **options)``,
    handed the fields of the :class:`~nsysscope.model.registry.RenderContext` it ``reads``
    (a text renderer reads the width, the gate page the two sides)."""

    kind: str
    name: str
    extensions: tuple[str, ...]
    noun: str
    fn: Callable[..., str | bytes]
    reads: tuple[str, ...] = ()
    is_binary: bool = False

    @property
    def file_extension(self) -> str:
        return self.extensions[0]

    def render(self, result: Any, context: RenderContext) -> str | bytes:
        """What ``fn`` draws, printable: a control character or bidirectional override that
        reached it (a trace's name is made printable when read; a file name is not) is
        written as an escape, whatever the format (``\\u001b`` in JSON, where it reads back
        as the character it stands for)."""
        out = self.fn(result, **{k: getattr(context, k) for k in self.reads})
        if isinstance(out, bytes):
            return out
        return printable(out, keep="\n\t", json=self.file_extension == ".json")


def register(kind: str, name: str, extensions: tuple[str, ...], noun: str,
             fn: Callable[..., str | bytes], reads: tuple[str, ...] = (),
             is_binary: bool = False) -> FunctionRenderer:
    r = FunctionRenderer(kind, name, extensions, noun, fn, reads, is_binary)
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


def md_code(text: str) -> str:
    """``text`` as one Markdown code span, whatever backticks it holds (the fence is one
    longer than its longest run of them, CommonMark), on one line: inside it nothing is
    Markdown, and a GitHub comment links no @mention or URL. Empty text: nothing."""
    text = text.replace("\r", " ").replace("\n", " ")
    if not text:
        return ""
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text[0] in "` " or text[-1] in "` " else ""  # one space each side is
    # taken off again by the reader: a span that starts or ends with a backtick or a space
    return f"{fence}{pad}{text}{pad}{fence}"


def md_text(text: str) -> str:
    """Prose (a verdict, a note, a site's place, a trace's name among words) as Markdown
    that stays prose: what nsysscope writes between backticks stays a code span
    (:func:`md_code`); elsewhere what would make a link, an image, raw HTML, an entity,
    emphasis or, at the start, a heading, quote or list is escaped, and a word that GitHub
    would link (an @mention, an e-mail, a URL) becomes a code span; line breaks become
    spaces. A trace's own backtick may pair differently than the writer meant: every part is
    still either escaped text or a code span, never Markdown."""
    return _BLOCK_START.sub(r"\g<1>\\\g<2>", _md_inline(text), count=1)


def _md_inline(text: str) -> str:
    """:func:`md_text` but for the start of a block (a table cell holds no block)."""
    parts = text.replace("\r", " ").replace("\n", " ").split("`")
    if len(parts) % 2 == 0:  # a backtick left alone: text, as it is
        parts[-2:] = [parts[-2] + "`" + parts[-1]]
    return "".join(md_code(p) if i % 2 else _md_words(p) for i, p in enumerate(parts))


def _md_words(text: str) -> str:
    pieces = _LINKED.split(text)  # words GitHub links at odd positions
    return "".join(md_code(w) if i % 2 else _MD_SPECIAL.sub(r"\\\g<0>", w)
                   for i, w in enumerate(pieces))


_BACKTICKS = re.compile("`+")
#: what makes Markdown structure inside a line: a backslash (it would unescape what
#: follows), brackets (links, images, footnotes), ``<`` (HTML, autolinks), ``&`` (entities),
#: ``*`` and an ``_`` at a word's edge (emphasis); ``_`` inside a word (``gpu_to_cpu``) is
#: nothing in CommonMark, and a ``~`` (``~1.58x``) at most strikes text through: as written
_MD_SPECIAL = re.compile(r"[\\\[\]<&*`]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
#: a word GitHub turns into a link: an @mention or e-mail, a URL, www.
_LINKED = re.compile(r"(\S*(?:@|://|www\.)\S*)", re.I)
#: what starts a block at the start of a line: a heading, a quote, a list item, a rule
_BLOCK_START = re.compile(r"^(\s*(?=[#>+=-])|\s*\d{1,9}(?=[.)](?:\s|$)))(.)")


def pipes(markdown: str) -> str:
    """A Markdown table cell made of ``markdown``: its pipes escaped (GitHub splits a row at
    every other pipe, in a code span too)."""
    return markdown.replace("|", "\\|")


def cell(v: object) -> str:
    """A Markdown table cell of text: :func:`md_text` (no block starts in a cell: ``+2 pp``
    stays as it is), pipes escaped."""
    return pipes(_md_inline(str(v)))
