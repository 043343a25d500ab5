"""The gate's checks: each metric of the baseline against the candidate, with its rule.

``stalls.<class>`` (each of :data:`~nsysscope.model.GATED_CLASSES`), ``window_p50``,
``gpu_idle_p50``, ``gpu_idle_fraction`` and ``launch_rate``; what each rule is and why:
README.md, "What is compared" and "The noise model, and why".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import NotComparable, NothingSteady, UnreadableInput
from ..model import FAIL, GATED_CLASSES, IMPROVED, NA, PASS, Check, LaunchClass, Summary
from ..util.units import us
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
    return v[np.isfinite(v)]


def check_comparable(base: Summary, cand: Summary) -> list[str]:
    """Raise :class:`NotComparable`, :class:`NothingSteady` (a side with no steady launch) or
    :class:`UnreadableInput`; return notes on minor differences (nsys version, settings)."""
    for name, s in (("baseline", base), ("candidate", cand)):
        if s.distributions is None:
            raise UnreadableInput(
                f"{name} {s.trace.path}: the summary has no per-launch distributions; write it "
                "with 'nsysscope summarize TRACE -o FILE.json' (or 'report --format json' of "
                "this version; an older report's JSON has none)")
        if not s.steady_launches or not len(s.distributions.klass):
            raise NothingSteady(f"{name} {s.trace.path} has no steady-state launches, nothing "
                                f"steady to judge ({s.launches} graph launches, "
                                f"{s.warmup_launches} warm-up)")
    gb, gc = set(base.trace.gpus), set(cand.trace.gpus)
    if gb and gc and gb != gc:
        raise NotComparable(f"different GPUs: baseline ran on {', '.join(sorted(gb))}, "
                            f"candidate on {', '.join(sorted(gc))}")
    notes = []
    if not gb or not gc:
        notes.append("the GPU of one side is unknown; assumed to be the same")
    elif len(base.trace.gpus) != len(cand.trace.gpus):
        notes.append(f"baseline trace shows {len(base.trace.gpus)} GPUs, candidate "
                     f"{len(cand.trace.gpus)}")
    if base.trace.nsys_version != cand.trace.nsys_version:
        notes.append(f"captured with different nsys versions (baseline {base.trace.nsys_version}"
                     f", candidate {cand.trace.nsys_version})")
    if base.trace.graph_trace != cand.trace.graph_trace:
        notes.append(f"different --cuda-graph-trace modes (baseline {base.trace.graph_trace}, "
                     f"candidate {cand.trace.graph_trace}): GPU timings may differ")
    bc, cc = _plain(base.config), _plain(cand.config)  # a summary read back has lists
    diff = {k for k in set(bc) | set(cc) if k != "warmup_launches" and bc.get(k) != cc.get(k)}
    if diff:
        notes.append("analysed with different settings: " + ", ".join(
            f"{k} {base.config.get(k)} vs {cand.config.get(k)}" for k in sorted(diff)))
    return notes


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(d, default=str))  # type: ignore[no-any-return]


def _pct(part: float, whole: float) -> float | None:
    return round(100.0 * part / whole, 2) if whole else None


def stall_check(klass: LaunchClass, base: Summary, cand: Summary, t: GateThresholds) -> Check:
    """The class's share of steady launches: grown by more than ``stall_pp`` and
    ``stall_min_launches``, and a one-sided two-proportion z-test below ``alpha``."""
    n1, n2 = base.steady_launches, cand.steady_launches
    c1, c2 = base.classes.get(klass, 0), cand.classes.get(klass, 0)
    f1, f2 = c1 / n1, c2 / n2
    diff_pp = 100.0 * (f2 - f1)
    status, p = PASS, None
    grew = diff_pp > t.stall_pp and c2 - f1 * n2 >= t.stall_min_launches
    shrank = -diff_pp > t.stall_pp and c1 - f2 * n1 >= t.stall_min_launches
    if grew:
        p = two_proportion_greater(c1, n1, c2, n2)
        status = FAIL if p < t.alpha else PASS
    elif shrank:
        p = two_proportion_greater(c2, n2, c1, n1)
        status = IMPROVED if p < t.alpha else PASS
    label = "launch-bound gaps" if klass == LaunchClass.LAUNCH_BOUND else f"{klass} stalls"
    return Check(name=f"stalls.{klass}", label=label, unit="%", baseline=round(100 * f1, 2),
                 candidate=round(100 * f2, 2), change=round(diff_pp, 2),
                 change_pct=None,
                 threshold=f"+{t.stall_pp:g} pp & +{t.stall_min_launches} launches",
                 status=status, p_value=p, detail=f"{c1}/{n1} -> {c2}/{n2} steady launches")


def median_check(name: str, label: str, x: np.ndarray, y: np.ndarray, worse: int,
                 min_us: float, min_pct: float, t: GateThresholds) -> Check:
    """A per-launch median: ``worse`` = -1 when smaller is worse (window), +1 when larger is
    worse (gap). Fails on an effect above max(``min_us``, ``min_pct``) and a one-sided
    Mann-Whitney p below ``alpha``."""
    sign = "-" if worse < 0 else "+"
    rule = f"{sign}max({min_us:g} us, {min_pct:g}%)"
    if len(x) < t.min_samples or len(y) < t.min_samples:
        return Check(name=name, label=label, unit="us",
                     baseline=round(float(np.median(x)), 2) if len(x) else None,
                     candidate=round(float(np.median(y)), 2) if len(y) else None,
                     change=None, change_pct=None, threshold=rule, status=NA,
                     detail=f"too few values to test ({len(x)} vs {len(y)}; need {t.min_samples})")
    mx, my = float(np.median(x)), float(np.median(y))
    diff = my - mx
    need = max(min_us, min_pct / 100.0 * abs(mx))
    p_worse = mann_whitney_less(x, y) if worse < 0 else mann_whitney_greater(x, y)
    p_better = mann_whitney_greater(x, y) if worse < 0 else mann_whitney_less(x, y)
    status, p = PASS, min(p_worse, p_better)
    if worse * diff > need and p_worse < t.alpha:
        status, p = FAIL, p_worse
    elif -worse * diff > need and p_better < t.alpha:
        status, p = IMPROVED, p_better
    return Check(name=name, label=label, unit="us", baseline=round(mx, 2), candidate=round(my, 2),
                 change=round(diff, 2), change_pct=_pct(diff, mx), threshold=rule, status=status,
                 p_value=p, ci=bootstrap_median_diff(x, y),
                 detail=f"{len(x)} vs {len(y)} launches; minimum effect {need:.1f} us")


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


def robust(s: Summary, t: GateThresholds) -> Robust:
    idle = values(s.distributions.gpu_idle_us if s.distributions else None)
    excess, cap = pause_excess_us(idle, t.pause_quantile)
    longest = float(idle.max()) if len(idle) else 0.0
    if not s.launches_per_s:
        return Robust(None, None if s.gpu_busy is None else 1 - s.gpu_busy, 0.0, cap, longest)
    period = 1e6 / s.launches_per_s
    excess = min(excess, 0.5 * period)  # never let the correction dominate
    robust_period = period - excess
    rate = 1e6 / robust_period
    idle_frac = None
    if s.gpu_busy is not None:
        idle_frac = max(0.0, ((1 - s.gpu_busy) * period - excess) / robust_period)
    return Robust(rate, idle_frac, excess, cap, longest)


def scalar_check(name: str, label: str, unit: str, b: float | None, c: float | None,
                 status_fn: Callable[[float, float], str], threshold: str,
                 detail: str = "") -> Check:
    if b is None or c is None:
        return Check(name=name, label=label, unit=unit, baseline=b, candidate=c, change=None,
                     change_pct=None, threshold=threshold, status=NA,
                     detail=detail or "not measured on one side")
    return Check(name=name, label=label, unit=unit, baseline=round(b, 2), candidate=round(c, 2),
                 change=round(c - b, 2), change_pct=_pct(c - b, b), threshold=threshold,
                 status=status_fn(b, c), detail=detail)


def _percent(frac: float | None) -> float | None:
    return None if frac is None else 100 * frac


def run_checks(base: Summary, cand: Summary, t: GateThresholds) -> tuple[list[Check], list[str]]:
    """Every check, in the table's order, and the notes on host pauses and sampling."""
    assert base.distributions is not None and cand.distributions is not None
    checks = [stall_check(k, base, cand, t) for k in GATED_CLASSES]
    db, dc = base.distributions, cand.distributions
    checks.append(median_check("window_p50", "overlap window p50", values(db.window_us),
                               values(dc.window_us), -1, t.window_us, t.window_pct, t))
    checks.append(median_check("gpu_idle_p50", "GPU idle gap p50", values(db.gpu_idle_us),
                               values(dc.gpu_idle_us), +1, t.gap_us, t.gap_pct, t))
    rb, rc = robust(base, t), robust(cand, t)

    def idle_status(b: float, c: float) -> str:
        return FAIL if c - b > t.idle_pp else IMPROVED if b - c > t.idle_pp else PASS

    def rate_status(b: float, c: float) -> str:
        return FAIL if c < b * (1 - t.rate_pct / 100) else \
            IMPROVED if c > b * (1 + t.rate_pct / 100) else PASS

    checks.append(scalar_check("gpu_idle_fraction", "GPU idle fraction", "%",
                               _percent(rb.idle_frac), _percent(rc.idle_frac), idle_status,
                               f"+{t.idle_pp:g} pp",
                               "1 - GPU busy over the steady span, host pauses excluded"))
    checks.append(scalar_check("launch_rate", "launch rate (steps/s)", "/s", rb.rate, rc.rate,
                               rate_status, f"-{t.rate_pct:g}%",
                               "graph launches per second, host pauses excluded"))
    notes = []
    for name, s, r in (("baseline", base, rb), ("candidate", cand, rc)):
        if s.launches_per_s and r.excess_us / (1e6 / s.launches_per_s) > 0.005:
            notes.append(
                f"{name}: host pauses (GPU idle gaps above the p{100 * t.pause_quantile:g} of "
                f"{us(r.cap_us)}, longest {us(r.longest_us)}) cost "
                f"{100 * r.excess_us / (1e6 / s.launches_per_s):.1f}% of the span; excluded "
                "from the launch rate and idle fraction")
    for name, d in (("baseline", db), ("candidate", dc)):
        if d.sampled_from > len(d.klass):
            notes.append(f"{name}: distributions are an even sample of {len(d.klass)} of "
                         f"{d.sampled_from} steady launches")
    return checks, notes
