"""Sizes and switches of the engine under test, in one place."""

from __future__ import annotations

from dataclasses import dataclass

MODES = ("healthy", "case1", "case2", "both")
# names for what the planted bugs do; the short names stay the canonical ones (traces, metrics
# and scripts use them)
MODE_ALIASES = {"readback-after-launch": "case1", "pageable-inputs": "case2"}
WAITS = ("sync", "poll", "poll-async")


def canonical_mode(mode: str) -> str:
    """``readback-after-launch`` -> ``case1``, ``pageable-inputs`` -> ``case2``; others as given."""
    return MODE_ALIASES.get(mode, mode)


def bucket_sizes(count: int, max_batch: int) -> tuple[int, ...]:
    """``count`` graph batch sizes up to ``max_batch``, shaped like a server's capture list
    (sglang: 1, 2, 4, 8, then every 8): powers of two up to 8, then evenly spaced to
    ``max_batch``. Fewer when ``max_batch`` is too small to hold ``count`` sizes."""
    small = [s for s in (1, 2, 4, 8) if s < max_batch][:max(count - 1, 0)]
    rest = count - len(small)  # >= 1: the last is max_batch
    low = small[-1] if small else 0
    spaced = [round(low + (max_batch - low) * (i + 1) / rest) for i in range(rest)]
    return tuple(sorted({*small, *(s for s in spaced if s >= 1)}))


@dataclass(frozen=True)
class ModelConfig:
    """A Llama-like decoder: Llama-3-8B-shaped layers, only a few of them.

    Few, wide layers keep the decode graph near 200 kernels, so a 5000-step nsys trace stays
    small. The long context makes attention read 4.8 GB of KV cache per step, so the step takes
    about 3.3 ms at batch 128 on an H200: under nsys, whose node-level graph tracing makes a
    ``cudaGraphLaunch`` cost ~0.4 ms of host time, the healthy loop still keeps ahead of the GPU.
    """

    vocab: int = 32000
    d_model: int = 4096
    n_layers: int = 6
    n_heads: int = 32
    n_kv_heads: int = 8
    head_dim: int = 128
    ffn: int = 14336
    max_seq: int = 1536
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    init_std: float = 0.02

    @classmethod
    def tiny(cls) -> "ModelConfig":
        """A model small enough for CPU tests, with the same architecture."""
        return cls(vocab=2048, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16,
                   ffn=128, max_seq=128)


@dataclass(frozen=True)
class EngineConfig:
    """How the engine runs: the planted bugs, batching and the synthetic workload."""

    mode: str = "healthy"
    steps: int = 300
    seed: int = 0
    max_batch: int = 128
    graph_batch_sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 96, 128)
    # workload: requests arrive per step (Poisson); lengths are uniform in these ranges
    arrivals_per_step: float = 3.0
    initial_requests: int = 128
    prompt_len: tuple[int, int] = (4, 48)
    max_new_tokens: tuple[int, int] = (16, 160)
    greedy_fraction: float = 0.5
    stop_string_fraction: float = 0.25
    warmup_steps: int = 20
    overlap: bool = True
    # variants of the planted bugs, for the shapes an analysis meets in the wild
    readback: str = "all"  # case 1 written as `.all()` or as `.tolist()`
    stall_every: int = 1  # case 1 only on every Nth step
    host_work_us: float = 0.0  # extra CPU work per step in `post`: a CPU-bound engine
    # the device->host copy of each step's tokens on a side stream (vLLM's async output copy);
    # case 1 then waits on this step's copy event right after the launch instead of `.all()`
    output_copy: bool = False
    wait: str = "sync"  # how the host waits on events: sync, poll or poll-async
    # piecewise CUDA graphs (vLLM's default for mixed batches): each step's layers split into
    # this many graphs, replayed one after another with an eager op between them
    pieces: int = 1
    # tensor parallel: this process's rank, and the ranks that plant case 1 (None: all)
    rank: int = 0
    readback_ranks: tuple[int, ...] | None = None
    # a server under load (``serving.py``; any of these runs the serving loop):
    # start-up: after capturing each bucket's graph, replay it once and synchronise (a check)
    startup_check: bool = False
    # bursty requests: this many requests per burst, arriving ``burst_rate`` a step, and
    # ``idle_ms`` of idle (the scheduler polls an empty queue, no CUDA call) after each burst
    bursts: tuple[int, ...] = ()
    burst_rate: int = 8
    idle_ms: float = 600.0
    # the batch follows the running requests: kept packed in the lowest slots (a finished
    # request's slot is refilled by moving the highest one down), so each step replays the
    # graph of the smallest captured size that holds it
    compact: bool = False
    prefill: bool = False  # new requests' prompts run as one eager prefill between decode steps
    spec_decode: int = 0  # speculative decoding: this many draft replays + one verify a step
    forward_thread: bool = False  # a worker thread launches; the scheduler waits on its events
    pinned_alloc: bool = False  # fresh pinned host buffers every step (vLLM's, sglang's habit)

    @property
    def serving(self) -> bool:
        """Whether the serving loop (``serving.py``) runs instead of the plain decode loop."""
        return bool(self.startup_check or self.bursts or self.compact or self.prefill
                    or self.spec_decode or self.forward_thread or self.pinned_alloc)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", canonical_mode(self.mode))
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.readback not in ("all", "tolist"):
            raise ValueError(f"readback must be 'all' or 'tolist', not {self.readback!r}")
        if self.wait not in WAITS:
            raise ValueError(f"wait must be one of {', '.join(WAITS)}, not {self.wait!r}")
        if self.pieces < 1:
            raise ValueError(f"pieces must be >= 1, not {self.pieces}")
        if any(n < 1 for n in self.bursts) or self.burst_rate < 1 or not self.idle_ms >= 0:
            raise ValueError("bursts need >= 1 request each, burst_rate >= 1, idle_ms >= 0")
        if self.spec_decode < 0:
            raise ValueError(f"spec_decode must be >= 0, not {self.spec_decode}")
        if self.spec_decode and self.mode in ("case1", "both"):
            raise ValueError("speculative decoding reads the accepted lengths back every step "
                             "already: use mode healthy or case2")
        if self.spec_decode and (self.forward_thread or self.output_copy or self.pieces > 1
                                 or self.wait != "sync"):
            raise ValueError("speculative decoding runs without --forward-thread, "
                             "--output-copy, --pieces and --wait poll*")

    def _case1_at(self, step: int) -> bool:
        if self.readback_ranks is not None and self.rank not in self.readback_ranks:
            return False
        return self.mode in ("case1", "both") and step % self.stall_every == 0

    def readback_at(self, step: int) -> str | None:
        """case 1: how step ``step`` reads greedy-ness back from the GPU, or None (the fix).

        With ``output_copy`` case 1 is the early wait on the copy event instead (None here)."""
        return self.readback if self._case1_at(step) and not self.output_copy else None

    def early_wait_at(self, step: int) -> bool:
        """case 1 with ``output_copy``: wait on this step's copy event right after the launch."""
        return self.output_copy and self._case1_at(step)

    @property
    def pageable_inputs(self) -> bool:
        """case 2: stage step inputs in pageable host memory, copied at the launch."""
        return self.mode in ("case2", "both")
