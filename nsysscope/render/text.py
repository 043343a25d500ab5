"""The terminal report: verdict first, then the numbers, then what to fix."""

from __future__ import annotations

import textwrap
from typing import Any

from ..model import LaunchClass, Summary
from ..util.units import pct, triple, us
from .base import as_summary


def header(s: Summary) -> str:
    t = s.trace
    gpu = ", ".join(t.gpus) or "GPU unknown"
    return (f"{t.path}  (nsys {t.nsys_version}, schema {t.schema_version}, {gpu}, "
            f"graph trace: {t.graph_trace})")


def metrics_rows(s: Summary) -> list[tuple[str, str]]:
    rate = f"{s.launches_per_s:.1f}" if s.launches_per_s is not None else "n/a"
    if s.steps_per_s is not None:
        rate += f"  (NVTX steps/s {s.steps_per_s:.1f})"
    return [
        ("graph launches",
         f"{s.launches}  (warm-up {s.warmup_launches}, steady {s.steady_launches})"),
        ("stalls gpu_to_cpu (case 1)", str(s.stalls.get(LaunchClass.GPU_TO_CPU, 0))),
        ("stalls cpu_to_gpu (case 2)", str(s.stalls.get(LaunchClass.CPU_TO_GPU, 0))),
        ("stalls other", str(s.stalls.get(LaunchClass.OTHER_STALL, 0))),
        ("launch-bound gaps", str(s.classes.get(LaunchClass.LAUNCH_BOUND, 0))),
        ("host never waited", str(s.no_wait)),
        ("overlap window p10/p50/p90", triple(s.window_us)),
        ("GPU idle gap p10/p50/p90", triple(s.gpu_gap_us)),
        ("GPU busy", pct(s.gpu_busy)),
        ("launches/s", rate),
    ]


def render(result: Any) -> str:
    s = as_summary(result)
    out = [f"nsysscope report: {header(s)}", "", s.verdict, "",
           "Steady state (warm-up excluded)"]
    rows = metrics_rows(s)
    width = max(len(k) for k, _ in rows)
    out += [f"  {k:<{width}}  {v}" for k, v in rows]
    if s.sites:
        out += ["", "Top stall sites (most GPU idle time first)"]
        for i, site in enumerate(s.sites, 1):
            out.append(f" #{i} {site.klass}: {site.count} launches, {us(site.lost_us)} GPU idle"
                       f" -- {site.where}")
            if site.source:
                src = site.source
                text = f"{src.text.strip()}  " if src.text else ""
                out.append(f"     line:  {text}(in {src.function}; {src.samples} samples, "
                           f"{src.agreement:.0%} of those in the blocks)")
            if site.api_chain:
                out.append(f"     chain: {site.api_chain} (mean block {us(site.mean_block_us)})")
            out.append(f"     NVTX:  {site.nvtx_path or '-'}   thread: {site.thread}")
            out += textwrap.wrap(site.fix, width=96, initial_indent="     fix:   ",
                                 subsequent_indent="            ")
    if s.notes:
        out += ["", "Notes"] + [f"  - {n}" for n in s.notes]
    return "\n".join(out) + "\n"
