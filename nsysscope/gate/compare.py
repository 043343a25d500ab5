"""The gate itself: :func:`compare` two summaries into a :class:`~nsysscope.model.GateResult`
(each side read by :mod:`.sides`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ..analysis import AnalysisConfig
from ..analysis.config import config_of
from ..model import (
    CHANGED,
    FAIL,
    IMPROVED,
    Check,
    GateResult,
    Note,
    ProcessSummary,
    Side,
    Summary,
    registry,
)
from .checks import check_comparable, run_checks
from .findings import finding, latent_notes, new_latent
from .serving import serving_notes
from .sides import summary_of
from .thresholds import GateThresholds, load_thresholds, source_note


def compare(baseline: Any, candidate: Any,
            thresholds: GateThresholds | dict[str, Any] | None = None, *,
            baseline_label: str | None = None, candidate_label: str | None = None,
            config: AnalysisConfig | None = None, nsys: str | None = None) -> GateResult:
    """Gate ``candidate`` against ``baseline``.

    Each side is a :class:`Summary` (pure comparison), or anything :func:`summary_of` reads: a
    trace path, a summary JSON path, an :class:`~nsysscope.OpenTrace` or an
    :class:`~nsysscope.Analysis` (``config`` and ``nsys`` apply when a trace is analysed).
    ``thresholds`` None: as ``nsysscope gate`` takes them, the defaults updated by the
    ``[tool.nsysscope.gate]`` table of the ``pyproject.toml`` found from the working folder
    (named in the notes).
    """
    source = None  # the thresholds first: a broken table fails before any trace is analysed
    if thresholds is None:
        t, source = load_thresholds()
    elif isinstance(thresholds, dict):
        t = GateThresholds.from_dict(thresholds)
    elif isinstance(thresholds, GateThresholds):
        t = thresholds
    else:  # a TOML file's name, say: it failed later, on a str's missing attribute
        raise TypeError(f"thresholds: a GateThresholds, a dict of them or None, not "
                        f"{type(thresholds).__name__} (from a TOML file: "
                        "nsysscope.gate.load_thresholds(path)[0])")
    config = config_of(config)
    if not isinstance(baseline, Summary):
        baseline_label = baseline_label or _label(baseline)
        baseline = summary_of(baseline, config=config, nsys=nsys)
    if not isinstance(candidate, Summary):
        candidate_label = candidate_label or _label(candidate)
        candidate = summary_of(candidate, config=config, nsys=nsys)
    base, cand = baseline, candidate
    notes = check_comparable(base, cand, (baseline_label, candidate_label))
    checks, more = run_checks(base, cand, t)
    latent = new_latent(base, cand)
    notes += more + latent_notes(latent)
    sides = {c.name: (base, cand) for c in checks}
    pairs, more = process_pairs(base, cand)
    notes += more
    for scope, b, c in pairs:
        scoped, more = run_checks(b, c, t, scope)
        scoped, more = peer_waits(scoped, b, c, scope, more)
        scoped, more = peer_waits_gone(scoped, b, c, scope, more, t)
        checks += scoped
        notes += more
        sides.update((x.name, (b, c)) for x in scoped)
    notes += serving_notes(base, cand)
    if source is not None:
        notes.append(source_note(source))
    regressions = tuple(finding(c, *sides[c.name], t) for c in checks if c.status == FAIL)
    improvements = tuple(finding(c, *sides[c.name], t) for c in checks if c.status == IMPROVED)
    passed = not regressions
    line = registry.words().gate_verdict(passed, checks, regressions, improvements, len(latent))
    return GateResult(passed=passed, verdict=line,
                      baseline=_side(base, baseline_label), candidate=_side(cand, candidate_label),
                      checks=tuple(checks), regressions=regressions, improvements=improvements,
                      note_facts=tuple(notes), thresholds=t.to_dict(), new_patterns=len(latent))


def process_pairs(base: Summary,
                  cand: Summary) -> tuple[list[tuple[str, Summary, Summary]], list[Note]]:
    """The processes of two multi-process traces, matched, each as a summary of its own:
    ``(scope, baseline, candidate)``. Processes are matched by CUDA device when each side's
    processes use distinct devices (tensor-parallel ranks), else in pid order (the order the
    engine started them). A trace with one process has no pairs: the totals are its own."""
    b, c = base.processes, cand.processes
    if len(b) < 2 and len(c) < 2:
        return [], []
    notes = []
    if not b or not c:  # a summary written before processes were listed (schema 1.0)
        notes.append(Note("processes_not_listed", {"older": "baseline" if not b else "candidate"}))
        return [], notes
    if len(b) != len(c):
        notes.append(Note("process_counts", {"baseline": len(b), "candidate": len(c)}))
        return [], notes
    by_rank = all(p.rank is not None for p in (*b, *c)) and \
        len({p.rank for p in b}) == len(b) and len({p.rank for p in c}) == len(c)
    by_device = len({p.device for p in b}) == len(b) and len({p.device for p in c}) == len(c)
    key = (lambda p: (p.rank, p.pid)) if by_rank else \
        (lambda p: (p.device, p.pid)) if by_device else (lambda p: p.pid)
    how = "rank" if by_rank else "CUDA device" if by_device else "pid order"
    out = []
    for i, (pb, pc) in enumerate(zip(sorted(b, key=key), sorted(c, key=key), strict=True)):
        if pb.distributions is None or pc.distributions is None or not pb.steady_launches \
                or not pc.steady_launches:
            notes.append(Note("process_without_values", {
                "process": i, "baseline": pb.label, "candidate": pc.label}))
            continue
        out.append((f"process{i}", process_summary(base, pb), process_summary(cand, pc)))
    notes.append(Note("processes_matched", {"by": how, "pairs": [
        [x.processes[0].label, y.processes[0].label] for _, x, y in out]}))
    return out, notes


def peer_waits(checks: list[Check], base: Summary, cand: Summary, scope: str,
               notes: list[Note]) -> tuple[list[Check], list[Note]]:
    """A tensor-parallel rank that now waits in collectives for a peer that stalls: its host
    blocks later because its GPU spins in the all-reduce, so its overlap window grows. That is
    the peer's regression, not this rank's improvement (the gate listed it under
    Improvements and never named the wait): the window check, ``changed`` as any longer
    window is (:data:`~.checks.GOALS`), says why, and so does a note."""
    pb, pc = base.processes[0], cand.processes[0]
    if pc.status != "waits_for_peer" or pb.status == "waits_for_peer":
        return checks, notes
    note = Note("waits_for_peer_now", {
        "scope": scope, "process": pc.label, "wait_us": pc.collective_wait_us.p50,
        "waits_in": pc.waits_in, "waits_for": pc.waits_for})
    said = registry.words().notes([note])[0]  # the window check's detail says it too
    out = [replace(c, detail=said) if c.status == CHANGED and c.metric == "window_p50" else c
           for c in checks]
    return out, [*notes, note]


def peer_waits_gone(checks: list[Check], base: Summary, cand: Summary, scope: str,
                    notes: list[Note], t: GateThresholds) -> tuple[list[Check], list[Note]]:
    """The other way round: a rank that waited in collectives for a stalling peer and no
    longer does. Its overlap window was that wait too, so the fix shortens it: the gate
    failed the TP=2 fix itself (rank 1 of the case-1 capture waited 1.32 ms per step in the
    all-reduce; healthy, its window is 1.14 ms shorter). A shorter window is ``changed``,
    not a regression, where the wait gone explains it: the window shrank by no more than the
    wait that went, within the window check's own tolerance."""
    pb, pc = base.processes[0], cand.processes[0]
    if pb.status != "waits_for_peer" or pc.status == "waits_for_peer":
        return checks, notes
    gone = (pb.collective_wait_us.p50 or 0.0) - (pc.collective_wait_us.p50 or 0.0)
    note = Note("waits_for_peer_gone", {
        "scope": scope, "pid": pb.pid, "gone_us": gone, "waits_in": pb.waits_in,
        "waits_for_pid": pb.waits_for_pid})
    said = registry.words().notes([note])[0]  # the window check's detail says it too

    def explained(c: Check) -> bool:
        if c.metric != "window_p50" or c.status != FAIL or c.change is None:
            return False
        slack = max(t.window_us, t.window_pct / 100 * (c.baseline or 0.0))
        return -c.change <= gone + slack

    if not any(explained(c) for c in checks):
        return checks, notes
    return [replace(c, status=CHANGED, detail=said) if explained(c) else c
            for c in checks], [*notes, note]


def process_summary(s: Summary, p: ProcessSummary) -> Summary:
    """One process of ``s`` as a summary of its own (its numbers, sites and distributions)."""
    return replace(s, launches=p.launches, steady_launches=p.steady_launches,
                   warmup_launches=p.warmup_launches, stalls=p.stalls, classes=p.classes,
                   no_wait=p.no_wait, window_us=p.window_us, gpu_gap_us=p.gpu_gap_us,
                   gpu_busy=p.gpu_busy, launches_per_s=p.launches_per_s, sites=p.sites,
                   processes=[p], distributions=p.distributions, verdict=p.verdict,
                   verdict_facts=p.verdict_facts, bursts=p.bursts)


def _side(s: Summary, label: str | None) -> Side:
    d = s.distributions
    return Side(label=label or s.trace.path, trace=s.trace.path, nsys_version=s.trace.nsys_version,
                gpus=tuple(s.trace.gpus), launches=s.launches, steady_launches=s.steady_launches,
                sampled=len(d.window_us) if d else 0, verdict=s.verdict,
                headline=s.headline.text if s.headline else "")


def _label(x: Any) -> str | None:
    if isinstance(x, (str, Path)):
        return str(x)
    path = getattr(x, "path", None)
    return str(path) if path is not None else None
