"""The gate's result as one JSON object (:meth:`GateResult.to_dict`, schema ``nsysscope.gate/1``);
``GateResult.from_dict`` reads it back."""

from __future__ import annotations

from ..model import GateResult


def render(r: GateResult) -> str:
    return r.to_json(indent=2) + "\n"
