"""What every report renderer says alike (text, Markdown, HTML): the header line, the verdict,
the metric rows, the per-process table, a site's chain and gain, the latent sites; each
renderer lays them out its own way (:mod:`.text`, :mod:`.markdown`, :mod:`.html.report`)."""

from __future__ import annotations

import numpy as np

from ..model import (
    CLASS_TABLE,
    LatentSite,
    LaunchClass,
    ProcessSummary,
    StallSite,
    Summary,
    counted_steps,
    profiler_of,
)
from ..util.units import gain, pct, plural, timeline_span, triple, us

#: what "host never waited" counts, wherever the row is shown
NEVER_WAITED = "no host call waited on their GPU work"
#: the hint when a stall's line was found but not its text
SOURCE_ROOT_HINT = "source text not found: see the notes"


def header(s: Summary) -> str:
    t = s.trace
    gpu = ", ".join(t.gpus) or "GPU unknown"
    read = f", read from {timeline_span(*t.time_range_ns)}" if t.time_range_ns else ""
    return f"{t.path}  ({captured_by(t.nsys_version, t.schema_version)}, {gpu}, " \
           f"graph trace: {t.graph_trace}{read})"


def captured_by(nsys_version: str, schema_version: str | None = None) -> str:
    """What made the trace: ``nsys 2025.3.1, schema 3.11`` or ``torch.profiler, kineto 1.0``
    (:func:`~nsysscope.model.profiler_of`)."""
    tool = profiler_of(nsys_version, schema_version)
    if tool != "nsys":
        return f"{tool}, {schema_version}" if schema_version else tool
    return f"nsys {nsys_version}" + (f", schema {schema_version}" if schema_version else "")


def headline(s: Summary) -> str:
    """The report's first line: the costliest cause, its share of the GPU's time and its
    gain (:mod:`nsysscope.analysis.headline`); the verdict in a summary from before 1.5."""
    return s.headline.text if s.headline else s.verdict


def verdict_detail(s: Summary) -> str | None:
    """The verdict where the headline does not say it already: without the lead the two
    share (``OVERLAP BROKEN: ``), None where the headline is the verdict."""
    first = s.headline.text if s.headline else s.verdict
    if first == s.verdict:
        return None
    lead, sep, rest = s.verdict.partition(": ")
    return rest if sep and first.startswith(lead + sep) else s.verdict


def metrics_rows(s: Summary) -> list[tuple[str, str]]:
    rate = f"{s.rate:.1f}" if s.rate is not None else "n/a"
    notes = [servers(s)] if len(s.processes) > 1 else []
    if s.idle is not None:
        notes.insert(0, "over serving time")
    if s.steps_per_s is not None:
        notes.append(f"NVTX steps/s {s.steps_per_s:.1f}" +
                     (" over every rank" if s.rate != s.launches_per_s else ""))
    if notes:  # a TP group's ranks each launch every step: per rank, see "Processes"
        rate += f"  ({'; '.join(notes)})"
    # the last launch on each stream (and before each idle period), and any whose GPU work
    # is missing from the trace
    started = s.startup.launches if s.startup else 0
    unjudged = s.launches - started - s.warmup_launches - s.steady_launches
    busy = pct(s.gpu_busy)
    if s.idle is not None:
        busy += f" of serving time ({pct(s.gpu_busy_capture)} with the idle periods)"
    return [
        ("graph launches",
         f"{s.launches}  (" + (f"start-up {started}, " if started else "")
         + f"warm-up {s.warmup_launches}, steady {s.steady_launches}"
         + (f", not judged {unjudged})" if unjudged else ")")),
        *([("start-up (left out)", startup_row(s))] if s.startup else []),
        *([("idle (left out)", idle_row(s))] if s.idle else []),
        *((r.count_label, str(s.classes.get(r.klass, 0))) for r in CLASS_TABLE
          if r.count_label),
        ("host never waited", f"{s.no_wait}  ({NEVER_WAITED})"),
        *([("steps (launch bursts)", steps_row(s))] if counted_steps(s) else []),
        ("overlap window p10/p50/p90", triple(s.window_us) if s.window_us.p50 is not None
         or not s.steady_launches else "n/a: the host never waited on a launch"),
        ("GPU idle gap p10/p50/p90", triple(s.gpu_gap_us)),
        ("GPU busy", busy),
        ("launches/s", rate),
        *([("if every stall is fixed", if_fixed(s))] if s.if_fixed and (
            s.if_fixed.withheld or s.if_fixed.speedup and s.if_fixed.speedup > 1) else []),
    ]


def servers(s: Summary) -> str:
    """``2 processes added``, or, where ranks run collectives in groups, ``one group of 2
    ranks stepping together (190.1, 189.6 launches/s each)``: a group's ranks launch every
    step each, and step once."""
    groups: dict[int, list[ProcessSummary]] = {}
    for p in s.processes:
        if p.group is not None:
            groups.setdefault(p.group, []).append(p)
    grouped = {g: ps for g, ps in groups.items() if len(ps) > 1}
    if not grouped:
        return f"{len(s.processes)} processes added"
    each = "; ".join(", ".join("n/a" if p.launches_per_s is None else f"{p.launches_per_s:.1f}"
                               for p in ps) for ps in grouped.values())
    alone = len(s.processes) - sum(len(ps) for ps in grouped.values())
    said = (f"one group of {len(next(iter(grouped.values())))} ranks stepping together"
            if len(grouped) == 1 else f"{len(grouped)} groups of ranks, each stepping together")
    return said + f" ({each} launches/s each)" + (
        f", {alone} other process{'es' if alone != 1 else ''} added" if alone else "") + \
        (", the groups added" if len(grouped) > 1 else "")


def fix_gain(s: Summary, speedup: float | None, launches_per_s: float | None = None,
             rates: bool = True) -> str:
    """A stall site's projected gain (its ``speedup_if_fixed``), ``up to`` where the gain of
    fixing every stall is a range (:func:`if_fixed`): a site's figure is then its high end,
    as the trace cannot tell how much longer its replays run back to back."""
    ranged = s.if_fixed is not None and s.if_fixed.speedup_low is not None
    if not rates:
        return gain(None, speedup, up_to=ranged)
    return gain(s.rate, speedup, s.rate_if(speedup, launches_per_s) if speedup else None,
                up_to=ranged)


def if_fixed(s: Summary) -> str:
    """``~1.39-1.58x launches/s (191.9 -> ~267.4-302.5)``, or why there is no figure."""
    f = s.if_fixed
    assert f is not None
    if f.withheld:
        return f"not projected: {f.withheld}"
    shown = gain(s.rate, f.speedup, s.rate_if(f.speedup, f.launches_per_s))
    if f.speedup_low is None:
        return shown
    low = s.rate_if(f.speedup_low, f.launches_per_s_low)
    high = s.rate_if(f.speedup, f.launches_per_s)
    return (f"~{f.speedup_low:.2f}-{f.speedup:.2f}x launches/s" +
            (f" ({s.rate:.1f} -> ~{low:.1f}-{high:.1f})" if s.rate and low and high else ""))


def steps_row(s: Summary) -> str:
    """``98  (24 graph launches each, between two host waits; 97 stall; overlap window of the
    last launch p10/p50/p90 ...)``: shown where a step is several launches (piecewise
    graphs), whose per-launch numbers above mix every piece."""
    b = counted_steps(s)
    assert b is not None
    window = f"; overlap window of the last launch p10/p50/p90 {triple(b.window_us)}" \
        if b.window_us.p50 is not None else ""
    return (f"{b.steady}  ({b.launches_p50:g} graph launches each, between two host waits; "
            f"{b.stalled} stall, {b.launch_bound} launch-bound{window})")


PROCESS_COLUMNS = ("process", "name", "GPU", "status", "stalls", "window p50", "GPU idle p50",
                   "GPU busy", "launches/s", "waits in collectives p50")


def process_rows(s: Summary) -> list[tuple[str, ...]]:
    """One row per process (a trace with several processes), in the order of
    :data:`PROCESS_COLUMNS`: named by its rank where the trace says it; its waits in
    collectives only where it ran any."""
    return [(p.label, p.name or "-", str(p.device), p.status,
             f"{sum(p.stalls.values())}/{p.steady_launches}", us(p.window_us.p50),
             us(p.gpu_gap_us.p50), pct(p.gpu_busy),
             f"{p.launches_per_s:.1f}" if p.launches_per_s is not None else "n/a",
             "-" if not (p.collectives or p.waits_for) else
             us(p.collective_wait_us.p50) + (f" (for {p.waits_for})"
                                             if p.status == "waits_for_peer" else ""))
            for p in s.processes]


def chain(site: StallSite) -> str:
    """The site's API chain and how long its blocks lasted (and, for a polling loop, how
    many tries each took)."""
    polls = f"polled x{site.mean_polls:,.0f} per wait, " if site.mean_polls else ""
    return f"{site.api_chain} ({polls}mean block {us(site.mean_block_us)})"


def nvtx_of(site: StallSite) -> str:
    """The NVTX path of the site's first launch, and that it is the first of many where it
    is: a site gathers launches of every step, and "step 6 > sample" alone read as if step 6
    were the only one that stalled."""
    return (site.nvtx_path or "-") + first_of(site)


def first_of(site: StallSite) -> str:
    """`` (the first of N)`` after what a site shows of its first launch, where it has more."""
    return f" (the first of {site.count})" if site.nvtx_path and site.count > 1 else ""


LATENT_HEADING = "Also seen, not (yet) costing you"


def latent_reason(s: Summary) -> str:
    """Why the latent sites (:class:`LatentSite`) of ``s`` cost nothing yet."""
    return "fix the stalls above and these are next" if sum(s.stalls.values()) else \
        "the host is behind the GPU anyway; once it keeps ahead, these would stall it"


def latent_line(x: LatentSite) -> str:
    return (f"{x.kind}: {x.api_chain} in {x.where} on {x.steps}/{x.steady_steps} steady steps "
            f"({x.calls} calls, {us(x.mean_call_us)} each)")


def unlisted(s: Summary, late: bool) -> str | None:
    """``(and 15 more launches at places not listed)``: the steady stalls (``late``: the
    launch-bound gaps) the capped list of sites leaves out, or None where it holds them all
    (66 launch-bound gaps were counted and 51 listed, in silence)."""
    listed = sum(x.count for x in s.sites if (x.klass == LaunchClass.LAUNCH_BOUND) == late)
    total = s.classes.get(LaunchClass.LAUNCH_BOUND, 0) if late else sum(s.stalls.values())
    more = total - listed
    if more <= 0:
        return None
    return (f"and {plural(more, 'more launch', 'more launches')} at places not listed (the "
            "list holds the costliest places only)")


def launch_bound_total(s: Summary) -> int:
    """The steady launch-bound gaps, listed or not."""
    return s.classes.get(LaunchClass.LAUNCH_BOUND, 0)


def split_sites(s: Summary) -> tuple[list[StallSite], list[StallSite]]:
    """The summary's stall sites, and its launch-bound gaps (no stall: the host was late)."""
    stalls = [x for x in s.sites if x.klass != LaunchClass.LAUNCH_BOUND]
    late = [x for x in s.sites if x.klass == LaunchClass.LAUNCH_BOUND]
    return stalls, late


def startup_row(s: Summary) -> str:
    """``15 launches, each of 15 graphs replayed once and waited on at once (a check); 6.05 s
    from the trace's start to serving``."""
    u = s.startup
    assert u is not None
    return (f"{plural(u.launches, 'launch', 'launches')} replaying {plural(u.graphs, 'graph')} "
            f"right after capture, each waited on at once (a check); {us(u.span_us)} from the "
            "trace's start to serving")


def idle_row(s: Summary) -> str:
    """``3 periods, 1.50 s (15.8% of the capture), the longest 502.0 ms: no CUDA call and
    nothing in flight for 44.0 ms or more (20 steps of 2.20 ms; steps p10-p90 ...)``."""
    i = s.idle
    assert i is not None
    share = f" ({pct(i.share)} of the capture)" if i.share is not None else ""
    p10, p50, p90 = i.step_us
    return (f"{plural(i.periods, 'period')}, {us(i.total_us)}{share}, the longest "
            f"{us(i.longest_us)}: no CUDA call and nothing in flight for {us(i.threshold_us)} "
            f"or more ({i.threshold_us / p50:.0f} steps of {us(p50)}; steps p10-p90 "
            f"{us(p10)}-{us(p90)})" if p50 else f"{plural(i.periods, 'period')}, "
            f"{us(i.total_us)}{share}")


#: the columns of the graph execs' table
GRAPH_COLUMNS = ("exec", "steady", "GPU p50", "window p50", "idle gap p50", "stalls",
                 "launch-bound")


def graph_rows(s: Summary) -> list[tuple[str, ...]]:
    """One row per graph exec (a batch bucket), biggest GPU time first."""
    pid = len({g.pid for g in s.graphs}) > 1
    return [(f"{g.graph_exec}" + (f" (pid {g.pid})" if pid else ""), str(g.steady),
             us(g.gpu_us), us(g.window_us), us(g.gpu_gap_us), str(g.stalls),
             str(g.launch_bound)) for g in s.graphs]


def graphs_heading(s: Summary) -> str:
    return (f"Graph execs ({len(s.graphs)}: a server's batch buckets, each replayed when the "
            "batch fits it; biggest GPU time first)")


def concentration(s: Summary) -> list[str]:
    """Where the stalls and the launch-bound gaps concentrate among the graph execs:
    ``launch-bound gaps: 7 of 9 at the 3 smallest buckets (by GPU time), 12% of their
    steps``, or ``spread over 6 of 10 buckets``."""
    out = []
    for label, count in (("stalls", "stalls"), ("launch-bound gaps", "launch_bound")):
        total = sum(getattr(g, count) for g in s.graphs)
        if not total:
            continue
        smallest = sorted(s.graphs, key=lambda g: (g.gpu_us or 0.0, g.graph_exec))
        for name, order in (("smallest", smallest), ("largest", smallest[::-1])):
            held = np.cumsum([getattr(g, count) for g in order])
            k = int(np.searchsorted(held, 0.8 * total)) + 1  # the fewest holding 80 %
            if k <= len(order) // 2:
                steps = sum(g.steady for g in order[:k])
                out.append(f"{label}: {held[k - 1]} of {total} at the {k} {name} buckets (by "
                           f"GPU time), {held[k - 1] / steps:.0%} of their steps")
                break
        else:
            used = sum(1 for g in s.graphs if getattr(g, count))
            out.append(f"{label}: {total}, spread over {used} of {len(s.graphs)} buckets")
    return out
