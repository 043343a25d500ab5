"""The output processor: what the host does with a step's tokens once they are on the host.

``post`` appends each row's token to its request and applies the token stop conditions (EOS,
``max_new_tokens``); ``detokenize`` extends each request's text, applies stop strings and builds
the JSON chunk a server would stream to its client. Neither touches the device: the engine
calls them for step k-1 while step k runs on the GPU.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from .config import EngineConfig
from .tokenizer import EOS
from .workload import Request

if TYPE_CHECKING:
    from .engine import _InFlight


class OutputProcessor:
    def __init__(self, cfg: EngineConfig) -> None:
        self.cfg = cfg

    def post(self, prev: "_InFlight") -> list[tuple[Request, int]]:
        """Append each row's token and apply the token stop conditions."""
        if self.cfg.host_work_us:  # a CPU-bound engine's extra bookkeeping
            until = time.perf_counter() + self.cfg.host_work_us / 1e6
            while time.perf_counter() < until:
                pass
        tokens = prev.tokens.tolist()
        accepted = getattr(prev, "accepted", None)  # speculative decoding: several per row
        emitted = []
        for row in prev.rows:
            req = row.request
            if not row.emits:
                continue
            row_tokens = ([tokens[row.slot]] if accepted is None
                          else tokens[row.slot][:accepted[row.slot] + 1])
            for tok in row_tokens:
                if req.done:
                    break
                req.output.append(tok)
                emitted.append((req, tok))
                if tok == EOS:
                    req.done, req.finish_reason = True, "eos"
                elif len(req.output) >= req.max_new_tokens:
                    req.done, req.finish_reason = True, "length"
        return emitted

    @staticmethod
    def detokenize(emitted: list[tuple[Request, int]]) -> None:
        """Extend each request's text, apply stop strings, and build the chunk a server
        would stream to its client."""
        for req, tok in emitted:
            seen = len(req.detok.text)
            if req.detok.add(tok) and not req.done:
                req.done, req.finish_reason = True, "stop_string"
            chunk = json.dumps({"id": f"req-{req.rid}", "index": len(req.output) - 1,
                                "token": tok, "delta": req.detok.text[seen:],
                                "finish_reason": req.finish_reason or None})
            req.streamed_bytes += len(chunk)
