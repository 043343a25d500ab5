"""``python -m engine_under_test --mode case1 --steps 300``: run the loop, print its speed."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from .backend import make_backend
from .config import MODES, EngineConfig, ModelConfig
from .engine import Engine


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m engine_under_test", description=__doc__)
    p.add_argument("--mode", choices=MODES, default="healthy",
                   help="healthy, case1 (GPU->CPU readback after launch), case2 (pageable "
                        "inputs copied at launch) or both")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=128, help="max batch = KV-cache slots")
    p.add_argument("--layers", type=int, help="override the model's layer count")
    p.add_argument("--tiny", action="store_true", help="a tiny model, for CPU runs")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--sync", action="store_true", help="the plain synchronous loop (no overlap)")
    p.add_argument("--readback", choices=("all", "tolist"), default="all",
                   help="how case1 reads the GPU flag back: `.all()` (the seed's line) or `.tolist()`")
    p.add_argument("--stall-every", type=int, default=1, metavar="N",
                   help="case1 reads back only on every Nth step (intermittent stalls)")
    p.add_argument("--host-work-us", type=float, default=0.0, metavar="US",
                   help="extra CPU work per step, making the engine CPU-bound")
    p.add_argument("--json", metavar="PATH", help="also write the metrics as JSON")
    a = p.parse_args(argv)
    model = ModelConfig.tiny() if a.tiny else ModelConfig()
    if a.layers:
        model = dataclasses.replace(model, n_layers=a.layers)
    cfg = EngineConfig(mode=a.mode, steps=a.steps, seed=a.seed, max_batch=a.batch,
                       warmup_steps=min(20, a.steps // 5), overlap=not a.sync,
                       initial_requests=a.batch, readback=a.readback,
                       stall_every=a.stall_every, host_work_us=a.host_work_us)
    backend = make_backend(a.device)
    result = Engine(model, cfg, backend).run()
    metrics = dict(mode=a.mode, steps=result.steps, steps_per_s=round(result.steps_per_s, 2),
                   tokens_per_s=round(result.tokens_per_s, 1),
                   gpu_busy=None if result.gpu_busy is None else round(result.gpu_busy, 4),
                   finished=len(result.finished), tokens_digest=result.digest,
                   device=backend.device.type)
    busy = "n/a (no GPU)" if result.gpu_busy is None else f"{result.gpu_busy:.1%}"
    print(f"mode={a.mode} steps={result.steps} steps/s={result.steps_per_s:.1f} "
          f"tokens/s={result.tokens_per_s:.0f} gpu_busy={busy} finished={len(result.finished)} "
          f"tokens={result.digest}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(metrics, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
