"""The gate's checks: each metric of the baseline against the candidate, with its rule.

``stalls.<class>`` (each of :data:`~nsysscope.model.GATED_CLASSES`), ``window_p50``,
``gpu_idle_p50``, ``gpu_idle_fraction`` (the host made the GPU wait), then ``launch_rate`` and
``gpu_work_p50`` (how fast the GPU itself went: reported, gated only on request); what each
rule is and why: README.md, "What is compared" and "The noise model, and why".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..errors import NotComparable, NothingSteady, UnreadableInput
from ..model import (
    CHANGED,
    FAIL,
    GATED_CLASSES,
    IMPROVED,
    NA,
    PASS,
    Check,
    Distributions,
    LaunchClass,
    Note,
    Summary,
    counted_steps,
)
from .stats import (
    bootstrap_median_diff,
    mann_whitney_greater,
    mann_whitney_less,
    two_proportion_greater,
)
from .thresholds import GateThresholds


def values(xs: list[float | None] | None) -> np.ndarray:
    """The finite values of a per-launch list (None: no value)."""
    v = np.asarray([np.nan if x is None else x for x in (xs or [])], dtype=float)
    finite: np.ndarray = v[np.isfinite(v)]
    return finite


def check_comparable(base: Summary, cand: Summary,
                     labels: tuple[str | None, str | None] = (None, None)) -> list[Note]:
    """Raise :class:`NotComparable`, :class:`NothingSteady` (a side with no steady launch) or
    :class:`UnreadableInput`; return notes on minor differences (nsys version, settings).
    ``labels``: what the user named each side (a summary file), said in the errors instead of
    the trace the summary was made from."""
    for name, s, label in (("baseline", base, labels[0]), ("candidate", cand, labels[1])):
        where = label or s.trace.path
        if s.distributions is None:
            raise UnreadableInput(
                f"{name} {where}: the summary has no per-launch distributions; write it "
                "with 'nsysscope summarize TRACE -o FILE.json' (or 'report --format json' of "
                "this version; an older report's JSON has none)")
        if not s.steady_launches or not len(s.distributions.klass):
            raise NothingSteady(f"{name} {where} has no steady-state launches, nothing "
                                f"steady to judge ({s.launches} graph launches, "
                                f"{s.warmup_launches} warm-up)")
    gb, gc = set(base.trace.gpus), set(cand.trace.gpus)
    if gb and gc and gb != gc:
        raise NotComparable(f"different GPUs: baseline ran on {', '.join(sorted(gb))}, "
                            f"candidate on {', '.join(sorted(gc))}")
    profilers = [s.trace.profiler_name for s in (base, cand)]
    if profilers[0] != profilers[1]:
        # torch.profiler times every aten op the host issues: the same engine's case-2 window
        # is over twice as long under it as under nsys (tests/trace/test_kineto.py), so a
        # verdict across the two would judge the profiler, not the change (issue 52)
        tools = ["an nsys capture" if p == "nsys" else f"a {p} trace" for p in profilers]
        raise NotComparable(f"different profilers: the baseline is {tools[0]} and the "
                            f"candidate {tools[1]}, which record different host timings; "
                            "gate like with like")
    notes = []
    if not gb or not gc:
        notes.append(Note("gpu_unknown"))
    elif len(base.trace.gpus) != len(cand.trace.gpus):
        notes.append(Note("gpu_counts", {"baseline": len(base.trace.gpus),
                                         "candidate": len(cand.trace.gpus)}))
    if base.trace.nsys_version != cand.trace.nsys_version:
        notes.append(Note("nsys_versions", {"baseline": base.trace.nsys_version,
                                            "candidate": cand.trace.nsys_version}))
    if any(map(counted_steps, (base, cand))) and any(s.bursts is None for s in (base, cand)):
        notes.append(Note("steps_against_launches"))
    if base.trace.graph_trace != cand.trace.graph_trace:
        notes.append(Note("graph_trace_modes", {"baseline": base.trace.graph_trace,
                                                "candidate": cand.trace.graph_trace}))
    bc, cc = _plain(base.config), _plain(cand.config)  # a summary read back has lists
    diff = {k for k in set(bc) | set(cc) if k != "warmup_launches" and bc.get(k) != cc.get(k)}
    if diff:  # each as the settings print it (a list as Python writes one)
        notes.append(Note("different_settings", {"settings": [
            [k, str(base.config.get(k)), str(cand.config.get(k))] for k in sorted(diff)]}))
    return notes


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(d, default=str))  # type: ignore[no-any-return]


def _pct(part: float, whole: float) -> float | None:
    return round(100.0 * part / whole, 2) if whole else None


def stall_check(klass: LaunchClass, base: Summary, cand: Summary, t: GateThresholds) -> Check:
    """The class's share of steady launches: grown by more than ``stall_pp``
    (``launch_bound_pp`` for launch-bound gaps) and ``stall_min_launches``, and a one-sided
    two-proportion z-test below ``alpha``. The class of two traces whose steps are several
    launches (piecewise CUDA graphs: ``Summary.bursts``) is a share of steady steps, each such
    launch one step (a step stalls, or leaves the GPU idle, after its last launch): per launch,
    a readback on every third step of 24 pieces would be 1.4 %, under the 2 pp."""
    b1, b2 = counted_steps(base), counted_steps(cand)
    if b1 and b2:
        unit, n1, n2 = "steps", b1.steady, b2.steady
    else:
        unit, n1, n2 = "launches", base.steady_launches, cand.steady_launches
    c1, c2 = (min(s.classes.get(klass, 0), n) for s, n in ((base, n1), (cand, n2)))
    f1, f2 = c1 / n1, c2 / n2
    diff_pp = 100.0 * (f2 - f1)
    status, p = PASS, None
    row = klass.row
    pp = float(getattr(t, row.gate_threshold or "stall_pp"))
    grew = diff_pp > pp and c2 - f1 * n2 >= t.stall_min_launches
    shrank = -diff_pp > pp and c1 - f2 * n1 >= t.stall_min_launches
    if grew:
        p = two_proportion_greater(c1, n1, c2, n2)
        status = FAIL if p < t.alpha else PASS
    elif shrank:
        p = two_proportion_greater(c2, n2, c1, n1)
        status = IMPROVED if p < t.alpha else PASS
    return Check(name=f"stalls.{klass}", label=row.gate_label or f"{klass} stalls", unit="%",
                 baseline=round(100 * f1, 2), candidate=round(100 * f2, 2),
                 change=round(diff_pp, 2), change_pct=None,
                 threshold=f"+{pp:g} pp & +{t.stall_min_launches} {unit}",
                 status=status, p_value=p, detail=f"{c1}/{n1} -> {c2}/{n2} steady {unit}")


def median_check(name: str, label: str, x: np.ndarray, y: np.ndarray, worse: int,
                 min_us: float, min_pct: float, t: GateThresholds) -> Check:
    """A per-launch median: ``worse`` = -1 when smaller is worse (window), +1 when larger is
    worse (gap). Fails on an effect above max(``min_us``, ``min_pct``) and a one-sided
    Mann-Whitney p below ``alpha`` (:func:`_ranked`: with fewer than ``min_samples`` values on
    a side, the effect alone decides)."""
    sign = "-" if worse < 0 else "+"
    rule = f"{sign}max({min_us:g} us, {min_pct:g}%)"
    if not len(x) or not len(y):
        return Check(name=name, label=label, unit="us",
                     baseline=round(float(np.median(x)), 2) if len(x) else None,
                     candidate=round(float(np.median(y)), 2) if len(y) else None,
                     change=None, change_pct=None, threshold=rule, status=NA,
                     detail=f"no values on one side ({len(x)} vs {len(y)})")
    mx, my = float(np.median(x)), float(np.median(y))
    diff = my - mx
    need = max(min_us, min_pct / 100.0 * abs(mx))
    status, p = _ranked(worse * diff, need, x, y, worse, t)
    detail = f"{len(x)} vs {len(y)} launches; minimum effect {need:.1f} us"
    if p is None:  # too few to test (was n/a: a window halved passed the gate)
        detail += f"; too few values to test (need {t.min_samples}): the effect alone decides"
    return Check(name=name, label=label, unit="us", baseline=round(mx, 2), candidate=round(my, 2),
                 change=round(diff, 2), change_pct=_pct(diff, mx), threshold=rule, status=status,
                 p_value=p, ci=bootstrap_median_diff(x, y) if p is not None else None,
                 detail=detail)


def pause_excess_us(idle_us: np.ndarray, quantile: float) -> tuple[float, float]:
    """Per-launch GPU idle time above the ``quantile`` of the gaps (host pauses), and that
    quantile. Winsorizing rather than trimming keeps the bulk of each long gap's effect."""
    v = np.clip(idle_us, 0, None)
    if not len(v) or quantile >= 1:
        return 0.0, float(v.max()) if len(v) else 0.0
    cap = float(np.quantile(v, quantile))
    return float(np.mean(v - np.minimum(v, cap))), cap


@dataclass(frozen=True)
class Robust:
    """A side's launch rate and idle fraction with host pauses taken out."""

    rate: float | None
    idle_frac: float | None  # 0..1
    excess_us: float
    cap_us: float
    longest_us: float


def process_rate(s: Summary, per_process: bool = True) -> float | None:
    """The launch rate of one process, the mean over the processes that have one: what the
    per-launch values (pooled over every process) measure, and a tensor-parallel engine's
    step rate. The summary's ``launches_per_s`` adds the processes' rates instead, and is
    what ``per_process=False`` returns (:func:`per_process_rates`)."""
    rates = [p.launches_per_s for p in s.processes if p.launches_per_s]
    return sum(rates) / len(rates) if per_process and len(rates) > 1 else s.launches_per_s


def per_process_rates(base: Summary, cand: Summary) -> bool:
    """Whether both sides say their processes' rates. A summary written before they were
    kept (schema 1.0) has only the total: then both sides compare their totals, or one
    side's mean would meet the other's sum (a TP=2 trace against itself read -50 %)."""
    return bool(base.processes) and bool(cand.processes)


def robust(s: Summary, t: GateThresholds, per_process: bool = True) -> Robust:
    idle = values(s.distributions.gpu_idle_us if s.distributions else None)
    excess, cap = pause_excess_us(idle, t.pause_quantile)
    longest = float(idle.max()) if len(idle) else 0.0
    rate = process_rate(s, per_process)
    if not rate:
        return Robust(None, None if s.gpu_busy is None else 1 - s.gpu_busy, 0.0, cap, longest)
    period = 1e6 / rate
    excess = min(excess, 0.5 * period)  # never let the correction dominate
    robust_period = period - excess
    rate = 1e6 / robust_period
    idle_frac = None
    if s.gpu_busy is not None:
        idle_frac = max(0.0, ((1 - s.gpu_busy) * period - excess) / robust_period)
    return Robust(rate, idle_frac, excess, cap, longest)


def fraction_check(base: Summary, cand: Summary, rb: Robust, rc: Robust,
                   t: GateThresholds, steps: bool = False) -> Check:
    """The GPU idle fraction (host pauses excluded): grown by more than ``idle_pp`` and the
    per-launch idle gaps larger by a one-sided Mann-Whitney test below ``alpha``; the effect
    alone where a side's steps are several launches (``steps``, :func:`in_steps`)."""
    rule = f"+{t.idle_pp:g} pp"
    detail = "1 - GPU busy over the steady span, host pauses excluded"
    if rb.idle_frac is None or rc.idle_frac is None:
        return Check(name="gpu_idle_fraction", label="GPU idle fraction", unit="%",
                     baseline=_percent(rb.idle_frac), candidate=_percent(rc.idle_frac),
                     change=None, change_pct=None, threshold=rule, status=NA,
                     detail="not measured on one side")
    b, c = 100 * rb.idle_frac, 100 * rc.idle_frac
    x, y = (values(s.distributions.gpu_idle_us if s.distributions else None) for s in (base, cand))
    if steps:
        x, y, detail = np.empty(0), np.empty(0), detail + STEPS_DECIDE
    status, p = _ranked(c - b, t.idle_pp, x, y, +1, t)
    return Check(name="gpu_idle_fraction", label="GPU idle fraction", unit="%",
                 baseline=round(b, 2), candidate=round(c, 2), change=round(c - b, 2),
                 change_pct=_pct(c - b, b), threshold=rule, status=status, p_value=p,
                 detail=detail)


def speed_check(name: str, label: str, unit: str, b: float | None, c: float | None,
                x: np.ndarray, y: np.ndarray, worse: int, t: GateThresholds, detail: str) -> Check:
    """How fast the GPU went (launch rate: ``worse`` -1; GPU work per launch: +1). A change
    beyond ``rate_pct`` with a rank test below ``alpha`` is reported (``changed``, or
    ``improved``); a slowdown beyond ``fail_on_slowdown_pct``, when set, fails."""
    slow = t.fail_on_slowdown_pct
    rule = (f"{'-' if worse < 0 else '+'}{slow:g}% fails" if slow else
            f"reported beyond {t.rate_pct:g}%")
    if b is None or c is None or not b:
        return Check(name=name, label=label, unit=unit, baseline=b, candidate=c, change=None,
                     change_pct=None, threshold=rule, status=NA,
                     detail=detail + "; not measured on one side")
    change_pct = 100.0 * (c - b) / b
    worse_by = worse * change_pct
    # tested against the smaller of the two thresholds, so that a --fail-on-slowdown below
    # rate_pct fails what it names; each status then keeps to its own threshold
    status, p = _ranked(worse_by, min(t.rate_pct, slow) if slow else t.rate_pct, x, y, +1, t)
    if status == FAIL and not (slow and worse_by > slow):
        status = CHANGED if worse_by > t.rate_pct else PASS
    elif status == IMPROVED and -worse_by <= t.rate_pct:
        status = PASS
    return Check(name=name, label=label, unit=unit, baseline=round(b, 2), candidate=round(c, 2),
                 change=round(c - b, 2), change_pct=round(change_pct, 2), threshold=rule,
                 status=status, p_value=p, detail=detail)


def _ranked(worse_by: float, need: float, x: np.ndarray, y: np.ndarray, larger_is_worse: int,
            t: GateThresholds) -> tuple[str, float | None]:
    """FAIL, IMPROVED or PASS for a change of ``worse_by`` (positive: worse) against the
    minimum effect ``need``, confirmed by a one-sided Mann-Whitney test of the per-launch
    values ``x`` (baseline) and ``y`` (candidate) in that direction. Too few values: the
    effect alone decides (p is None)."""
    if len(x) < t.min_samples or len(y) < t.min_samples:
        return (FAIL if worse_by > need else IMPROVED if -worse_by > need else PASS), None
    greater, less = mann_whitney_greater(x, y), mann_whitney_less(x, y)
    p_worse, p_better = (greater, less) if larger_is_worse > 0 else (less, greater)
    if worse_by > need and p_worse < t.alpha:
        return FAIL, p_worse
    if -worse_by > need and p_better < t.alpha:
        return IMPROVED, p_better
    # the p of the change's own direction: the other one's beside a change that passed
    # read as if the test confirmed it
    return PASS, p_worse if worse_by > 0 else p_better


#: said of a check decided on its effect alone (:func:`in_steps`)
STEPS_DECIDE = ("; steps of several graph launches: the per-launch values do not show a "
                "step's period, so the effect alone decides")


def in_steps(base: Summary, cand: Summary) -> bool:
    """Whether a side's steps are several launches (piecewise CUDA graphs): a stall or a
    slower host lengthens one launch's period in each step, which a rank test of per-launch
    values cannot see (a 9.7 % slower launch rate passed --fail-on-slowdown 3 beside a p of
    the opposite direction; a whole-graph engine against a piecewise one with a readback,
    +10.3 pp of GPU idle time, passed with p = 1)."""
    return bool(counted_steps(base) or counted_steps(cand))


def _percent(frac: float | None) -> float | None:
    return None if frac is None else 100 * frac


#: what a change can be an improvement of: what the user wants from the engine, fewer stalls
#: and launch-bound gaps, less GPU idle time, a faster launch rate. The overlap window and the
#: GPU's own work per launch are symptoms: a rank spinning in an all-reduce for a stalling peer
#: has a longer window (+27 %, tp2_case1_rank0), a GPU idling between replays or a smaller
#: model has shorter work per launch (-60 %, the 16-layer engine against the 6-layer one).
#: A significant change of a symptom in the good direction is ``changed``, never ``improved``
GOALS = frozenset({*(f"stalls.{k}" for k in GATED_CLASSES), "gpu_idle_p50", "gpu_idle_fraction",
                   "launch_rate"})


def _symptom_changed(c: Check) -> Check:
    """``c`` as ``changed`` where it says a symptom (not a :data:`GOALS` metric) improved."""
    if c.status != IMPROVED or c.metric in GOALS:
        return c
    said = ("a symptom: changed, not improved (improved is said of stalls, GPU idle and the "
            "launch rate)")
    return replace(c, status=CHANGED, detail=f"{c.detail}; {said}" if c.detail else said)


def run_checks(base: Summary, cand: Summary, t: GateThresholds,
               scope: str = "") -> tuple[list[Check], list[Note]]:
    """Every check, in the table's order, and the notes on host pauses and sampling.
    ``scope`` (e.g. ``process1``) prefixes the checks' names when one process of a
    multi-process trace is compared."""
    assert base.distributions is not None and cand.distributions is not None
    checks = [stall_check(k, base, cand, t) for k in GATED_CLASSES]
    db, dc = base.distributions, cand.distributions
    checks.append(median_check("window_p50", "overlap window p50", values(db.window_us),
                               values(dc.window_us), -1, t.window_us, t.window_pct, t))
    checks.append(median_check("gpu_idle_p50", "GPU idle gap p50", values(db.gpu_idle_us),
                               values(dc.gpu_idle_us), +1, t.gap_us, t.gap_pct, t))
    mean = per_process_rates(base, cand)
    rb, rc = robust(base, t, mean), robust(cand, t, mean)
    steps = in_steps(base, cand)
    checks.append(fraction_check(base, cand, rb, rc, t, steps))
    work_b, work_c = values(db.gpu_work_us), values(dc.gpu_work_us)
    period_b, period_c = _periods(db), _periods(dc)
    if steps:
        period_b, period_c = np.empty(0), np.empty(0)
    several = mean and (len(base.processes) > 1 or len(cand.processes) > 1)
    checks.append(speed_check("launch_rate", "launch rate (launches/s)", "/s", rb.rate, rc.rate,
                              period_b, period_c, -1, t,
                              "graph launches per second" + (" of one process (the mean)"
                                                             if several else "") +
                              ", host pauses excluded" + (STEPS_DECIDE if steps else "")))
    checks.append(speed_check("gpu_work_p50", "GPU work per launch p50", "us",
                              float(np.median(work_b)) if len(work_b) else None,
                              float(np.median(work_c)) if len(work_c) else None,
                              work_b, work_c, +1, t,
                              "the replay plus other GPU work before the next one"))
    checks = [_symptom_changed(c) for c in checks]
    if scope:
        checks = [replace(c, name=f"{scope}/{c.name}", label=f"{scope}: {c.label}")
                  for c in checks]
    notes = []
    for name, s, r in (("baseline", base, rb), ("candidate", cand, rc)):
        rate = process_rate(s, mean)
        if rate and r.excess_us / (1e6 / rate) > 0.005:
            notes.append(Note("host_pauses", {
                "side": name, "quantile_pct": 100 * t.pause_quantile, "cap_us": r.cap_us,
                "longest_us": r.longest_us, "cost_pct": 100 * r.excess_us / (1e6 / rate)}))
    if not mean and max(len(base.processes), len(cand.processes)) > 1:
        notes.append(Note("rates_as_totals", {
            "older": "baseline" if not base.processes else "candidate"}))
    for name, d in (("baseline", db), ("candidate", dc)):
        if d.sampled_from > len(d.klass):
            notes.append(Note("sampled_distributions", {
                "side": name, "sampled": len(d.klass), "of": d.sampled_from}))
    # a check of one process: its scope said first
    return checks, [Note(n.code, {**n.values, "scope": scope}) for n in notes] if scope else notes


def _periods(d: Distributions) -> np.ndarray:
    """Per-launch periods (GPU work plus idle gap), host pauses included: the rank test of
    the launch rate; empty for summaries without the GPU work."""
    if not d.gpu_work_us or len(d.gpu_work_us) != len(d.gpu_idle_us):
        return np.empty(0)
    w = np.asarray([np.nan if v is None else v for v in d.gpu_work_us], dtype=float)
    i = np.asarray([np.nan if v is None else v for v in d.gpu_idle_us], dtype=float)
    p = w + i
    finite: np.ndarray = p[np.isfinite(p)]
    return finite
