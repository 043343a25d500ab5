"""The regression gate: did the candidate lose CPU/GPU overlap the baseline had?

:func:`compare` takes two :class:`~nsysscope.model.Summary` objects (from traces, or read back
from ``nsysscope summarize`` JSON) and returns a :class:`GateResult`. It is pure: no files, no
printing; renderers in :mod:`nsysscope.render` format the result.

What is compared (like with like)
---------------------------------
Only the steady state (warm-up and the final launch excluded), and only *per-launch* quantities
or rates, never totals, so a 300-step and a 5000-step capture of the same engine compare fine.
Each summary carries the per-launch distributions of the effective overlap window and of the
GPU idle gap after each replay (an evenly spaced sample of at most 4000 launches), the
steady-state count of every launch class, the GPU busy fraction and the launch rate.

Checks, and when each one fails (defaults in :class:`~nsysscope.gate_config.GateThresholds`)
---------------------------------------------------------------------------------------------
``stalls.<class>``  for gpu_to_cpu, cpu_to_gpu, other_stall and launch_bound: the class's share
    of steady launches grows by more than ``stall_pp`` (2 pp) **and** by at least
    ``stall_min_launches`` (5) launches more than the baseline's share predicts **and** a
    one-sided two-proportion z-test gives p < ``alpha``. "Appears" is the same rule from 0 %.
``window_p50``  the median effective overlap window shrinks by more than
    max(``window_us`` = 100 us, ``window_pct`` = 10 % of the baseline) **and** a one-sided
    Mann-Whitney U test of the two per-launch distributions gives p < ``alpha``.
``gpu_idle_p50``  the median GPU idle gap grows by more than max(``gap_us`` = 20 us,
    ``gap_pct`` = 50 %) **and** Mann-Whitney p < ``alpha``.
``gpu_idle_fraction``  1 - GPU busy grows by more than ``idle_pp`` (2 pp).
``launch_rate``  launches (= decode steps) per second drop by more than ``rate_pct`` (5 %).

The same rules in the other direction report an *improvement*. Every check that fails is a
regression; the gate passes when none fails.

The noise model, and why
------------------------
* **Rank test + minimum effect.** Per-launch windows and gaps are skewed and multi-modal (the
  healthy H200 idle gap is a mix of ~22 us and ~30 us replays) and have outliers, so means and
  t-tests mislead. The Mann-Whitney U test (normal approximation with tie correction and
  continuity correction; numpy only) asks whether the candidate's values are stochastically
  smaller (window) or larger (gap). Consecutive launches are autocorrelated, so with thousands
  of launches the test calls even tiny drifts significant; the *minimum effect size* on the
  median (absolute and relative) is what keeps two healthy captures from failing. The change
  is the difference of medians, shown with a 95 % percentile-bootstrap interval (1000
  resamples, fixed seed, so the output is reproducible).
* **Stall shares** are counts out of steady launches: a two-proportion z-test guards the
  small-sample case, the pp and launch-count tolerances make "a stall or two" not fail a gate.
* **Host pauses.** A healthy capture can contain a rare long pause (the 5000-step sample has
  one 115 ms gap, a GC or profiler buffer flush) that alone moves the launch rate by ~7 % and
  the idle fraction by ~6 pp in a 500-launch window. The rate and idle fraction are therefore
  computed with each launch's GPU idle gap winsorized at the ``pause_quantile`` (99th
  percentile) of its own distribution: the time above it is removed from the span. A
  regression that hits more than 1 % of launches is fully counted; the pause is reported in
  the notes.
* **Calibration.** Across 10 windows of ~490 steady launches of the 5000-step healthy capture
  the window median spans 3468-3569 us (3 %), the idle-gap median 23-30 us, the
  (pause-robust) rate 305.1-305.8 launches/s, idle fraction 0.80-0.91 %, launch_bound share
  0.2-1.4 %; the 300-step and 5000-step captures differ by less still. The defaults sit
  several times above that spread and far below the sample regressions (case 2: window -46 %,
  idle gap +142 us, 99 % cpu_to_gpu stalls; case 1: 100 % gpu_to_cpu, window -95 %, rate
  -37 %). ``tests/test_gate.py`` measures the false-alarm rate on all window pairs.

Not comparable (:class:`~nsysscope.errors.NotComparable`, exit 4): different GPU models, or
a side with no steady-state launches. Different nsys versions or analysis settings only add a
note.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import NotComparable, UnreadableInput
from .gate_config import GateThresholds
from .model import FIXES, SCHEMA, StallSite, Summary

GATE_SCHEMA = "nsysscope.gate/1"

#: the classes whose share of steady launches is gated (the stalls, then launch-boundness)
GATED_CLASSES = ("gpu_to_cpu", "cpu_to_gpu", "other_stall", "launch_bound")

PASS, FAIL, IMPROVED, NA = "pass", "fail", "improved", "n/a"

_BOOTSTRAP = 1000
_SEED = 20240229


# -- the result model ------------------------------------------------------------------------

@dataclass(frozen=True)
class Check:
    """One metric compared: a row of the side-by-side table."""

    name: str  # stable id: "stalls.gpu_to_cpu", "window_p50", ...
    label: str
    unit: str  # "%" (shares and fractions, in percent), "us", "/s"
    baseline: float | None
    candidate: float | None
    change: float | None  # candidate - baseline, in ``unit`` (pp for "%")
    change_pct: float | None  # relative change, percent of the baseline
    threshold: str  # the rule, as a reader sees it
    status: str  # pass | fail | improved | n/a
    p_value: float | None = None
    ci: tuple[float, float] | None = None  # 95 % bootstrap interval of ``change``
    detail: str = ""


@dataclass(frozen=True)
class SiteChange:
    """A stall site (class, phase, op, API chain) and how its count changed."""

    klass: str
    where: str
    phase: str | None
    op: str | None
    api_chain: str
    nvtx_path: str
    source: str | None  # "file:line (function)" when the trace had Python samples
    source_text: str | None
    baseline_count: int
    candidate_count: int
    lost_us: float  # GPU idle after these launches, on the side that has more of them
    fix: str


@dataclass(frozen=True)
class Finding:
    """A regression or an improvement, with where it is and what fixes it."""

    check: str
    kind: str  # regression | improvement
    message: str
    sites: tuple[SiteChange, ...] = ()
    fix: str | None = None


@dataclass(frozen=True)
class Side:
    label: str  # the path given to the gate, or the trace path in the summary
    trace: str
    nsys_version: str
    gpus: tuple[str, ...]
    launches: int
    steady_launches: int
    sampled: int  # per-launch values in the distributions
    verdict: str


@dataclass(frozen=True)
class GateResult:
    passed: bool
    verdict: str
    baseline: Side
    candidate: Side
    checks: tuple[Check, ...]
    regressions: tuple[Finding, ...]
    improvements: tuple[Finding, ...]
    notes: tuple[str, ...]
    thresholds: dict[str, Any] = field(default_factory=dict)
    schema: str = GATE_SCHEMA

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def _repr_html_(self) -> str:
        from .render.html import gate_fragment
        return gate_fragment(self)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["exit_code"] = self.exit_code
        return d

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "GateResult":
        def finding(f: dict) -> Finding:
            return Finding(**{**f, "sites": tuple(SiteChange(**s) for s in f.get("sites", ()))})

        def side(s: dict) -> Side:
            return Side(**{**s, "gpus": tuple(s["gpus"])})

        return cls(
            passed=d["passed"], verdict=d["verdict"], baseline=side(d["baseline"]),
            candidate=side(d["candidate"]),
            checks=tuple(Check(**{**c, "ci": tuple(c["ci"]) if c.get("ci") else None})
                         for c in d["checks"]),
            regressions=tuple(finding(f) for f in d["regressions"]),
            improvements=tuple(finding(f) for f in d["improvements"]),
            notes=tuple(d["notes"]), thresholds=dict(d.get("thresholds", {})),
            schema=d.get("schema", GATE_SCHEMA))


# -- statistics (numpy only) -----------------------------------------------------------------

def _phi(z: float) -> float:
    """Standard normal CDF."""
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def mann_whitney_less(x: np.ndarray, y: np.ndarray) -> float:
    """One-sided p-value that ``y`` is stochastically *smaller* than ``x`` (H1: P(Y<X) > 1/2).

    Normal approximation with the tie-corrected variance and a continuity correction; exact
    enough for the >= 20 values per side the gate requires.
    """
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    n1, n2 = len(x), len(y)
    if not n1 or not n2:
        return 1.0
    both = np.concatenate([x, y])
    _, inverse, counts = np.unique(both, return_inverse=True, return_counts=True)
    # average rank of each distinct value: the ranks it spans, 1-based
    upper = np.cumsum(counts)
    avg_rank = upper - (counts - 1) / 2.0
    ranks = avg_rank[inverse]
    u_y = ranks[n1:].sum() - n2 * (n2 + 1) / 2.0  # pairs with y > x (ties count half)
    n = n1 + n2
    mu = n1 * n2 / 2.0
    ties = float(np.sum(counts.astype(float) ** 3 - counts))
    var = n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0:  # every value identical
        return 1.0
    z = (u_y - mu + 0.5) / math.sqrt(var)  # small U means y tends to be smaller
    return float(min(1.0, max(0.0, _phi(z))))


def mann_whitney_greater(x: np.ndarray, y: np.ndarray) -> float:
    """One-sided p-value that ``y`` is stochastically *larger* than ``x``."""
    return mann_whitney_less(-np.asarray(x, float), -np.asarray(y, float))


def bootstrap_median_diff(x: np.ndarray, y: np.ndarray, n_boot: int = _BOOTSTRAP,
                          seed: int = _SEED) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of ``median(y) - median(x)``: each side resampled
    independently (its own fixed seed, so the output is reproducible)."""
    mx = _boot_medians(np.ascontiguousarray(x, dtype=float).tobytes(), n_boot, seed)
    my = _boot_medians(np.ascontiguousarray(y, dtype=float).tobytes(), n_boot, seed + 1)
    lo, hi = np.percentile(my - mx, [2.5, 97.5])
    return round(float(lo), 2), round(float(hi), 2)


@lru_cache(maxsize=64)
def _boot_medians(data: bytes, n_boot: int, seed: int) -> np.ndarray:
    """Medians of ``n_boot`` resamples (memoised: one distribution meets many in a sweep)."""
    v = np.frombuffer(data, dtype=float)
    rng = np.random.default_rng(seed)
    return np.median(v[rng.integers(0, len(v), size=(n_boot, len(v)))], axis=1)


def two_proportion_greater(c1: int, n1: int, c2: int, n2: int) -> float:
    """One-sided p-value that the share c2/n2 exceeds c1/n1 (pooled z-test)."""
    if not n1 or not n2:
        return 1.0
    p = (c1 + c2) / (n1 + n2)
    se = math.sqrt(p * (1 - p) * (1 / n1 + 1 / n2))
    diff = c2 / n2 - c1 / n1
    if se == 0:
        return 1.0 if diff <= 0 else 0.0
    return float(1.0 - _phi(diff / se))


# -- inputs ----------------------------------------------------------------------------------

def _values(xs: list[float | None] | None) -> np.ndarray:
    v = np.asarray([np.nan if x is None else x for x in (xs or [])], dtype=float)
    return v[np.isfinite(v)]


def _site_key(s: StallSite) -> tuple:
    return (s.klass, s.phase or "", s.op or "", s.api_chain or "")


def _source(s: StallSite) -> str | None:
    if not s.source:
        return None
    return f"{s.source.file}:{s.source.line} ({s.source.function})"


def _side(s: Summary, label: str | None) -> Side:
    d = s.distributions
    return Side(label=label or s.trace.path, trace=s.trace.path, nsys_version=s.trace.nsys_version,
                gpus=tuple(s.trace.gpus), launches=s.launches, steady_launches=s.steady_launches,
                sampled=len(d.window_us) if d else 0, verdict=s.verdict)


def check_comparable(base: Summary, cand: Summary) -> list[str]:
    """Raise :class:`NotComparable` or :class:`UnreadableInput`; return notes on minor
    differences (nsys version, analysis settings)."""
    for name, s in (("baseline", base), ("candidate", cand)):
        if s.distributions is None:
            raise UnreadableInput(
                f"{name} {s.trace.path}: the summary has no per-launch distributions; write it "
                "with 'nsysscope summarize TRACE -o FILE.json' (not 'report --format json')")
        if not s.steady_launches or not len(s.distributions.klass):
            raise NotComparable(f"{name} {s.trace.path} has no steady-state launches "
                                f"({s.launches} graph launches, {s.warmup_launches} warm-up)")
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
    return json.loads(json.dumps(d, default=str))


# -- the checks ------------------------------------------------------------------------------

def _pct(part: float, whole: float) -> float | None:
    return round(100.0 * part / whole, 2) if whole else None


def _stall_check(klass: str, base: Summary, cand: Summary, t: GateThresholds) -> Check:
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
    label = {"launch_bound": "launch-bound gaps"}.get(klass, f"{klass} stalls")
    return Check(name=f"stalls.{klass}", label=label, unit="%", baseline=round(100 * f1, 2),
                 candidate=round(100 * f2, 2), change=round(diff_pp, 2),
                 change_pct=None,
                 threshold=f"+{t.stall_pp:g} pp & +{t.stall_min_launches} launches",
                 status=status, p_value=p, detail=f"{c1}/{n1} -> {c2}/{n2} steady launches")


def _median_check(name: str, label: str, x: np.ndarray, y: np.ndarray, worse: int,
                  min_us: float, min_pct: float, t: GateThresholds) -> Check:
    """``worse`` = -1 when smaller is worse (window), +1 when larger is worse (gap)."""
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
class _Robust:
    rate: float | None
    idle: float | None  # fraction, 0..1
    excess_us: float
    cap_us: float
    longest_us: float


def _robust(s: Summary, t: GateThresholds) -> _Robust:
    idle = _values(s.distributions.gpu_idle_us if s.distributions else None)
    excess, cap = pause_excess_us(idle, t.pause_quantile)
    longest = float(idle.max()) if len(idle) else 0.0
    if not s.launches_per_s:
        return _Robust(None, None if s.gpu_busy is None else 1 - s.gpu_busy, 0.0, cap, longest)
    period = 1e6 / s.launches_per_s
    excess = min(excess, 0.5 * period)  # never let the correction dominate
    robust_period = period - excess
    rate = 1e6 / robust_period
    idle_frac = None
    if s.gpu_busy is not None:
        idle_frac = max(0.0, ((1 - s.gpu_busy) * period - excess) / robust_period)
    return _Robust(rate, idle_frac, excess, cap, longest)


def _scalar_check(name: str, label: str, unit: str, b: float | None, c: float | None,
                  status_fn, threshold: str, detail: str = "") -> Check:
    if b is None or c is None:
        return Check(name=name, label=label, unit=unit, baseline=b, candidate=c, change=None,
                     change_pct=None, threshold=threshold, status=NA,
                     detail=detail or "not measured on one side")
    return Check(name=name, label=label, unit=unit, baseline=round(b, 2), candidate=round(c, 2),
                 change=round(c - b, 2), change_pct=_pct(c - b, b), threshold=threshold,
                 status=status_fn(b, c), detail=detail)


# -- attribution -----------------------------------------------------------------------------

def _site_change(s: StallSite, base_count: int, cand_count: int) -> SiteChange:
    return SiteChange(klass=s.klass, where=s.where, phase=s.phase, op=s.op, api_chain=s.api_chain,
                      nvtx_path=s.nvtx_path, source=_source(s),
                      source_text=s.source.text.strip() if s.source and s.source.text else None,
                      baseline_count=base_count, candidate_count=cand_count, lost_us=s.lost_us,
                      fix=s.fix or FIXES.get(s.klass, ""))


def _grown_sites(base: Summary, cand: Summary, klass: str | None, min_growth: float,
                 top: int = 3) -> list[SiteChange]:
    """Candidate sites (of ``klass``) with more launches than the baseline's share predicts:
    the biggest one, and the others that grew by at least ``min_growth`` launches."""
    scale = cand.steady_launches / base.steady_launches
    before = {_site_key(s): s.count for s in base.sites}
    out = []
    for s in cand.sites:  # already most GPU time lost first
        if klass and s.klass != klass:
            continue
        b = before.get(_site_key(s), 0)
        grew = s.count - b * scale
        if grew > 0 and (not out or grew >= min_growth):
            out.append(_site_change(s, b, s.count))
    return out[:top]


def _shrunk_sites(base: Summary, cand: Summary, klass: str | None, min_growth: float,
                  top: int = 3) -> list[SiteChange]:
    """Baseline sites (of ``klass``) that the candidate has fewer of."""
    scale = base.steady_launches / cand.steady_launches
    after = {_site_key(s): s.count for s in cand.sites}
    out = []
    for s in base.sites:
        if klass and s.klass != klass:
            continue
        c = after.get(_site_key(s), 0)
        shrank = s.count - c * scale
        if shrank > 0 and (not out or shrank >= min_growth):
            out.append(_site_change(s, s.count, c))
    return out[:top]


def _fmt_us(v: float) -> str:
    a = abs(v)
    if a >= 1e3:
        return f"{v / 1e3:.2f} ms"
    return f"{v:.1f} us"


def _message(c: Check) -> str:
    if c.unit == "%":
        base = f"{c.label}: {c.baseline:.1f}% -> {c.candidate:.1f}% ({c.change:+.1f} pp)"
        return base + (f", {c.detail}" if c.name.startswith("stalls.") else "")
    if c.unit == "us":
        return (f"{c.label}: {_fmt_us(c.baseline)} -> {_fmt_us(c.candidate)} "
                f"({'+' if c.change >= 0 else '-'}{_fmt_us(abs(c.change))}, {c.change_pct:+.1f}%)")
    return f"{c.label}: {c.baseline:.1f} -> {c.candidate:.1f}{c.unit} ({c.change_pct:+.1f}%)"


def _finding(c: Check, base: Summary, cand: Summary, t: GateThresholds) -> Finding:
    kind = "regression" if c.status == FAIL else "improvement"
    klass = c.name.split(".", 1)[1] if c.name.startswith("stalls.") else None
    if kind == "regression":
        sites = _grown_sites(base, cand, klass, t.stall_min_launches)
    else:
        sites = _shrunk_sites(base, cand, klass, t.stall_min_launches)
    fix = None
    if kind == "regression":
        fix = FIXES.get(klass) if klass else (sites[0].fix if sites else None)
    msg = _message(c)
    if sites:
        msg += f"; at {sites[0].where}" + (f" ({sites[0].api_chain})" if sites[0].api_chain else "")
    elif kind == "regression" and not klass:
        msg += "; no stall site grew: the per-step host or GPU work itself changed"
    return Finding(check=c.name, kind=kind, message=msg, sites=tuple(sites), fix=fix)


# -- the gate --------------------------------------------------------------------------------

def compare(baseline: Any, candidate: Any, thresholds: GateThresholds | dict | None = None, *,
            baseline_label: str | None = None, candidate_label: str | None = None,
            config=None, nsys: str | None = None) -> GateResult:
    """Gate ``candidate`` against ``baseline``.

    Each side is a :class:`Summary` (pure comparison), or anything :func:`summary_of` reads: a
    trace path, a ``summarize`` JSON path, an :class:`~nsysscope.OpenTrace` or an
    :class:`~nsysscope.Analysis` (``config`` and ``nsys`` apply when a trace is analysed).
    """
    if not isinstance(baseline, Summary):
        baseline_label = baseline_label or _label(baseline)
        baseline = summary_of(baseline, config=config, nsys=nsys)
    if not isinstance(candidate, Summary):
        candidate_label = candidate_label or _label(candidate)
        candidate = summary_of(candidate, config=config, nsys=nsys)
    if thresholds is None:
        t = GateThresholds()
    elif isinstance(thresholds, dict):
        t = GateThresholds.from_dict(thresholds)
    else:
        t = thresholds
    base, cand = baseline, candidate
    notes = check_comparable(base, cand)

    checks = [_stall_check(k, base, cand, t) for k in GATED_CLASSES]
    db, dc = base.distributions, cand.distributions
    checks.append(_median_check("window_p50", "overlap window p50", _values(db.window_us),
                                _values(dc.window_us), -1, t.window_us, t.window_pct, t))
    idle_b, idle_c = _values(db.gpu_idle_us), _values(dc.gpu_idle_us)
    checks.append(_median_check("gpu_idle_p50", "GPU idle gap p50", idle_b, idle_c, +1,
                                t.gap_us, t.gap_pct, t))
    rb, rc = _robust(base, t), _robust(cand, t)

    def idle_status(b: float, c: float) -> str:
        return FAIL if c - b > t.idle_pp else IMPROVED if b - c > t.idle_pp else PASS

    def rate_status(b: float, c: float) -> str:
        return FAIL if c < b * (1 - t.rate_pct / 100) else \
            IMPROVED if c > b * (1 + t.rate_pct / 100) else PASS

    pct = (lambda v: None if v is None else 100 * v)
    checks.append(_scalar_check("gpu_idle_fraction", "GPU idle fraction", "%", pct(rb.idle),
                                pct(rc.idle), idle_status, f"+{t.idle_pp:g} pp",
                                "1 - GPU busy over the steady span, host pauses excluded"))
    checks.append(_scalar_check("launch_rate", "launch rate (steps/s)", "/s", rb.rate, rc.rate,
                                rate_status, f"-{t.rate_pct:g}%",
                                "graph launches per second, host pauses excluded"))
    for name, s, r in (("baseline", base, rb), ("candidate", cand, rc)):
        if s.launches_per_s and r.excess_us / (1e6 / s.launches_per_s) > 0.005:
            notes.append(
                f"{name}: host pauses (GPU idle gaps above the p{100 * t.pause_quantile:g} of "
                f"{_fmt_us(r.cap_us)}, longest {_fmt_us(r.longest_us)}) cost "
                f"{100 * r.excess_us / (1e6 / s.launches_per_s):.1f}% of the span; excluded "
                "from the launch rate and idle fraction")
    for name, s in (("baseline", base), ("candidate", cand)):
        d = s.distributions
        if d.sampled_from > len(d.klass):
            notes.append(f"{name}: distributions are an even sample of {len(d.klass)} of "
                         f"{d.sampled_from} steady launches")

    regressions = tuple(_finding(c, base, cand, t) for c in checks if c.status == FAIL)
    improvements = tuple(_finding(c, base, cand, t) for c in checks if c.status == IMPROVED)
    passed = not regressions
    return GateResult(passed=passed, verdict=_verdict(passed, checks, regressions, improvements),
                      baseline=_side(base, baseline_label), candidate=_side(cand, candidate_label),
                      checks=tuple(checks), regressions=regressions, improvements=improvements,
                      notes=tuple(notes), thresholds=t.to_dict())


def _verdict(passed: bool, checks: list[Check], regressions, improvements) -> str:
    tested = sum(c.status != NA for c in checks)
    by_name = {c.name: c for c in checks}
    if passed:
        line = f"PASS: no overlap regression ({tested} checks)"
        if improvements:
            line += "; improved: " + "; ".join(_short(by_name[f.check], f) for f in improvements)
        return line
    return (f"REGRESSION: {len(regressions)} of {tested} checks fail: "
            + "; ".join(_short(by_name[f.check], f) for f in regressions))


def _short(c: Check, f: Finding) -> str:
    """One clause of the verdict line."""
    if c.name.startswith("stalls."):
        where = f" at {f.sites[0].where}" if f.sites else ""
        return f"{c.label} {c.baseline:.1f}% -> {c.candidate:.1f}%{where}"
    if c.unit == "%":
        return f"{c.label} {c.baseline:.1f}% -> {c.candidate:.1f}%"
    if c.unit == "us":
        return f"{c.label} {_fmt_us(c.baseline)} -> {_fmt_us(c.candidate)} ({c.change_pct:+.0f}%)"
    return f"{c.label} {c.baseline:.1f} -> {c.candidate:.1f}{c.unit} ({c.change_pct:+.1f}%)"


# -- reading each side -----------------------------------------------------------------------

def _label(x: Any) -> str | None:
    if isinstance(x, (str, Path)):
        return str(x)
    path = getattr(x, "path", None)
    return str(path) if path is not None else None


def is_summary_file(path: str | Path) -> bool:
    """True for a JSON file (``summarize`` output); traces are SQLite or compressed."""
    p = Path(path)
    if p.suffix.lower() == ".json":
        return True
    try:
        with p.open("rb") as f:
            head = f.read(64).lstrip()
    except OSError:
        return False
    return head.startswith(b"{")


def read_summary(path: str | Path) -> Summary:
    """A :class:`Summary` from ``nsysscope summarize`` JSON, or :class:`UnreadableInput`."""
    p = Path(path)
    if not p.exists():
        raise UnreadableInput(f"{p}: no such file")
    if p.is_dir():
        raise UnreadableInput(f"{p}: is a directory, not a summary file")
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise UnreadableInput(f"{p}: cannot read: {e}") from None
    except json.JSONDecodeError as e:
        raise UnreadableInput(f"{p}: not valid JSON ({e})") from None
    if not isinstance(d, dict):
        raise UnreadableInput(f"{p}: not an nsysscope summary (a JSON object is expected)")
    schema = str(d.get("schema", ""))
    if schema.startswith("nsysscope.summary/"):
        major = schema.split("/", 1)[1].split(".", 1)[0]
        mine = SCHEMA.split("/", 1)[1].split(".", 1)[0]
        if major.isdigit() and int(major) > int(mine):
            raise UnreadableInput(f"{p}: summary schema {schema} is newer than this nsysscope "
                                  f"reads ({SCHEMA}); upgrade nsysscope")
    try:
        return Summary.from_dict(d)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise UnreadableInput(f"{p}: not an nsysscope summary ({e})") from None


def summary_of(x: Any, config=None, nsys: str | None = None) -> Summary:
    """The :class:`Summary` of a Summary, Analysis, OpenTrace, summary JSON or trace path."""
    if isinstance(x, Summary):
        return x
    summary = getattr(x, "summary", None)  # Analysis (attribute) or OpenTrace (method)
    if summary is not None:
        return summary() if callable(summary) else summary
    if isinstance(x, (str, Path)):
        if is_summary_file(x):
            return read_summary(x)
        from .analysis import analyze
        from .trace import load
        return analyze(load(x, nsys=nsys), config).summary
    raise TypeError(f"cannot gate a {type(x).__name__}: give a trace path, a summary JSON path, "
                    "a Summary, an Analysis or an OpenTrace")


def summary_json(s: Summary) -> str:
    """``summarize`` output: the summary indented, each per-launch list on one line (a
    300-launch trace gives ~15 KB, the 4000-launch cap ~150 KB)."""
    d = s.to_dict(with_distributions=True)
    dist = d.pop("distributions", None)
    text = json.dumps(d, indent=2, ensure_ascii=False)
    if dist is None:
        return text + "\n"
    inner = ",\n".join(f"    {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}"
                       for k, v in dist.items())
    return text[:-2] + ',\n  "distributions": {\n' + inner + "\n  }\n}\n"


def window_summary(analysis, start: int, stop: int) -> Summary:
    """The summary of steady launches ``[start, stop)`` (positions among the steady launches)
    of an :class:`~nsysscope.Analysis`, built exactly as the full summary is. Used to measure
    the gate's false-alarm rate on windows of one healthy capture."""
    from .analysis import summarize
    launches = analysis.launches.copy()
    steady = np.flatnonzero(launches["steady"].to_numpy())
    keep = np.zeros(len(launches), dtype=bool)
    keep[steady[start:stop]] = True
    launches["steady"] = keep
    return summarize(analysis.trace, launches, analysis.config)[0]
