"""The terminal report: verdict first, then the numbers, then what to fix.

Every line is wrapped to ``width`` columns (the CLI passes the terminal's width; 80 by
default), continuation lines indented under their label.
"""

from __future__ import annotations

from typing import Any

from ..model import LaunchClass, StallSite, Summary
from ..util.text import DEFAULT_WIDTH, wrap
from ..util.units import pct, plural, times_in, triple, us
from .base import as_summary

#: what "host never waited" counts, wherever the row is shown
NEVER_WAITED = "no host call waited on their GPU work"
#: the hint when a stall's line was found but not its text
SOURCE_ROOT_HINT = "source file not found here: pass --source-root DIR"


def header(s: Summary) -> str:
    t = s.trace
    gpu = ", ".join(t.gpus) or "GPU unknown"
    return (f"{t.path}  (nsys {t.nsys_version}, schema {t.schema_version}, {gpu}, "
            f"graph trace: {t.graph_trace})")


def verdict(s: Summary) -> str:
    """The verdict, its times in the report's units (``1.92 ms``, not ``1918.05 us``)."""
    return times_in(s.verdict)


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
        ("host never waited", f"{s.no_wait}  ({NEVER_WAITED})"),
        ("overlap window p10/p50/p90", triple(s.window_us)),
        ("GPU idle gap p10/p50/p90", triple(s.gpu_gap_us)),
        ("GPU busy", pct(s.gpu_busy)),
        ("launches/s", rate),
    ]


def split_sites(s: Summary) -> tuple[list[StallSite], list[StallSite]]:
    """The summary's stall sites, and its launch-bound gaps (no stall: the host was late)."""
    stalls = [x for x in s.sites if x.klass != LaunchClass.LAUNCH_BOUND]
    late = [x for x in s.sites if x.klass == LaunchClass.LAUNCH_BOUND]
    return stalls, late


def _site_lines(i: int, site: StallSite, width: int) -> list[str]:
    out = wrap(f"{site.klass}: {plural(site.count, 'launch', 'launches')}, "
               f"{us(site.lost_us)} GPU idle -- {site.where}", width, f" #{i} ", "     ")
    if site.source:
        src = site.source
        text = f"{src.text.strip()}  " if src.text else f"({SOURCE_ROOT_HINT})  "
        out += wrap(f"{text}(in {src.function}; {src.samples} samples, {src.agreement:.0%} of "
                    "those in the blocks)", width, "     line:  ", " " * 12)
    if site.api_chain:
        out += wrap(f"{site.api_chain} (mean block {us(site.mean_block_us)})", width,
                    "     chain: ", " " * 12)
    out += wrap(f"{site.nvtx_path or '-'}   thread: {site.thread}", width, "     NVTX:  ",
                " " * 12)
    out += wrap(site.fix, width, "     fix:   ", " " * 12)
    return out


def _late_lines(late: list[StallSite], width: int) -> list[str]:
    total = sum(x.count for x in late)
    out = ["", *wrap(f"Launch-bound gaps: {plural(total, 'launch', 'launches')} with no stall, "
                     "where the GPU idled longer than the threshold before the next replay "
                     "(the host was late), longest first", width, "", "")]
    for site in late:
        out += wrap(f"{plural(site.count, 'launch', 'launches')}, {us(site.lost_us)} GPU idle "
                    f"-- {site.where}   ({site.nvtx_path or '-'}, thread {site.thread})", width,
                    "  - ")
    out += wrap(late[0].fix, width, "  fix: ", " " * 7)
    return out


def render(result: Any, width: int | None = None) -> str:
    s = as_summary(result)
    w = width or DEFAULT_WIDTH
    out = wrap(f"nsysscope report: {header(s)}", w, "", "  ")
    out += ["", *wrap(verdict(s), w, "", "  "), "", "Steady state (warm-up excluded)"]
    rows = metrics_rows(s)
    key_width = max(len(k) for k, _ in rows)
    for k, v in rows:
        out += wrap(v, w, f"  {k:<{key_width}}  ")
    stalls, late = split_sites(s)
    if stalls:
        out += ["", "Top stall sites (most GPU idle time first)"]
        for i, site in enumerate(stalls, 1):
            out += _site_lines(i, site, w)
    if late:
        out += _late_lines(late, w)
    if s.notes:
        out += ["", "Notes"]
        for n in s.notes:
            out += wrap(n, w, "  - ")
    return "\n".join(out) + "\n"
