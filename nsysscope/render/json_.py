"""The report as one JSON object, the ``nsysscope.summary/1`` that ``summarize`` writes too.

The summary indented, each per-launch list of its ``distributions`` on one line (a
300-launch trace gives ~15 KB, the 4000-launch cap ~150 KB); the gate reads it as a side.
"""

from __future__ import annotations

import json
from typing import Any

from .base import as_summary


def render(result: Any) -> str:
    d = as_summary(result).to_dict(with_distributions=True)
    dist = d.pop("distributions", None)
    text = json.dumps(d, indent=2, ensure_ascii=False)
    if dist is None:
        return text + "\n"
    inner = ",\n".join(f"    {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}"
                       for k, v in dist.items())
    return text[:-2] + ',\n  "distributions": {\n' + inner + "\n  }\n}\n"
