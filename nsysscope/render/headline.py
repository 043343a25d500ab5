"""The headline, said: the report's first line, made from its values
(:class:`~nsysscope.model.Headline`, which ``analysis/headline.py`` decides: the costliest
cause, its share of the GPU's time, its projected gain, whether it is worth chasing first).
Where nothing is worth naming on a trace whose overlap holds, it is the verdict."""

from __future__ import annotations

from ..model import CAUSES, Headline, LaunchClass, Summary, counted_steps
from ..model.sites import NO_NVTX, NO_PHASE
from ..util.units import gain, pct
from .report_parts import fix_gain


def headline_text(h: Headline, s: Summary) -> str:
    """``OVERLAP BROKEN: a GPU→CPU readback at phase 'sample' costs 37.8% of the GPU's time;
    fixing it -> ~1.58x launches/s (191.9 -> ~302.5)``, and ``: not worth chasing first``
    after a gain too small to chase first."""
    if h.klass is None or (s.overlap_ok and not h.worth_chasing):
        return s.verdict
    late = h.klass == LaunchClass.LAUNCH_BOUND
    if late:
        lead, what = "LAUNCH-BOUND", CAUSES[h.klass]
    else:
        lead = s.verdict.partition(": ")[0] if not s.overlap_ok else "overlap mostly holds"
        what = CAUSES.get(h.klass, h.klass) + _at(h.where)
    gpus = "the GPU's time" if len(s.processes) <= 1 else \
        f"the {len(s.processes)} processes' GPU time"
    costs = f" costs {pct(h.idle_frac)} of {gpus}" if h.idle_frac is not None else \
        " costs GPU time"
    if late:
        b = counted_steps(s)
        n = f"{b.launch_bound}/{b.steady} steady steps" if b else \
            f"{h.launches}/{s.steady_launches} steady launches"
        costs += f" ({n} came after the GPU went idle)"
    if h.speedup is not None:
        fix = "a host that keeps ahead -> up to " if late else "fixing it -> "
        costs += f"; {fix}" + (
            gain(s.rate, h.speedup, s.rate_if(h.speedup, h.launches_per_s_if_fixed)) if late
            else fix_gain(s, h.speedup, h.launches_per_s_if_fixed))
    return f"{lead}: {what}{costs}" + ("" if h.worth_chasing else ": not worth chasing first")


def _at(where: str | None) -> str:
    """`` at sampler.py:58 (phase 'sample')``: the site's most specific place, the rest in
    brackets; nothing without NVTX ranges or a line."""
    if not where or where in (NO_NVTX, NO_PHASE):
        return ""
    first, _, rest = where.partition(", ")
    return f" at {first}" + (f" ({rest})" if rest else "")
