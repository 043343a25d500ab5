"""Synthetic requests, arriving over steps, each with its own length and sampling params.

Arrival is counted in engine steps, not wall time, so every mode and loop sees the same
schedule and must emit the same tokens.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .config import EngineConfig
from .tokenizer import Detokenizer, Tokenizer

_WORDS = ("the quick brown fox jumps over a lazy dog while engines overlap host work with "
          "device work and nobody waits for a forward pass that is still running").split()
STOP_STRINGS = ("zq", "qx")


@dataclass
class Request:
    rid: int
    arrival_step: int
    prompt: list[int]
    max_new_tokens: int
    greedy: bool
    temperature: float
    top_p: float
    seed: int
    detok: Detokenizer
    output: list[int] = field(default_factory=list)
    fed: int = 0  # tokens already scheduled through the model (prompt, then generated)
    done: bool = False
    finish_reason: str = ""
    streamed_bytes: int = 0

    @property
    def planned_outputs(self) -> int:
        """Tokens this request will have generated once every scheduled step is processed."""
        return max(0, self.fed - len(self.prompt) + 1)


class Workload:
    """A deterministic stream of requests: an initial burst, then Poisson arrivals per step."""

    def __init__(self, cfg: EngineConfig, tokenizer: Tokenizer, max_seq: int) -> None:
        self._cfg, self._tok, self._max_seq = cfg, tokenizer, max_seq
        self._rng = np.random.default_rng(cfg.seed)
        self._next_id = 0

    def arrivals(self, step: int) -> list[Request]:
        n = self._cfg.initial_requests if step == 0 else int(
            self._rng.poisson(self._cfg.arrivals_per_step))
        return [self._make(step) for _ in range(n)]

    def _make(self, step: int) -> Request:
        cfg, rng = self._cfg, self._rng
        n_words = int(rng.integers(*cfg.prompt_len))
        text = " ".join(rng.choice(_WORDS, n_words))
        prompt = self._tok.encode(text)[: self._max_seq // 2]
        # speculative decoding writes up to spec_decode positions past the last token
        room = self._max_seq - len(prompt) - (cfg.spec_decode + 1 if cfg.spec_decode else 0)
        max_new = max(1, min(int(rng.integers(*cfg.max_new_tokens)), room))
        greedy = bool(rng.random() < cfg.greedy_fraction)
        stops = STOP_STRINGS if rng.random() < cfg.stop_string_fraction else ()
        req = Request(rid=self._next_id, arrival_step=step, prompt=prompt,
                      max_new_tokens=max_new, greedy=greedy,
                      temperature=float(rng.uniform(0.6, 1.2)), top_p=float(rng.uniform(0.8, 1.0)),
                      seed=int(rng.integers(0, 2**24)), detok=Detokenizer(self._tok, stops))
        self._next_id += 1
        return req


class BurstWorkload(Workload):
    """A benchmark client's bursts (``--bursts``): burst ``i`` sends ``cfg.bursts[i]``
    requests, ``cfg.burst_rate`` a step, once the previous burst has been served and
    ``cfg.idle_ms`` have passed with nothing to run; ``cfg.idle_ms`` of idle also ends the run.

    Arrival is counted in steps within a burst and the bursts open when the engine drains, so
    every mode still sees the same schedule and emits the same tokens."""

    def __init__(self, cfg: EngineConfig, tokenizer: Tokenizer, max_seq: int) -> None:
        super().__init__(cfg, tokenizer, max_seq)
        self._queue = list(cfg.bursts)
        self._pending = self._queue.pop(0)
        self.finished = False
        self.idle_s: list[float] = []  # each idle period's length, as the host slept it

    def arrivals(self, step: int) -> list[Request]:
        n = min(self._pending, self._cfg.burst_rate)
        self._pending -= n
        return [self._make(step) for _ in range(n)]

    def idle(self) -> None:
        """Nothing to run: poll the (empty) request queue every millisecond for ``idle_ms``
        without touching the device, then open the next burst (or finish)."""
        t0 = time.perf_counter()
        until = t0 + self._cfg.idle_ms / 1e3
        while time.perf_counter() < until:
            time.sleep(0.001)
        self.idle_s.append(time.perf_counter() - t0)
        if self._queue:
            self._pending = self._queue.pop(0)
        else:
            self.finished = True
