"""The terminal report: verdict first, then the numbers, then what to fix.

Every line is wrapped to ``width`` columns (the CLI passes the terminal's width; 80 by
default), continuation lines indented under their label.
"""

from __future__ import annotations

from typing import Any

from ..model import LatentSite, LaunchClass, StallSite, Summary
from ..util.text import DEFAULT_WIDTH, wrap
from ..util.units import pct, plural, timeline_span, times_in, triple, us
from .base import as_summary

#: what "host never waited" counts, wherever the row is shown
NEVER_WAITED = "no host call waited on their GPU work"
#: the hint when a stall's line was found but not its text
SOURCE_ROOT_HINT = "source file not found here: pass --source-root DIR"


def header(s: Summary) -> str:
    t = s.trace
    gpu = ", ".join(t.gpus) or "GPU unknown"
    read = f", read from {timeline_span(*t.time_range_ns)}" if t.time_range_ns else ""
    return f"{t.path}  ({captured_by(t.nsys_version, t.schema_version)}, {gpu}, " \
           f"graph trace: {t.graph_trace}{read})"


def captured_by(nsys_version: str, schema_version: str | None = None) -> str:
    """What made the trace: ``nsys 2025.3.1, schema 3.11`` or ``torch.profiler`` (a Kineto
    trace has no nsys version; its reader sets it to ``none``)."""
    if nsys_version == "none":
        return f"torch.profiler, {schema_version}" if schema_version else "torch.profiler"
    return f"nsys {nsys_version}" + (f", schema {schema_version}" if schema_version else "")


def verdict(s: Summary) -> str:
    """The verdict, its times in the report's units (``1.92 ms``, not ``1918.05 us``)."""
    return times_in(s.verdict)


def metrics_rows(s: Summary) -> list[tuple[str, str]]:
    rate = f"{s.launches_per_s:.1f}" if s.launches_per_s is not None else "n/a"
    if s.steps_per_s is not None:
        rate += f"  (NVTX steps/s {s.steps_per_s:.1f})"
    # the last launch on each stream, and any whose GPU work is missing from the trace
    unjudged = s.launches - s.warmup_launches - s.steady_launches
    return [
        ("graph launches",
         f"{s.launches}  (warm-up {s.warmup_launches}, steady {s.steady_launches}"
         + (f", not judged {unjudged})" if unjudged else ")")),
        ("stalls gpu_to_cpu (case 1)", str(s.stalls.get(LaunchClass.GPU_TO_CPU, 0))),
        ("stalls cpu_to_gpu (case 2)", str(s.stalls.get(LaunchClass.CPU_TO_GPU, 0))),
        ("stalls other", str(s.stalls.get(LaunchClass.OTHER_STALL, 0))),
        ("launch-bound gaps", str(s.classes.get(LaunchClass.LAUNCH_BOUND, 0))),
        ("host never waited", f"{s.no_wait}  ({NEVER_WAITED})"),
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


LATENT_HEADING = "Also seen, not (yet) costing you"


def latent_reason(s: Summary) -> str:
    """Why the latent sites (:class:`LatentSite`) of ``s`` cost nothing yet."""
    return "fix the stalls above and these are next" if sum(s.stalls.values()) else \
        "the host is behind the GPU anyway; once it keeps ahead, these would stall it"


def latent_line(x: LatentSite) -> str:
    return (f"{x.kind}: {x.api_chain} in {x.where} on {x.steps}/{x.steady_steps} steady steps "
            f"({x.calls} calls, {us(x.mean_call_us)} each)")


def _processes(s: Summary, width: int) -> list[str]:
    """A table of the processes when it fits ``width``, else one wrapped block each; then each
    process's verdict."""
    rows = process_rows(s)
    table = _table(PROCESS_COLUMNS, rows)
    if max(len(line) for line in table) <= width:
        out = table
    else:
        out = []
        for row in rows:
            out += wrap(", ".join(f"{k} {v}" for k, v in zip(PROCESS_COLUMNS[1:], row[1:],
                                                               strict=True)),
                        width, f"  pid {row[0]}: ", "    ")
    for p in s.processes:
        out += wrap(times_in(p.verdict), width, f"  pid {p.pid}: ", "    ")
    return out


def _table(header_row: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header_row, *rows]) for i in range(len(header_row))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in [header_row, *rows]]


def split_sites(s: Summary) -> tuple[list[StallSite], list[StallSite]]:
    """The summary's stall sites, and its launch-bound gaps (no stall: the host was late)."""
    stalls = [x for x in s.sites if x.klass != LaunchClass.LAUNCH_BOUND]
    late = [x for x in s.sites if x.klass == LaunchClass.LAUNCH_BOUND]
    return stalls, late


def _site_lines(i: int, site: StallSite, width: int, rate: float | None) -> list[str]:
    out = wrap(f"{site.klass}: {plural(site.count, 'launch', 'launches')}, "
               f"{us(site.lost_us)} GPU idle -- {site.where}", width, f" #{i} ", "     ")
    if site.speedup_if_fixed:
        out += wrap(f"fixing it -> "
                    f"{gain(rate, site.speedup_if_fixed, site.launches_per_s_if_fixed)}", width,
                    "     gain:  ",
                    " " * 12)
    if site.source:
        src = site.source
        text = f"{src.text.strip()}  " if src.text else f"({SOURCE_ROOT_HINT})  "
        out += wrap(f"{text}(in {src.function}; {src.samples} samples, {src.agreement:.0%} of "
                    "those in the blocks)", width, "     line:  ", " " * 12)
    if site.api_chain:
        out += wrap(chain(site), width, "     chain: ", " " * 12)
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
    if len(s.processes) > 1:
        out += ["", f"Processes ({len(s.processes)}; the numbers above are their totals)"]
        out += _processes(s, w)
    stalls, late = split_sites(s)
    if stalls:
        out += ["", "Top stall sites (biggest projected gain first)"]
        for i, site in enumerate(stalls, 1):
            out += _site_lines(i, site, w, s.launches_per_s)
    if late:
        out += _late_lines(late, w)
    if s.latent:
        out += ["", *wrap(f"{LATENT_HEADING} ({latent_reason(s)})", w, "", "")]
        for x in s.latent:
            out += wrap(latent_line(x), w, "  - ", "    ")
    if s.notes:
        out += ["", "Notes"]
        for n in s.notes:
            out += wrap(n, w, "  - ")
    return "\n".join(out) + "\n"
