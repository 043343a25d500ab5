"""The overlap decode loop, split the way sglang and vLLM split it.

``ModelRunner`` owns the device (buffers, CUDA graphs per padded batch size, input staging and
upload, the launch, device sampling, the tokens' copy to the host), ``OutputProcessor``
(``output.py``) the host's use of the tokens (append, stop conditions, detokenize, streamed
chunks). ``Engine.run`` is the overlap scheduler: launch step k, wait only on step k-1,
post-process k-1 and prepare k+1 while k runs.

Each iteration is one NVTX range ``step N`` holding the phases ``schedule``, ``prepare``,
``launch``, ``sample``, ``wait_prev``, ``post`` and ``detokenize``. With ``overlap=False`` the
same loop waits on the step it just launched: the plain synchronous reference.
NB: the sample traces' Python stacks pin two places in this file (tests/analysis/
test_source_lines.py): case 2's copy in ``_launch`` stays on line 116, ``_sample`` spans 127.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

import numpy as np
import torch

from .backend import Backend, Waiter
from .config import EngineConfig, ModelConfig
from .model import KVCache, Llama
from .output import OutputProcessor
from .sampler import finish_sampling, sample_device
from .scheduler import Row, Scheduler
from .tokenizer import Tokenizer
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
    source: torch.Tensor | None = None  # device tokens a side-stream copy reads (kept alive)


class ModelRunner:
    """The device side of a step: stage and upload inputs, replay the step's graph (its graphs
    in turn with ``--pieces``), sample, copy out. ``tp`` shards the model (its all-reduces are
    captured into each graph); ``--output-copy`` copies the tokens out on a side stream."""

    def __init__(self, model_cfg: ModelConfig, cfg: EngineConfig, backend: Backend,
                 batch_sizes: tuple[int, ...], tp=None) -> None:
        self.cfg, self.backend = cfg, backend
        dev, n = backend.device, cfg.max_batch
        self.model = Llama(model_cfg, dev, backend.dtype, seed=cfg.seed,
                           tp_rank=tp.rank if tp else 0, tp_size=tp.world if tp else 1,
                           all_reduce=tp.all_reduce if tp else None)
        self.cache = KVCache(self.model.local, n, dev, backend.dtype)  # this rank's KV heads
        self.waiter = Waiter(cfg.wait)
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
        # case 1 read back without a sync call (--wait poll*): pinned flags and their event
        self.h_flag = backend.host_buffer((), torch.bool)
        self.h_flags = backend.host_buffer((n,), torch.bool)
        self.flag_done = backend.event()
        # --output-copy: the side stream, and the device tokens it reads, double-buffered: the
        # host writes buffer k%2 again only after it has waited on step k's copy
        self.compute_stream = backend.current_stream()
        self.copy_stream = backend.stream() if cfg.output_copy else None
        self.d_out = [torch.zeros(n, dtype=torch.int64, device=dev) for _ in range(2)]
        with backend.phase("capture_graphs"):
            self.graphs = {bs: self._capture(bs) for bs in batch_sizes}

    def _forward_fn(self, bs: int):
        """The step's device work as one graph: embed the step's tokens (:meth:`step_tokens`),
        run every layer, sample (:meth:`finish_step`).

        With ``--pieces`` the same work is split over several graphs (:func:`piecewise`) and
        gives the same tokens. (The module docstring says why lines here must not move.)"""
        def forward() -> None:
            ints = self.d_ints[:, :bs]
            logits = self.model.decode(self.step_tokens(bs), ints[_POS], self.cache)
            self.finish_step(bs, logits)
        return forward

    def prepare(self, rows: list[Row], bs: int) -> tuple[np.ndarray, np.ndarray]:
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
        readback = self.cfg.readback_at(k)
        if readback and self.cfg.wait != "sync":  # case 1 without a sync call: poll the copy
            all_greedy, readback = self._read_flag_polled(bs, readback), None
        tokens = finish_sampling(self.d_greedy[:bs], self.d_sampled[:bs], self.d_is_greedy[:bs],
                                 all_greedy, readback)
        self.d_last_token[:bs].copy_(tokens)
        host, done = self.h_tokens[k % 2], self.copy_done[k % 2]
        if self.copy_stream is None:
            host[:bs].copy_(tokens, non_blocking=True)
            done.record()
            return _InFlight(k, rows, host, done)
        # vLLM's async output copy: the side stream waits for the compute stream (a
        # cudaStreamWaitEvent), copies the tokens to pinned memory, records the copy's event
        source = self.d_out[k % 2]
        source[:bs].copy_(tokens)
        self.copy_stream.wait_stream(self.compute_stream)
        with self.backend.use_stream(self.copy_stream):
            host[:bs].copy_(source[:bs], non_blocking=True)
            done.record(self.copy_stream)
        if self.cfg.early_wait_at(k):  # case 1 through the side stream: wait for it right now
            self.waiter.wait(done)
        return _InFlight(k, rows, host, done, source)

    # the loop's names for the two phases above (their own names stay, for the traces)
    launch, sample = _launch, _sample

    def _capture(self, bs: int):
        """The step's device work for batch size ``bs``, captured: one graph, or with
        ``--pieces N`` N graphs replayed in turn (:func:`piecewise`)."""
        if self.cfg.pieces == 1:
            return self.backend.capture(self._forward_fn(bs))
        return piecewise(self, bs)

    def step_tokens(self, bs: int) -> torch.Tensor:
        """The tokens a step feeds the model: the prompt's where still forced, else the last
        sampled (captured: reads the device buffers)."""
        ints = self.d_ints[:, :bs]
        return torch.where(ints[_FORCED] != 0, ints[_TOKEN], self.d_last_token[:bs])

    def finish_step(self, bs: int, logits: torch.Tensor) -> None:
        """Sample from the step's logits into the device buffers the host reads (captured)."""
        ints, floats = self.d_ints[:, :bs], self.d_floats[:, :bs]
        greedy, sampled = sample_device(logits, floats[_TEMP], floats[_TOP_P], ints[_SEED],
                                        ints[_POS])
        self.d_greedy[:bs].copy_(greedy)
        self.d_sampled[:bs].copy_(sampled)
        self.d_is_greedy[:bs].copy_(ints[_GREEDY] != 0)

    def _read_flag_polled(self, bs: int, how: str) -> bool:
        """Case 1's readback with no sync call: copy the flag into pinned memory
        (cudaMemcpyAsync DtoH), record an event, wait on it (polling), read the host value."""
        if how == "all":
            self.h_flag.copy_(self.d_is_greedy[:bs].all(), non_blocking=True)
        else:
            self.h_flags[:bs].copy_(self.d_is_greedy[:bs], non_blocking=True)
        self.flag_done.record()
        self.waiter.wait(self.flag_done)
        return bool(self.h_flag) if how == "all" else all(self.h_flags[:bs].tolist())

    def wait(self, step: _InFlight) -> None:
        """Block the host until ``step``'s tokens are in host memory."""
        self.waiter.wait(step.done)

    def close(self) -> None:
        self.waiter.close()

    def release_graphs(self) -> None:
        """Drop and reset every captured graph (before a TP process group is destroyed)."""
        self.graphs.clear()
        self.backend.release_graphs()


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
    """Scheduler, runner and output processor, driven by the overlap loop in ``run``."""

    def __init__(self, model_cfg: ModelConfig, cfg: EngineConfig, backend: Backend,
                 tp=None) -> None:
        self.cfg, self.backend = cfg, backend
        self.tokenizer = Tokenizer(model_cfg.vocab)
        self.scheduler = Scheduler(cfg.max_batch, cfg.graph_batch_sizes)
        self.workload = Workload(cfg, self.tokenizer, model_cfg.max_seq)
        self.runner = ModelRunner(model_cfg, cfg, backend, self.scheduler.batch_sizes, tp)
        self.output = OutputProcessor(cfg)

    def run(self) -> RunResult:
        try:
            return self._run()
        finally:
            self.runner.close()

    def _run(self) -> RunResult:
        cfg, be, runner, output = self.cfg, self.backend, self.runner, self.output
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
                    ints, floats = runner.prepare(rows, bs)
                with be.phase("launch"):
                    start, end = be.event(timing=True), be.event(timing=True)
                    runner.launch(k, bs, ints, floats, start)
                    end.record()
                    starts.append(start)
                    ends.append(end)
                with be.phase("sample"):
                    current = runner.sample(k, rows, bs)
                waited = prev if cfg.overlap else current
                with be.phase("wait_prev"):
                    if waited is not None:
                        runner.wait(waited)
                if waited is not None:
                    with be.phase("post"):
                        emitted = output.post(waited)
                    with be.phase("detokenize"):
                        output.detokenize(emitted)
                prev = current if cfg.overlap else None
        if prev is not None:
            runner.wait(prev)
            output.detokenize(output.post(prev))
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


def piecewise(runner: ModelRunner, bs: int):
    """vLLM-style piecewise CUDA graphs: the layers split into ``cfg.pieces`` graphs, replayed
    one after another, each handing its hidden states to the next through an eager copy
    (where vLLM runs attention eagerly between its pieces). The first piece also embeds the
    tokens, the last one also samples, as the one-graph ``_forward_fn`` does; the tokens are
    the same. Returns the callable that replays the whole step."""
    model, be, n = runner.model, runner.backend, len(runner.model.layers)
    count = min(runner.cfg.pieces, n)
    bounds = [round(i * n / count) for i in range(count + 1)]
    # static hidden states: each piece writes `out`, the eager copy moves it to `inp`
    out = torch.zeros((runner.cfg.max_batch, model.cfg.d_model), device=be.device,
                      dtype=be.dtype)
    inp = torch.zeros_like(out)

    def piece(i: int):
        def fn() -> None:
            ints = runner.d_ints[:, :bs]
            h = model.embed[runner.step_tokens(bs)] if i == 0 else inp[:bs]
            h = model.layers_forward(h, ints[_POS], runner.cache, bounds[i], bounds[i + 1])
            if i < count - 1:
                out[:bs].copy_(h)
            else:
                runner.finish_step(bs, model.head(h))
        return fn

    replays = [be.capture(piece(i)) for i in range(count)]

    def step() -> None:
        for i, replay in enumerate(replays):
            if i:
                inp[:bs].copy_(out[:bs])
            replay()
    return step
