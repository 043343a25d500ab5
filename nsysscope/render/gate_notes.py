"""Every note the gate can carry, said: its rows of the notes' table
(:data:`nsysscope.render.notes.NOTES`), each code worded from its values as the gate decided
them (``gate/``: what two sides differ in, how processes were matched, a new pattern, a
server's start-up, idle periods and graph execs)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..util.units import us

Values = Mapping[str, Any]


def _scoped(text: str, v: Values) -> str:
    """``text`` of a check of one process, its scope first (``process1: ...``)."""
    return f"{v['scope']}: {text}" if v.get("scope") else text


def _host_pauses(v: Values) -> str:
    return _scoped(
        f"{v['side']}: host pauses (GPU idle gaps above the p{v['quantile_pct']:g} of "
        f"{us(v['cap_us'])}, longest {us(v['longest_us'])}) cost {v['cost_pct']:.1f}% of the "
        "span; excluded from the launch rate and idle fraction", v)


def _waits_now(v: Values) -> str:
    wait = v["wait_us"]
    return (f"{v['scope']}, {v['process']}, now waits {us(wait) if wait else 'longer'} per "
            f"step in {v['waits_in'] or 'collectives'}"
            + (f" for {v['waits_for']}" if v["waits_for"] is not None else "")
            + ": its longer overlap window is that wait, not an improvement")


def _waits_gone(v: Values) -> str:
    return (f"{v['scope']} (pid {v['pid']}) no longer waits {us(v['gone_us'])} per step in "
            f"{v['waits_in'] or 'collectives'}"
            + (f" for pid {v['waits_for_pid']}" if v["waits_for_pid"] is not None else "")
            + ": its shorter overlap window is that wait gone, not a regression")


def _left_out(side: Values) -> str:
    parts = []
    if side["startup_launches"] is not None:
        parts.append(f"{side['startup_launches']} start-up launches")
    if side["idle_periods"] is not None:
        parts.append(f"{side['idle_periods']} idle periods ({us(side['idle_us'])})")
    return ", ".join(parts) or "none"


def _exec(e: Values) -> str:
    if "only_in" in e:
        return f"exec {e['exec']}: only in the {e['only_in']}"
    return (f"exec {e['exec']}: {e['steady'][0]} -> {e['steady'][1]} steady, stalls "
            f"{e['stalls'][0]} -> {e['stalls'][1]}, launch-bound {e['launch_bound'][0]} -> "
            f"{e['launch_bound'][1]}, window p50 {us(e['window_us'][0])} -> "
            f"{us(e['window_us'][1])}, GPU p50 {us(e['gpu_us'][0])} -> {us(e['gpu_us'][1])}")


#: each gate note's code, and how it is said from its values
GATE_NOTES: dict[str, Callable[[Values], str]] = {
    # what the two sides differ in
    "gpu_unknown": lambda v: "the GPU of one side is unknown; assumed to be the same",
    "gpu_counts": lambda v: (
        f"baseline trace shows {v['baseline']} GPUs, candidate {v['candidate']}"),
    "nsys_versions": lambda v: (
        f"captured with different nsys versions (baseline {v['baseline']}, candidate "
        f"{v['candidate']})"),
    "steps_against_launches": lambda v: (
        "one side's steps are several graph launches (piecewise CUDA graphs) but the other is "
        "a summary from before nsysscope.summary/1.4, without steps: stalls were compared per "
        "launch, where a stall on every step is 1/N; summarize it again"),
    "graph_trace_modes": lambda v: (
        f"different --cuda-graph-trace modes (baseline {v['baseline']}, candidate "
        f"{v['candidate']}): GPU timings may differ"),
    "different_settings": lambda v: "analysed with different settings: " + ", ".join(
        f"{k} {b} vs {c}" for k, b, c in v["settings"]),
    "settings_for_trace_only": lambda v: (
        f"{' and '.join(v['options'])} analysed the trace side only: the summary "
        f"{v['summary']} keeps the settings it was written with"),
    "thresholds_from": lambda v: f"thresholds from {v['path']}",
    # what the checks left out or sampled
    "host_pauses": _host_pauses,
    "rates_as_totals": lambda v: _scoped(
        f"launch rates compared as totals over the processes: the {v['older']} summary has no "
        "per-process rates (an older nsysscope wrote it)", v),
    "sampled_distributions": lambda v: _scoped(
        f"{v['side']}: distributions are a sample of {v['sampled']} of {v['of']} steady "
        "launches", v),
    # processes
    "processes_not_listed": lambda v: (
        f"the {v['older']}'s summary does not list its processes (written before "
        "nsysscope.summary/1.1): only the totals are compared; summarize it again"),
    "process_counts": lambda v: (
        f"the baseline has {v['baseline']} processes and the candidate {v['candidate']}: only "
        "the totals are compared"),
    "process_without_values": lambda v: (
        f"process {v['process']} ({v['baseline']} -> {v['candidate']}): no per-launch values "
        "to compare"),
    "processes_matched": lambda v: f"processes matched by {v['by']}: " + ", ".join(
        f"process{i} = {b} -> {c}" for i, (b, c) in enumerate(v["pairs"])),
    "waits_for_peer_now": _waits_now,
    "waits_for_peer_gone": _waits_gone,
    # patterns not yet costing overlap
    "new_pattern": lambda v: (
        f"candidate: a new {v['kind']} pattern, not (yet) costing overlap: {v['api_chain']} in "
        f"{v['where']} on {v['steps']}/{v['steady_steps']} steady steps; it will stall once "
        "the stalls before it are fixed"),
    "more_new_patterns": lambda v: (
        f"candidate: {v['more']} more new patterns not (yet) costing overlap ('nsysscope "
        "report' lists them)"),
    # servers
    "serving_left_out": lambda v: (
        f"start-up and idle periods are left out of every check: baseline "
        f"{_left_out(v['baseline'])}; candidate {_left_out(v['candidate'])}"),
    "graph_execs": lambda v: (
        "per graph exec (a batch bucket, matched by the trace's id; most steady launches "
        "first), baseline -> candidate: " + "; ".join(_exec(e) for e in v["execs"])
        + (f"; {v['more']} more" if v["more"] else "")),
}
