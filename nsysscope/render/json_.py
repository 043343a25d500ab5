"""The report as one JSON object, the ``nsysscope.summary/1`` that ``summarize`` writes too
(:meth:`~nsysscope.model.Summary.to_json`: indented, each per-launch list of its
``distributions`` on one line); the gate reads it as a side."""

from __future__ import annotations

from typing import Any

from .base import as_summary


def render(result: Any) -> str:
    return as_summary(result).to_json()
