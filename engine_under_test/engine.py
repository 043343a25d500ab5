"""The overlap decode loop: launch step k, wait only on step k-1, post-process k-1 and
prepare k+1 while step k runs on the GPU.

Each iteration is one NVTX range ``step N`` holding the phases ``schedule``, ``prepare``,
``launch``, ``sample``, ``wait_prev``, ``post`` and ``detokenize``. With ``overlap=False`` the
same loop waits on the step it just launched: the plain synchronous reference.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass

import numpy as np
import torch

from .backend import Backend
from .config import EngineConfig, ModelConfig
from .model import KVCache, Llama
from .sampler import finish_sampling, sample_device
from .scheduler import Row, Scheduler
from .tokenizer import EOS, Tokenizer
from .workload import Request, Workload

# rows of the int64 input block sent to the device each step
_TOKEN, _FORCED, _POS, _SEED, _GREEDY = range(5)
# rows of the float32 block
_TEMP, _TOP_P = range(2)


@dataclass
class _InFlight:
    """A launched step the host has not post-processed yet."""

    step: int
    rows: list[Row]
    tokens: torch.Tensor  # pinned host buffer the step's tokens are copied into
    done: object  # completion event of that copy


@dataclass(frozen=True)
class RunResult:
    steps: int
    seconds: float
    steps_per_s: float
    tokens_per_s: float
    gpu_busy: float | None
    outputs: dict[int, list[int]]
    finished: dict[int, str]

    @property
    def digest(self) -> str:
        """A short hash of every request's tokens: equal across modes with the same seed."""
        h = hashlib.sha256()
        for rid in sorted(self.outputs):
            h.update(np.asarray([rid, *self.outputs[rid]], dtype=np.int64).tobytes())
        return h.hexdigest()[:16]


class Engine:
    def __init__(self, model_cfg: ModelConfig, cfg: EngineConfig, backend: Backend) -> None:
        self.cfg, self.backend = cfg, backend
        dev, n = backend.device, cfg.max_batch
        self.tokenizer = Tokenizer(model_cfg.vocab)
        self.model = Llama(model_cfg, dev, backend.dtype, seed=cfg.seed)
        self.cache = KVCache(model_cfg, n, dev, backend.dtype)
        self.scheduler = Scheduler(n, cfg.graph_batch_sizes)
        self.workload = Workload(cfg, self.tokenizer, model_cfg.max_seq)
        # device-side graph inputs and outputs: fixed buffers, sliced per padded batch size
        self.d_ints = torch.zeros((5, n), dtype=torch.int64, device=dev)
        self.d_floats = torch.ones((2, n), dtype=torch.float32, device=dev)
        self.d_last_token = torch.zeros(n, dtype=torch.int64, device=dev)
        self.d_is_greedy = torch.zeros(n, dtype=torch.bool, device=dev)
        self.d_greedy = torch.zeros(n, dtype=torch.int64, device=dev)
        self.d_sampled = torch.zeros(n, dtype=torch.int64, device=dev)
        # host staging: double-buffered, because step k+1 is staged while step k's copy may
        # still be queued behind step k-1
        self.h_ints = [backend.host_buffer((5, n), torch.int64) for _ in range(2)]
        self.h_floats = [backend.host_buffer((2, n), torch.float32) for _ in range(2)]
        self.h_tokens = [backend.host_buffer((n,), torch.int64) for _ in range(2)]
        self.copy_done = [backend.event() for _ in range(2)]
        with backend.phase("capture_graphs"):
            self.graphs = {bs: backend.capture(self._forward_fn(bs))
                           for bs in self.scheduler.batch_sizes}

    def _forward_fn(self, bs: int):
        def forward() -> None:
            ints, floats = self.d_ints[:, :bs], self.d_floats[:, :bs]
            tokens = torch.where(ints[_FORCED] != 0, ints[_TOKEN], self.d_last_token[:bs])
            logits = self.model.decode(tokens, ints[_POS], self.cache)
            greedy, sampled = sample_device(logits, floats[_TEMP], floats[_TOP_P], ints[_SEED],
                                            ints[_POS])
            self.d_greedy[:bs].copy_(greedy)
            self.d_sampled[:bs].copy_(sampled)
            self.d_is_greedy[:bs].copy_(ints[_GREEDY] != 0)
        return forward

    # -- phases -------------------------------------------------------------------------
    def _prepare(self, rows: list[Row], bs: int) -> tuple[np.ndarray, np.ndarray]:
        ints = np.zeros((5, self.cfg.max_batch), dtype=np.int64)
        floats = np.ones((2, self.cfg.max_batch), dtype=np.float32)
        for row in rows:
            req = row.request
            if req.fed < len(req.prompt):
                ints[_TOKEN, row.slot], ints[_FORCED, row.slot] = req.prompt[req.fed], 1
            ints[_POS, row.slot], ints[_SEED, row.slot] = req.fed, req.seed
            ints[_GREEDY, row.slot] = req.greedy
            floats[_TEMP, row.slot], floats[_TOP_P, row.slot] = req.temperature, req.top_p
            req.fed += 1
        return ints, floats

    def _launch(self, k: int, bs: int, ints: np.ndarray, floats: np.ndarray, start) -> None:
        if self.cfg.pageable_inputs:  # case 2: pageable source, so the copy synchronises
            self.d_ints.copy_(torch.from_numpy(ints))
            self.d_floats.copy_(torch.from_numpy(floats))
        else:
            self.h_ints[k % 2].numpy()[:] = ints
            self.h_floats[k % 2].numpy()[:] = floats
            self.d_ints.copy_(self.h_ints[k % 2], non_blocking=True)
            self.d_floats.copy_(self.h_floats[k % 2], non_blocking=True)
        start.record()  # after the copies: a synchronising copy must not count as GPU busy
        self.graphs[bs]()

    def _sample(self, k: int, rows: list[Row], bs: int) -> _InFlight:
        all_greedy = all(r.request.greedy for r in rows)
        tokens = finish_sampling(self.d_greedy[:bs], self.d_sampled[:bs], self.d_is_greedy[:bs],
                                 all_greedy, self.cfg.readback_at(k))
        self.d_last_token[:bs].copy_(tokens)
        host = self.h_tokens[k % 2]
        host[:bs].copy_(tokens, non_blocking=True)
        self.copy_done[k % 2].record()
        return _InFlight(k, rows, host, self.copy_done[k % 2])

    def _post(self, prev: _InFlight) -> list[tuple[Request, int]]:
        """Append each row's token and apply the token stop conditions."""
        if self.cfg.host_work_us:  # a CPU-bound engine's extra bookkeeping
            until = time.perf_counter() + self.cfg.host_work_us / 1e6
            while time.perf_counter() < until:
                pass
        tokens = prev.tokens.tolist()
        emitted = []
        for row in prev.rows:
            req = row.request
            if req.done or not row.emits:
                continue
            tok = tokens[row.slot]
            req.output.append(tok)
            emitted.append((req, tok))
            if tok == EOS:
                req.done, req.finish_reason = True, "eos"
            elif len(req.output) >= req.max_new_tokens:
                req.done, req.finish_reason = True, "length"
        return emitted

    @staticmethod
    def _detokenize(emitted: list[tuple[Request, int]]) -> None:
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

    # -- the loop -------------------------------------------------------------------------
    def run(self) -> RunResult:
        cfg, be = self.cfg, self.backend
        requests: dict[int, Request] = {}
        prev: _InFlight | None = None
        starts, ends = [], []
        generated_at_warmup, t_warm = 0, time.perf_counter()
        for k in range(cfg.steps):
            if k == cfg.warmup_steps:  # no device sync here: it would stall the loop it measures
                t_warm = time.perf_counter()
                generated_at_warmup = sum(len(r.output) for r in requests.values())
            with be.phase(f"step {k}"):
                with be.phase("schedule"):
                    self.scheduler.release_finished()
                    arrivals = self.workload.arrivals(k)
                    requests.update((r.rid, r) for r in arrivals)
                    self.scheduler.admit(arrivals)
                    rows = self.scheduler.next_batch()
                    bs = self.scheduler.padded_size(rows)
                with be.phase("prepare"):
                    ints, floats = self._prepare(rows, bs)
                with be.phase("launch"):
                    start, end = be.event(timing=True), be.event(timing=True)
                    self._launch(k, bs, ints, floats, start)
                    end.record()
                    starts.append(start)
                    ends.append(end)
                with be.phase("sample"):
                    current = self._sample(k, rows, bs)
                waited = prev if cfg.overlap else current
                with be.phase("wait_prev"):
                    if waited is not None:
                        waited.done.synchronize()
                if waited is not None:
                    with be.phase("post"):
                        emitted = self._post(waited)
                    with be.phase("detokenize"):
                        self._detokenize(emitted)
                prev = current if cfg.overlap else None
        if prev is not None:
            prev.done.synchronize()
            self._detokenize(self._post(prev))
        be.synchronize()
        seconds = time.perf_counter() - t_warm
        timed = max(cfg.steps - cfg.warmup_steps, 1)
        generated = sum(len(r.output) for r in requests.values()) - generated_at_warmup
        return RunResult(
            steps=cfg.steps, seconds=seconds, steps_per_s=timed / seconds,
            tokens_per_s=generated / seconds,
            gpu_busy=self._busy(starts[cfg.warmup_steps:], ends[cfg.warmup_steps:]),
            outputs={rid: r.output for rid, r in requests.items()},
            finished={rid: r.finish_reason for rid, r in requests.items() if r.done})

    def _busy(self, starts: list, ends: list) -> float | None:
        """Fraction of the steady-state span the GPU spent replaying decode graphs."""
        if self.backend.device.type != "cuda" or len(starts) < 2:
            return None
        busy = sum(self.backend.elapsed_ms(s, e) for s, e in zip(starts, ends))
        return busy / self.backend.elapsed_ms(starts[0], ends[-1])
