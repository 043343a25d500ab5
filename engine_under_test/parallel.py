"""Tensor parallel over ``torch.distributed``: one process per rank, all in lockstep.

``python -m engine_under_test --tp 2`` re-executes itself once per rank (``launch``): each child
is a fresh ``python -m engine_under_test`` with ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR`` and ``MASTER_PORT`` set, as ``torchrun`` would set them (so ``torchrun`` works
too), and nsys, which follows exec'd children, profiles every rank into one report. The parent
never touches CUDA; it waits for the ranks and ends the others when one fails.

Each rank initialises NCCL on ``cuda:LOCAL_RANK`` (gloo on the CPU backend), warms the
communicator up with an eager all-reduce before any graph capture, and at exit frees its CUDA
graphs before ``destroy_process_group()`` (which hangs while a graph holding NCCL work is
alive). The exit is guarded: ``faulthandler`` prints every thread's stack and exits after
``EXIT_TIMEOUT_S``, and ``SIGALRM`` (default action: terminate) backs it up a few seconds later
even if a hung call holds the GIL.
"""

from __future__ import annotations

import datetime
import faulthandler
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# NVLink multicast (NVLS) is unavailable on the lent GPU machines: NCCL and torch's symmetric
# memory must not try it
NCCL_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
            "NVSHMEM_DISABLE_NVLS": "1"}
EXIT_TIMEOUT_S = 20.0  # gathering the metrics and destroying the group
TEARDOWN_TIMEOUT_S = 60.0  # then the interpreter's exit, with the profiler's flush
INIT_TIMEOUT_S = 120.0  # collectives (and the rendezvous) give up after this
_GRACE_S = 10.0  # after one rank fails, how long the others get before they are killed


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world: int
    local_rank: int


def rank_from_env() -> RankInfo | None:
    """This process's rank when started as a worker (by ``launch`` or torchrun), else None."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return None
    world = int(os.environ["WORLD_SIZE"])
    rank = int(os.environ["RANK"])
    return RankInfo(rank, world, int(os.environ.get("LOCAL_RANK", rank)))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(argv: list[str], tp: int) -> int:
    """Run ``python -m engine_under_test ARGV`` once per rank and wait; the worst exit code."""
    root = str(Path(__file__).resolve().parent.parent)  # so the children import this package
    base = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()),
                WORLD_SIZE=str(tp))
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [root, base.get("PYTHONPATH")]))
    for key, value in NCCL_ENV.items():
        base.setdefault(key, value)
    procs = [subprocess.Popen([sys.executable, "-m", "engine_under_test", *argv],
                              env=dict(base, RANK=str(r), LOCAL_RANK=str(r)))
             for r in range(tp)]
    failed_at = None
    try:
        while any(p.poll() is None for p in procs):
            if failed_at is None and any(p.poll() not in (None, 0) for p in procs):
                failed_at = time.monotonic()
            if failed_at is not None and time.monotonic() - failed_at > _GRACE_S:
                for r, p in enumerate(procs):
                    if p.poll() is None:
                        print(f"engine_under_test: rank {r} still running after another "
                              "rank failed: killing it", file=sys.stderr)
                        p.kill()
            time.sleep(0.05)
    except KeyboardInterrupt:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
        return 130
    codes = [p.wait() for p in procs]
    bad = [c for c in codes if c != 0]
    return (bad[0] if bad[0] > 0 else 1) if bad else 0


class TensorParallel:
    """This rank's process group: ``all_reduce`` for the model, ``gather`` for the metrics.

    (torch is imported here, not at the top: the launching parent never imports it.)"""

    def __init__(self, info: RankInfo, device) -> None:
        import torch
        import torch.distributed as dist

        self.dist, self.info, self.device = dist, info, device
        if device.type == "cpu":  # ranks share the cores: spinning OpenMP threads starve gloo
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // info.world))
        for key, value in NCCL_ENV.items():
            os.environ.setdefault(key, value)
        timeout = datetime.timedelta(seconds=INIT_TIMEOUT_S)
        if device.type == "cuda":
            dist.init_process_group("nccl", rank=info.rank, world_size=info.world,
                                    timeout=timeout, device_id=device)
        else:
            dist.init_process_group("gloo", rank=info.rank, world_size=info.world,
                                    timeout=timeout)
        # warm-up: the communicator is set up eagerly, outside any graph capture
        probe = torch.full((8,), float(info.rank + 1), device=device)
        dist.all_reduce(probe)
        expect = info.world * (info.world + 1) / 2
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if not bool((probe == expect).all()):
            raise RuntimeError(f"warm-up all-reduce gave {probe.tolist()}, expected {expect}")

    @property
    def rank(self) -> int:
        return self.info.rank

    @property
    def world(self) -> int:
        return self.info.world

    def all_reduce(self, t):
        """Sum over ranks, in place; captured into the decode graph on CUDA."""
        self.dist.all_reduce(t)
        return t

    def gather(self, obj: object) -> list:
        """Every rank's ``obj``, in rank order (an eager collective: after the run only)."""
        out: list = [None] * self.world
        self.dist.all_gather_object(out, obj)
        return out

    def shutdown(self, release_graphs) -> None:
        """Free the graphs, then destroy the group; the caller has armed ``guard_exit``."""
        import torch

        release_graphs()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.dist.destroy_process_group()


def guard_exit(seconds: float = EXIT_TIMEOUT_S) -> None:
    """From now on the process ends within ``seconds`` (+5 s), whatever hangs. Calling it
    again re-arms both timers (e.g. a longer one for the interpreter's own teardown, during
    which a profiler such as nsys flushes its buffers)."""
    faulthandler.cancel_dump_traceback_later()
    faulthandler.dump_traceback_later(seconds, exit=True)
    if hasattr(signal, "alarm"):
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(int(seconds) + 5)
