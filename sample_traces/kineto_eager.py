"""A torch.profiler (Kineto) trace of an eager CUDA loop with no CUDA graphs.

nsysscope analyses engines that replay CUDA graphs; on this trace it must say, in one line,
that there are no graph launches (exit code 3). Run on a GPU machine:

    python3 sample_traces/kineto_eager.py OUT.pt.trace.json.gz
"""

from __future__ import annotations

import sys

import torch


def main(out: str) -> None:
    x = torch.randn(1024, 1024, device="cuda")
    w = torch.randn(1024, 1024, device="cuda")
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities, with_stack=True) as prof:
        for step in range(20):
            with torch.profiler.record_function(f"step {step}"):
                y = torch.relu(x @ w)
                if y.sum().item() > 0:  # an eager readback every step
                    x = y / y.norm()
    prof.export_chrome_trace(out)


if __name__ == "__main__":
    main(sys.argv[1])
