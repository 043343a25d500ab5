"""The engine as a server under load: what a profile of ``launch_server`` plus a benchmark
client holds, one switch each (``EngineConfig``'s serving fields):

- ``startup_check``: start-up inside the capture, each bucket's graph replayed once and
  synchronised right after its capture (the backend does it);
- ``bursts``: requests in bursts with idle gaps, where the scheduler polls an empty queue
  (``time.sleep``, no CUDA call) and the GPU has nothing to do;
- ``compact`` (``--buckets``): the batch follows the running requests, packed into the lowest
  slots, so every step replays the graph of the smallest bucket that holds it; a request
  moved down takes its KV cache rows and last token along (eager device copies);
- ``prefill``: newly admitted requests' prompts (all but the last token) run as one eager
  prefill (:meth:`Llama.extend`) between decode steps;
- ``spec_decode``: draft and verify graphs with the accepted-length readback
  (``speculative.py``);
- ``forward_thread``: the scheduler hands each step to a worker thread that launches it
  (sglang's older overlap worker) and waits on the worker's copy event itself;
- ``pinned_alloc``: fresh pinned host buffers for every step's inputs and tokens, as vLLM
  and sglang allocate them: torch's caching host allocator then queries the events of freed
  blocks (``cudaEventQuery``) before reusing them.

The decode step itself is ``ModelRunner``'s (staging, graph replay, sampling, the token copy),
so the planted bugs (``--mode``) behave as in the plain loop. A step is one NVTX range
``step N`` (phases ``compact``, ``prefill``, ``prepare``, ``launch``, ``sample``,
``wait_prev``, ``post``, ``detokenize``); the scheduling before it is a ``schedule`` range, and
idle periods have none. With ``forward_thread`` the device phases run inside a ``forward``
range on the worker thread.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from .backend import Backend
from .config import EngineConfig, ModelConfig
from .engine import ModelRunner, RunResult, _InFlight
from .output import OutputProcessor
from .scheduler import Row, Scheduler
from .tokenizer import Tokenizer
from .workload import BurstWorkload, Request, Workload


@dataclass
class _Work:
    """Everything the device does for one step, in order (the forward thread's work item)."""

    step: int
    rows: list[Row]
    bs: int
    ints: np.ndarray
    floats: np.ndarray
    moves: list[tuple[int, int]]
    prefill: list[Row]
    start: object = None
    end: object = None


@dataclass
class ServingStats:
    """What the serving loop measured besides speed, for the metrics JSON."""

    steps_per_bucket: dict[int, int] = field(default_factory=dict)
    burst_of_step: list[int] = field(default_factory=list)
    idle_s: list[float] = field(default_factory=list)
    startup_s: float = 0.0
    prefills: int = 0
    moves: int = 0
    acceptance: float | None = None


class Prefill:
    """New requests' prompts, but their last token, in one eager pass (``--prefill``): the
    token ids staged in pinned memory (double-buffered, as the step inputs), uploaded, and
    run through :meth:`Llama.extend` into the requests' cache slots. The decode step then
    feeds each prompt's last token and emits the first new one."""

    def __init__(self, runner: ModelRunner, max_prompt: int) -> None:
        self.runner = runner
        be, n = runner.backend, runner.cfg.max_batch
        self.width = max_prompt + 1  # column 0: the slot
        self.host = [be.host_buffer((n, self.width), torch.int64) for _ in range(2)]
        self.device = torch.zeros((n, self.width), dtype=torch.int64, device=be.device)

    def run(self, k: int, rows: list[Row], fresh: bool) -> None:
        ragged = [r for r in rows if len(r.request.prompt) > 1]
        if not ragged:
            return
        be, runner = self.runner.backend, self.runner
        t = max(len(r.request.prompt) - 1 for r in ragged)
        staged = np.zeros((len(ragged), self.width), dtype=np.int64)
        for i, row in enumerate(ragged):
            body = row.request.prompt[:-1]
            staged[i, 0], staged[i, 1:1 + len(body)] = row.slot, body
        if fresh:  # --pinned-alloc: a new pinned buffer every time
            self.host[k % 2] = be.host_buffer(tuple(self.host[k % 2].shape), torch.int64)
        host = self.host[k % 2]
        host.numpy()[:len(ragged)] = staged
        n = len(ragged)
        self.device[:n].copy_(host[:n], non_blocking=True)
        start = torch.zeros(n, dtype=torch.int64, device=be.device)
        runner.model.extend(self.device[:n, 1:1 + t], start, runner.cache, self.device[:n, 0])

    def warm_up(self) -> None:
        """A server's warm-up request at start-up: one eager prefill of a few prompts, so that
        the first burst's prefills do not load their kernels (the slots it writes are
        overwritten before anything reads them)."""
        be, runner = self.runner.backend, self.runner
        n, t = min(8, runner.cfg.max_batch), min(64, self.width - 1)
        slots = torch.arange(n, device=be.device)
        tokens = torch.zeros((n, t), dtype=torch.int64, device=be.device)
        runner.model.extend(tokens, torch.zeros(n, dtype=torch.int64, device=be.device),
                            runner.cache, slots)


class _ForwardThread:
    """sglang's overlap worker: a thread that runs each step's device work as it arrives and
    hands back the step's in-flight record; the scheduler thread waits on its event."""

    def __init__(self, work) -> None:
        self._work, self._in, self._out = work, queue.Queue(), queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="forward", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while (item := self._in.get()) is not None:
            try:
                self._out.put(self._work(item))
            except BaseException as e:  # handed to the scheduler thread, which raises it
                self._out.put(e)

    def submit(self, item: _Work) -> None:
        self._in.put(item)

    def result(self) -> _InFlight:
        got = self._out.get()
        if isinstance(got, BaseException):
            raise got
        return got

    def close(self) -> None:
        self._in.put(None)
        self._thread.join()


class ServingEngine:
    """Scheduler, runner and output processor driven as a server (see the module's doc)."""

    def __init__(self, model_cfg: ModelConfig, cfg: EngineConfig, backend: Backend) -> None:
        self.cfg, self.backend = cfg, backend
        self.stats = ServingStats()
        t0 = time.perf_counter()
        tokenizer = Tokenizer(model_cfg.vocab)
        self.scheduler = Scheduler(cfg.max_batch, cfg.graph_batch_sizes)
        self.workload: Workload = (BurstWorkload if cfg.bursts else Workload)(
            cfg, tokenizer, model_cfg.max_seq)
        backend.check_replays = cfg.startup_check
        sizes = self.scheduler.batch_sizes
        self.runner = ModelRunner(model_cfg, cfg, backend, () if cfg.spec_decode else sizes)
        self.spec = None
        if cfg.spec_decode:
            from .speculative import SpecDecoder
            self.spec = SpecDecoder(self.runner, model_cfg, cfg.spec_decode, sizes)
        # speculative decoding needs the prompt in the cache before its first draft
        self.prefill = (Prefill(self.runner, model_cfg.max_seq // 2)
                        if cfg.prefill or cfg.spec_decode else None)
        if self.prefill is not None:
            with backend.phase("warm_up"):
                self.prefill.warm_up()
        self.output = OutputProcessor(cfg)
        self.gpu_busy_serving: float | None = None
        self._arrived = -1  # the last step whose arrivals were taken
        backend.synchronize()
        self.stats.startup_s = time.perf_counter() - t0

    # -- the device side of one step (the forward thread's, or inline) -------------------
    def _device_step(self, w: _Work) -> _InFlight:
        be, runner, cfg = self.backend, self.runner, self.cfg
        if w.moves:
            with be.phase("compact"):
                caches = [runner.cache] + ([self.spec.draft_cache] if self.spec else [])
                for src, dst in w.moves:
                    for cache in caches:
                        cache.kv[:, :, dst].copy_(cache.kv[:, :, src])
                    runner.d_last_token[dst].copy_(runner.d_last_token[src])
        if w.prefill and self.prefill is not None:
            with be.phase("prefill"):
                self.prefill.run(w.step, w.prefill, cfg.pinned_alloc)
        if cfg.pinned_alloc:  # fresh pinned staging: the old buffers go back to torch's cache
            n = cfg.max_batch
            runner.h_ints[w.step % 2] = be.host_buffer((5, n), torch.int64)
            runner.h_floats[w.step % 2] = be.host_buffer((2, n), torch.float32)
            runner.h_tokens[w.step % 2] = be.host_buffer((n,), torch.int64)
            if self.spec is not None:
                self.spec.h_tokens[w.step % 2] = be.host_buffer((n, cfg.spec_decode + 1),
                                                                torch.int64)
        with be.phase("launch"):
            runner.launch(w.step, w.bs, w.ints, w.floats, w.start)
        with be.phase("sample"):
            sample = self.spec.sample if self.spec is not None else runner.sample
            current = sample(w.step, w.rows, w.bs)
            w.end.record()  # type: ignore[attr-defined]
        return current

    def _forward(self, w: _Work) -> _InFlight:
        with self.backend.phase("forward"):
            return self._device_step(w)

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> RunResult:
        worker = _ForwardThread(self._forward) if self.cfg.forward_thread else None
        try:
            return self._run(worker)
        finally:
            if worker is not None:
                worker.close()
            self.runner.close()

    def _schedule(self, k: int, requests: dict[int, Request]) -> tuple[list, list, list]:
        """Free finished slots (and pack the rest), admit this step's arrivals, and pick the
        rows: ``(rows, moves, admitted)``. With a prefill, admitted requests skip to their
        prompt's last token (the prefill writes the rest)."""
        sched = self.scheduler
        sched.release_finished()
        moves = sched.compact() if self.cfg.compact else []
        arrivals = self.workload.arrivals(k) if k > self._arrived else []
        self._arrived = k
        requests.update((r.rid, r) for r in arrivals)
        sched.admit(arrivals)
        rows = sched.next_batch()
        admitted = [r for r in rows if r.request.fed == 0]
        if admitted and self.prefill is not None:
            for row in admitted:
                row.request.fed = max(len(row.request.prompt) - 1, 0)
            rows = sched.next_batch()  # the admitted rows now emit a token this step
            slots = {row.slot for row in admitted}
            admitted = [row for row in rows if row.slot in slots]
        return rows, moves, admitted

    def _run(self, worker: _ForwardThread | None) -> RunResult:
        cfg, be, runner, stats = self.cfg, self.backend, self.runner, self.stats
        requests: dict[int, Request] = {}
        pending: list[_InFlight | None] = []  # launched, not yet post-processed, oldest first
        starts, ends = [], []
        bursts = self.workload if isinstance(self.workload, BurstWorkload) else None
        t_warm, generated_at_warmup, idle_at_warmup = time.perf_counter(), 0, 0.0
        burst = k = 0
        timing = False
        while k < cfg.steps:
            if not timing and k >= cfg.warmup_steps:
                timing = True
                # timing starts here (no device sync: it would stall the loop it measures)
                t_warm = time.perf_counter()
                generated_at_warmup = sum(len(r.output) for r in requests.values())
                idle_at_warmup = sum(bursts.idle_s) if bursts else 0.0
            with be.phase("schedule"):
                rows, moves, admitted = self._schedule(k, requests)
            if not rows:
                if pending:  # the last steps of a burst: wait on them, nothing to launch
                    self._finish_step(pending, worker)
                    continue
                if bursts is None or bursts.finished:
                    break
                bursts.idle()  # nothing in flight: the GPU idles, the host polls its queue
                if bursts.finished:
                    break
                burst += 1
                self._arrived = k - 1  # the new burst's first requests arrive now
                continue
            bs = self.scheduler.padded_size(rows)
            with be.phase(f"step {k}"):
                with be.phase("prepare"):
                    ints, floats = runner.prepare(rows, bs)
                start, end = be.event(timing=True), be.event(timing=True)
                work = _Work(k, rows, bs, ints, floats, moves, admitted, start, end)
                starts.append(start)
                ends.append(end)
                stats.moves += len(moves)
                stats.prefills += bool(admitted and self.prefill is not None)
                stats.steps_per_bucket[bs] = stats.steps_per_bucket.get(bs, 0) + 1
                stats.burst_of_step.append(burst)
                if worker is None:
                    pending.append(self._device_step(work))
                else:
                    worker.submit(work)
                    pending.append(None)  # the worker hands it back when waited on
                if len(pending) > (1 if cfg.overlap else 0):
                    self._finish_step(pending, worker)
            k += 1
        while pending:
            self._finish_step(pending, worker)
        be.synchronize()
        stats.idle_s = list(bursts.idle_s) if bursts else []
        stats.acceptance = self.spec.acceptance if self.spec is not None else None
        idle = sum(stats.idle_s) - idle_at_warmup
        serving = max(time.perf_counter() - t_warm - idle, 1e-9)
        generated = sum(len(r.output) for r in requests.values()) - generated_at_warmup
        self.gpu_busy_serving = self._busy(starts, ends, stats.burst_of_step)
        return RunResult(
            steps=k, seconds=serving, steps_per_s=max(k - cfg.warmup_steps, 1) / serving,
            tokens_per_s=generated / serving, gpu_busy=self._busy(starts, ends, None),
            outputs={rid: r.output for rid, r in requests.items()},
            finished={rid: r.finish_reason for rid, r in requests.items() if r.done})

    def _finish_step(self, pending: list, worker: _ForwardThread | None) -> None:
        """Wait on the oldest launched step and post-process it (inside a step's range)."""
        with self.backend.phase("wait_prev"):
            waited = self._resolve(pending.pop(0), worker)
            self.runner.wait(waited)
        with self.backend.phase("post"):
            emitted = self.output.post(waited)
        with self.backend.phase("detokenize"):
            self.output.detokenize(emitted)

    @staticmethod
    def _resolve(inflight, worker: _ForwardThread | None) -> _InFlight:
        return worker.result() if inflight is None else inflight

    def _busy(self, starts: list, ends: list, burst_of_step: list[int] | None) -> float | None:
        """Fraction of the time from the first timed step to the last that the GPU spent in
        the decode steps' graphs: over the whole span (idle periods included), or with
        ``burst_of_step`` over each burst's own span (from its first step to its last)."""
        warm = self.cfg.warmup_steps
        if self.backend.device.type != "cuda" or len(starts) - warm < 2:
            return None
        elapsed = self.backend.elapsed_ms
        busy = sum(elapsed(s, e) for s, e in zip(starts[warm:], ends[warm:], strict=True))
        if burst_of_step is None:
            return busy / elapsed(starts[warm], ends[-1])
        span, ids = 0.0, burst_of_step[warm:]
        for b in sorted(set(ids)):
            first = warm + ids.index(b)
            last = warm + len(ids) - 1 - ids[::-1].index(b)
            span += elapsed(starts[first], ends[last])
        return busy / span
