"""The report as one JSON object: :meth:`Summary.to_dict` plus a stable ``stalls`` shape."""

from __future__ import annotations

import json

from ..model import Summary


def render(s: Summary) -> str:
    return json.dumps(s.to_dict(), indent=2, ensure_ascii=False) + "\n"
