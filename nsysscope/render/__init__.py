"""Renderers: one module per output format, each a pure function of a
:class:`~nsysscope.model.Summary` (or of a gate result) to text."""

from __future__ import annotations

from . import json_ as json
from . import markdown, text

REPORT_FORMATS = ("text", "json", "markdown", "html")

__all__ = ["json", "markdown", "text", "REPORT_FORMATS"]
