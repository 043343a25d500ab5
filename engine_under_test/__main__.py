"""``python -m engine_under_test --mode case1 --steps 300``: run the loop, print its speed.

Modes: ``healthy``; ``readback-after-launch`` (alias ``case1``: a GPU->CPU readback right after
the launch); ``pageable-inputs`` (alias ``case2``: step inputs copied from pageable memory at
the launch); ``both``. ``--tp N`` runs N ranks of one tensor-parallel engine (one process per
GPU, spawned by this command; ``torchrun`` works too); only rank 0 prints and writes ``--json``.
The serving switches (``--bursts``, ``--buckets``, ``--startup-check``, ``--prefill``,
``--spec-decode``, ``--forward-thread``, ``--pinned-alloc``) run the engine as a server under
load (``serving.py``); ``--no-nvtx`` drops the phase ranges.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import traceback

from .config import MODE_ALIASES, MODES, WAITS, EngineConfig, ModelConfig, canonical_mode

# the default model (6 layers, batch 128) decodes about 0.1 steps/s on a 2-core CPU (1 layer:
# 0.6 steps/s, with the float64 projections of the CPU backend)
_CPU_S_PER_STEP = 10.0


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage block
        self.exit(2, f"{self.prog}: error: {message}\n")


def _int_at_least(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value
    return parse


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0:  # also rejects nan
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _ranks(text: str) -> tuple[int, ...]:
    try:
        ranks = tuple(sorted({int(r) for r in text.split(",")}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma list of ranks: {text!r}") from None
    if any(r < 0 for r in ranks):
        raise argparse.ArgumentTypeError(f"ranks must be >= 0: {text!r}")
    return ranks


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m engine_under_test", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=(*MODES, *MODE_ALIASES), default="healthy",
                   help="healthy; readback-after-launch (= case1: GPU->CPU readback right after "
                        "the launch); pageable-inputs (= case2: pageable inputs copied at the "
                        "launch); both. Metrics name the short form (case1, case2).")
    p.add_argument("--steps", type=_int_at_least(1), default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=_int_at_least(1), default=128,
                   help="max batch = KV-cache slots")
    p.add_argument("--layers", type=_int_at_least(1),
                   help="the model's layer count (default 6; 6 x TP with --tp, so each rank's "
                        "graph replay stays about 3.3 ms on an H200)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--tiny", action="store_true", help="a tiny model, for CPU runs")
    size.add_argument("--full-model", action="store_true",
                      help="the full model even on a CPU (slow: prints an estimate)")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                   help="auto: cuda when torch sees a GPU (the tiny model by default on a CPU)")
    p.add_argument("--sync", action="store_true", help="the plain synchronous loop (no overlap)")
    p.add_argument("--readback", choices=("all", "tolist"), default="all",
                   help="how case1 reads the GPU flag back: `.all()` (the seed's line) or `.tolist()`")
    p.add_argument("--stall-every", type=_int_at_least(1), default=1, metavar="N",
                   help="case1 reads back only on every Nth step (intermittent stalls)")
    p.add_argument("--host-work-us", type=_non_negative, default=0.0, metavar="US",
                   help="extra CPU work per step, making the engine CPU-bound")
    p.add_argument("--output-copy", action="store_true",
                   help="copy each step's tokens to the host on a side stream (vLLM's async "
                        "output copy); case1 then waits on this step's copy event right after "
                        "the launch instead of reading `.all()` back")
    p.add_argument("--wait", choices=WAITS, default="sync",
                   help="how the host waits on events: event.synchronize(), a tight "
                        "event.query() loop, or query() + `await asyncio.sleep(0)`; the poll "
                        "modes read case1's flag back through pinned memory and an event")
    p.add_argument("--pieces", type=_int_at_least(1), default=1, metavar="N",
                   help="piecewise CUDA graphs (vLLM's, for mixed batches): each step's layers "
                        "in N graphs (at most one per layer), replayed in turn with an eager "
                        "copy between them; the tokens are the same")
    p.add_argument("--tp", type=_int_at_least(1),
                   help="tensor-parallel ranks, one process per GPU (NCCL; gloo on a CPU)")
    p.add_argument("--readback-ranks", type=_ranks, metavar="R[,R...]",
                   help="only these ranks plant case1 (default: all ranks)")
    p.add_argument("--torch-profile", metavar="PATH",
                   help="profile the run with torch.profiler; write the Kineto trace to PATH "
                        "(.json or .json.gz; .rankR is inserted per rank with --tp)")
    p.add_argument("--torch-profile-no-stack", action="store_true",
                   help="with --torch-profile: no Python stacks (with_stack=False), far less "
                        "host overhead")
    p.add_argument("--json", metavar="PATH", help="also write the metrics as JSON (rank 0)")
    server = p.add_argument_group("a server under load (serving.py; any of these runs it)")
    server.add_argument("--startup-check", action="store_true",
                        help="replay each bucket's graph once right after capturing it, and "
                             "synchronise (a server's check at start-up)")
    server.add_argument("--bursts", type=_sizes, metavar="N[,N...]",
                        help="requests in bursts of these sizes, each after the last one is "
                             "served and --idle-ms of idle; ends after a last idle period")
    server.add_argument("--burst-rate", type=_int_at_least(1), default=8, metavar="N",
                        help="requests of a burst arriving per step (8)")
    server.add_argument("--idle-ms", type=_non_negative, default=600.0, metavar="MS",
                        help="idle after each burst: the scheduler polls an empty queue (600)")
    server.add_argument("--buckets", type=_int_at_least(1), metavar="N",
                        help="N captured batch sizes (1, 2, 4, 8, then evenly spaced), and the "
                             "batch kept packed so each step replays the smallest that holds it")
    server.add_argument("--prefill", action="store_true",
                        help="admitted requests' prompts run as one eager prefill between "
                             "decode steps")
    server.add_argument("--spec-decode", type=_int_at_least(1), metavar="K",
                        help="speculative decoding: K draft replays and a verify replay a "
                             "step, the accepted lengths read back after the verify")
    server.add_argument("--forward-thread", action="store_true",
                        help="a worker thread launches each step; the scheduler thread waits "
                             "on its events (sglang's older overlap worker)")
    server.add_argument("--pinned-alloc", action="store_true",
                        help="allocate the step's pinned host buffers anew every step")
    server.add_argument("--max-new-tokens", type=_span, metavar="LO,HI",
                        help="each request's new tokens, uniform in [LO, HI) (16,160)")
    server.add_argument("--prompt-words", type=_span, metavar="LO,HI",
                        help="each prompt's words, uniform in [LO, HI) (4,48; ~1.5 tokens a "
                             "word, at most half the context)")
    server.add_argument("--no-nvtx", action="store_true",
                        help="no NVTX ranges (and no record_function ranges under "
                             "--torch-profile)")
    server.add_argument("--profile-startup", action="store_true",
                        help="with --torch-profile: profile the start-up (model, graph "
                             "capture) too, not only the run")
    return p


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(n) for n in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma list of sizes: {text!r}") from None
    if not sizes or any(n < 1 for n in sizes):
        raise argparse.ArgumentTypeError(f"sizes must be >= 1: {text!r}")
    return sizes


def _span(text: str) -> tuple[int, int]:
    low, _, high = text.partition(",")
    try:
        span = (int(low), int(high))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not LO,HI: {text!r}") from None
    if not 1 <= span[0] < span[1]:
        raise argparse.ArgumentTypeError(f"need 1 <= LO < HI: {text!r}")
    return span


def _model_bytes(m: ModelConfig, batch: int) -> int:
    """CPU memory: float32 embedding and KV cache, float64 projections and LM head."""
    q, kv = m.n_heads * m.head_dim, m.n_kv_heads * m.head_dim
    layer = m.d_model * (q + 2 * kv) + q * m.d_model + 3 * m.d_model * m.ffn
    cache = 2 * batch * kv * m.max_seq
    return 4 * (m.vocab * m.d_model + m.n_layers * cache) + 8 * (m.vocab * m.d_model
                                                                 + m.n_layers * layer)


def choose_model(a: argparse.Namespace, device: str, world: int, say) -> ModelConfig:
    """The model size: tiny on a CPU unless a size was asked for; 6 x TP layers under TP."""
    tiny = a.tiny or (device == "cpu" and not a.full_model and a.layers is None)
    if tiny and not a.tiny:
        say("engine_under_test: no GPU (device cpu): using the tiny model (--tiny); "
            "--full-model runs the full one")
    model = ModelConfig.tiny() if tiny else ModelConfig()
    if a.layers is not None:
        model = dataclasses.replace(model, n_layers=a.layers)
    elif not tiny and world > 1:
        model = dataclasses.replace(model, n_layers=model.n_layers * world)
    if device == "cpu" and not tiny:
        per_step = _CPU_S_PER_STEP * model.n_layers / 6 * a.batch / 128 / world
        say(f"engine_under_test: the full model on a CPU: about {per_step:.0f} s per step, "
            f"{per_step * a.steps / 60:.0f} min for {a.steps} steps, "
            f"{_model_bytes(model, a.batch) / 2**30:.1f} GiB of memory")
    return model


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    p = parser()
    a = p.parse_args(args)
    from .parallel import launch, rank_from_env

    info = rank_from_env()  # set when this process is a rank (spawned below, or by torchrun)
    if info is not None and info.world <= 1:
        info = None
    if info is not None and a.tp is not None and a.tp != info.world:
        p.error(f"--tp {a.tp} but WORLD_SIZE={info.world}")
    world = info.world if info else (a.tp or 1)
    for opt, path in (("--torch-profile", a.torch_profile), ("--json", a.json)):
        if path and not os.path.isdir(os.path.dirname(path) or "."):
            p.error(f"{opt} {path}: no such directory")
    _check_serving(p, a, world)
    if a.readback_ranks and max(a.readback_ranks) >= world:
        p.error(f"--readback-ranks {','.join(map(str, a.readback_ranks))}: only {world} rank(s)")
    if info is None and world > 1:
        return launch(args, world)  # the parent: spawns the ranks, never touches CUDA
    if info is None:
        return _run(a, None)
    code = 1
    try:
        code = _run(a, info)
    except SystemExit as e:
        if e.code not in (None, 0) and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # a dying rank must not hang in the process group's teardown
        traceback.print_exc()
    if code != 0:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _check_serving(p: argparse.ArgumentParser, a: argparse.Namespace, world: int) -> None:
    """The serving switches' combinations that cannot run, refused in one line."""
    if a.spec_decode and canonical_mode(a.mode) in ("case1", "both"):
        p.error("--spec-decode reads the accepted lengths back every step already: "
                "use --mode healthy or case2")
    if a.spec_decode and (a.output_copy or a.pieces > 1 or a.wait != "sync"
                          or a.forward_thread):
        p.error("--spec-decode runs without --output-copy, --pieces, --wait poll* and "
                "--forward-thread")
    if world > 1 and set(_serving(a)) - {"max_new_tokens", "prompt_len"}:
        p.error("the serving switches run on one GPU (no --tp)")
    if a.profile_startup and not a.torch_profile:
        p.error("--profile-startup needs --torch-profile")


def _serving(a: argparse.Namespace) -> dict:
    """The serving switches as EngineConfig fields (none when none is given)."""
    from .config import bucket_sizes

    fields: dict = {}
    if a.bursts:
        fields.update(bursts=a.bursts, burst_rate=a.burst_rate, idle_ms=a.idle_ms,
                      initial_requests=0)
    if a.buckets:
        fields.update(graph_batch_sizes=bucket_sizes(a.buckets, a.batch), compact=True)
    if a.max_new_tokens:
        fields["max_new_tokens"] = a.max_new_tokens
    if a.prompt_words:
        fields["prompt_len"] = a.prompt_words
    for name in ("startup_check", "prefill", "forward_thread", "pinned_alloc"):
        if getattr(a, name):
            fields[name] = True
    if a.spec_decode:
        fields["spec_decode"] = a.spec_decode
    return fields


def _engine(model, cfg, backend, tp):
    from .engine import Engine

    if cfg.serving:
        from .serving import ServingEngine
        return ServingEngine(model, cfg, backend)
    return Engine(model, cfg, backend, tp)


def _serving_metrics(engine, cfg) -> dict:
    """What a serving run measured besides speed (engine_metrics.json's serving columns)."""
    st = engine.stats
    busy = engine.gpu_busy_serving
    return dict(
        startup_s=round(st.startup_s, 3), graph_sizes=list(engine.scheduler.batch_sizes),
        startup_check=cfg.startup_check, bursts=list(cfg.bursts), idle_ms=cfg.idle_ms,
        idle_periods=len(st.idle_s), idle_s=round(sum(st.idle_s), 3),
        gpu_busy_serving=None if busy is None else round(busy, 4),
        steps_per_bucket={str(k): v for k, v in sorted(st.steps_per_bucket.items())},
        prefill=cfg.prefill or bool(cfg.spec_decode), prefill_steps=st.prefills,
        slot_moves=st.moves, spec_decode=cfg.spec_decode,
        spec_acceptance=None if st.acceptance is None else round(st.acceptance, 4),
        forward_thread=cfg.forward_thread, pinned_alloc=cfg.pinned_alloc)


def _run(a: argparse.Namespace, info) -> int:
    from .backend import make_backend, resolve_device

    rank, world = (info.rank, info.world) if info else (0, 1)
    say = print if rank == 0 else (lambda *_, **__: None)
    device = resolve_device(a.device)
    if device == "cuda" and info is not None:
        import torch
        if info.local_rank >= torch.cuda.device_count():
            raise SystemExit(f"engine_under_test: rank {rank} needs GPU {info.local_rank}, "
                             f"torch sees {torch.cuda.device_count()}")
    model = choose_model(a, device, world, say)
    backend = make_backend(device, index=info.local_rank if info else None)
    tp = None
    if info is not None:
        from .parallel import TensorParallel
        tp = TensorParallel(info, backend.device)
    cfg = EngineConfig(mode=a.mode, steps=a.steps, seed=a.seed, max_batch=a.batch,
                       warmup_steps=min(20, a.steps // 5), overlap=not a.sync,
                       readback=a.readback,
                       stall_every=a.stall_every, host_work_us=a.host_work_us,
                       output_copy=a.output_copy, wait=a.wait, rank=rank,
                       readback_ranks=a.readback_ranks, pieces=a.pieces,
                       **{"initial_requests": a.batch, **_serving(a)})
    backend.nvtx = not a.no_nvtx
    profile = contextlib.nullcontext()
    if a.torch_profile:
        from .profiling import rank_path, torch_profile
        profile = torch_profile(rank_path(a.torch_profile, rank, world), backend,
                                stacks=not a.torch_profile_no_stack, annotate=not a.no_nvtx)
    engine = None
    with contextlib.ExitStack() as stack:
        if a.profile_startup:
            stack.enter_context(profile)
        engine = _engine(model, cfg, backend, tp)
        if not a.profile_startup:
            stack.enter_context(profile)
        result = engine.run()
    mine = dict(rank=rank, steps_per_s=round(result.steps_per_s, 2),
                gpu_busy=None if result.gpu_busy is None else round(result.gpu_busy, 4),
                tokens_digest=result.digest)
    ranks = [mine]
    if tp is not None:
        from .parallel import EXIT_TIMEOUT_S, TEARDOWN_TIMEOUT_S, guard_exit
        # a rank hung in destroy_process_group() must not stay; with --torch-profile the
        # gather also waits for the slowest rank's export
        guard_exit(EXIT_TIMEOUT_S + (120 if a.torch_profile else 0))
        ranks = tp.gather(mine)
        tp.shutdown(engine.runner.release_graphs)
        guard_exit(TEARDOWN_TIMEOUT_S)
    metrics = dict(mode=cfg.mode, steps=result.steps, steps_per_s=round(result.steps_per_s, 2),
                   tokens_per_s=round(result.tokens_per_s, 1), gpu_busy=mine["gpu_busy"],
                   finished=len(result.finished), tokens_digest=result.digest,
                   device=backend.device.type, output_copy=cfg.output_copy, wait=cfg.wait,
                   tp=world, model_layers=model.n_layers,
                   graph_pieces=min(cfg.pieces, model.n_layers))
    busy = "n/a (no GPU)" if result.gpu_busy is None else f"{result.gpu_busy:.1%}"
    line = (f"mode={cfg.mode} steps={result.steps} steps/s={result.steps_per_s:.1f} "
            f"tokens/s={result.tokens_per_s:.0f} gpu_busy={busy} finished={len(result.finished)} "
            f"tokens={result.digest}")
    if cfg.serving:
        metrics.update(_serving_metrics(engine, cfg))
    if world > 1:
        agree = len({r["tokens_digest"] for r in ranks}) == 1
        metrics.update(readback_ranks=list(a.readback_ranks or range(world)), per_rank=ranks,
                       ranks_agree=agree)
        line += (f" tp={world} rank_steps/s={','.join(str(r['steps_per_s']) for r in ranks)} "
                 f"ranks_agree={'yes' if agree else 'NO'}")
    say(line)
    if a.json and rank == 0:
        with open(a.json, "w") as f:
            json.dump(metrics, f)
    sys.stdout.flush()
    return 0 if rank != 0 or world == 1 or metrics["ranks_agree"] else 3


if __name__ == "__main__":
    sys.exit(main())
