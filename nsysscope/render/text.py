"""The terminal report: verdict first, then the numbers, then what to fix."""

from __future__ import annotations

import textwrap
from typing import Any

from ..model import LatentSite, LaunchClass, StallSite, Summary
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
        *([("if every stall is fixed", gain(s.launches_per_s, s.if_fixed.speedup,
                                             s.if_fixed.launches_per_s))]
          if s.if_fixed and s.if_fixed.speedup and s.if_fixed.speedup > 1 else []),
    ]


def gain(rate: float | None, speedup: float | None, projected: float | None = None) -> str:
    """``~1.58x launches/s (191.9 -> ~302.5)``: the projected gain of a fix."""
    if not speedup:
        return "n/a"
    projected = projected or (rate * speedup if rate else None)
    now = f" ({rate:.1f} -> ~{projected:.1f})" if rate and projected else ""
    return f"~{speedup:.2f}x launches/s{now}"


PROCESS_COLUMNS = ("pid", "process", "GPU", "status", "stalls", "window p50", "GPU idle p50",
                   "GPU busy", "launches/s", "waits in collectives p50")


def process_rows(s: Summary) -> list[tuple[str, ...]]:
    """One row per process (a trace with several processes), in the order of
    :data:`PROCESS_COLUMNS`."""
    return [(str(p.pid), p.name or "-", str(p.device), p.status,
             f"{sum(p.stalls.values())}/{p.steady_launches}", us(p.window_us.p50),
             us(p.gpu_gap_us.p50), pct(p.gpu_busy),
             f"{p.launches_per_s:.1f}" if p.launches_per_s is not None else "n/a",
             us(p.collective_wait_us.p50) + (f" (for pid {p.waits_for_pid})"
                                             if p.status == "waits_for_peer" else ""))
            for p in s.processes]


def chain(site: StallSite) -> str:
    """The site's API chain and how long its blocks lasted (and, for a polling loop, how
    many tries each took)."""
    polls = f"polled x{site.mean_polls:,.0f} per wait, " if site.mean_polls else ""
    return f"{site.api_chain} ({polls}mean block {us(site.mean_block_us)})"


def latent_line(x: LatentSite) -> str:
    return (f"{x.kind}: {x.api_chain} in {x.where} on {x.steps}/{x.steady_steps} steady steps "
            f"({x.calls} calls, {us(x.mean_call_us)} each)")


def _table(header_row: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header_row, *rows]) for i in range(len(header_row))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in [header_row, *rows]]


def render(result: Any) -> str:
    s = as_summary(result)
    out = [f"nsysscope report: {header(s)}", "", s.verdict, "",
           "Steady state (warm-up excluded)"]
    rows = metrics_rows(s)
    width = max(len(k) for k, _ in rows)
    out += [f"  {k:<{width}}  {v}" for k, v in rows]
    if len(s.processes) > 1:
        out += ["", f"Processes ({len(s.processes)}; the numbers above are their totals)"]
        out += _table(PROCESS_COLUMNS, process_rows(s))
        out += [f"  pid {p.pid}: {p.verdict}" for p in s.processes]
    if s.sites:
        out += ["", "Top stall sites (biggest projected gain first)"]
        for i, site in enumerate(s.sites, 1):
            out.append(f" #{i} {site.klass}: {site.count} launches, {us(site.lost_us)} GPU idle"
                       f" -- {site.where}")
            if site.speedup_if_fixed:
                fixed = gain(s.launches_per_s, site.speedup_if_fixed)
                out.append(f"     gain:  fixing it -> {fixed}")
            if site.source:
                src = site.source
                text = f"{src.text.strip()}  " if src.text else ""
                out.append(f"     line:  {text}(in {src.function}; {src.samples} samples, "
                           f"{src.agreement:.0%} of those in the blocks)")
            if site.api_chain:
                out.append(f"     chain: {chain(site)}")
            out.append(f"     NVTX:  {site.nvtx_path or '-'}   thread: {site.thread}")
            out += textwrap.wrap(site.fix, width=96, initial_indent="     fix:   ",
                                 subsequent_indent="            ")
    if s.latent:
        out += ["", "Also seen, not (yet) costing you (fix the stalls above and these are next)"]
        out += [f"  - {latent_line(x)}" for x in s.latent]
    if s.notes:
        out += ["", "Notes"] + [f"  - {n}" for n in s.notes]
    return "\n".join(out) + "\n"
