"""Renderers: every output format, each a pure function of a result to text (or bytes).

Importing this package registers each renderer in :mod:`nsysscope.model.registry` under its
kind and format, which is how ``report``, ``gate``, many-trace reports and notebooks
(``_repr_html_``) find them:

=========  =========================================  ==========================
kind       draws                                      formats
=========  =========================================  ==========================
report     one trace's Summary (an Analysis for the   text, json, markdown, html
           HTML page's timelines)
gate       a GateResult (``baseline=``/``candidate=``  text, json, markdown,
           context for the HTML figure)               junit, html
batch      a BatchResult (many traces)                text, json, markdown
notebook   Jupyter blocks                             summary, gate
=========  =========================================  ==========================

Importing it also registers :mod:`.words`, which says every result's sentences from its
values (the notes' wording is :mod:`.notes`). Figures are in :mod:`.plots`, the colours in
:mod:`.palette`; times are formatted by :mod:`nsysscope.util.units`.
"""

from __future__ import annotations

from typing import Any

from ..model import registry
from . import batch, gate_json, gate_junit, gate_markdown, gate_text, markdown, text, words
from . import json_ as json
from .base import register
from .html import gate_fragment, gate_page, report_page, summary_fragment

TEXT, JSON, MARKDOWN, HTML = (".txt", ".text"), (".json",), (".md", ".markdown"), (".html", ".htm")
register("report", "text", TEXT, "a text", text.render, reads=("width",))
register("report", "json", JSON, "a JSON", json.render)
register("report", "markdown", MARKDOWN, "a Markdown", markdown.render)
register("report", "html", HTML, "an HTML", report_page, reads=("timestamp", "perfetto"))
register("gate", "text", TEXT, "a text", gate_text.render, reads=("width",))
register("gate", "json", JSON, "a JSON", gate_json.render)
register("gate", "markdown", MARKDOWN, "a Markdown", gate_markdown.render)
register("gate", "junit", (".xml",), "a JUnit XML", gate_junit.render)
register("gate", "html", HTML, "an HTML", gate_page, reads=("baseline", "candidate", "timestamp"))
register("batch", "text", TEXT, "a text", batch.render_text, reads=("width",))
register("batch", "json", JSON, "a JSON", batch.render_json)
register("batch", "markdown", MARKDOWN, "a Markdown", batch.render_markdown)
register("notebook", "summary", HTML, "an HTML", summary_fragment)
register("notebook", "gate", HTML, "an HTML", gate_fragment)

REPORT_FORMATS = registry.names("report")
GATE_FORMATS = registry.names("gate")
BATCH_FORMATS = registry.names("batch")


def render(kind: str, fmt: str, result: Any, **context: Any) -> str | bytes:
    """``result`` drawn by the ``kind`` renderer for format ``fmt`` (see the table above)."""
    return registry.render(kind, fmt, result, **context)


__all__ = ["BATCH_FORMATS", "GATE_FORMATS", "REPORT_FORMATS", "json", "markdown", "render",
           "text", "words"]
