"""What the failing (or improved) checks mean: the sites that changed, the fix.

The verdict line and a finding's message are worded in ``render/findings.py`` (through the
registered words), and how a list shows the findings (numbered, with what an earlier one
showed) is the renderers' (:func:`nsysscope.render.gate_parts.arrange`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..model import (
    FAIL,
    FIXES,
    Check,
    Finding,
    LatentSite,
    Note,
    SiteChange,
    StallSite,
    Summary,
    registry,
)
from .thresholds import GateThresholds


def _site_key(s: StallSite) -> tuple[str, str, str, str]:
    """What makes two sites the same place in the code: not the process (pids change between
    runs, and every rank runs the same code)."""
    return (s.klass, s.phase or "", s.op or "", s.api_chain or "")


def _by_site(sites: Sequence[StallSite]) -> dict[tuple[str, str, str, str],
                                                    tuple[StallSite, int]]:
    """Per site key, its first site (the most GPU time lost) and the count over every
    process that has it."""
    out: dict[tuple[str, str, str, str], tuple[StallSite, int]] = {}
    for s in sites:
        first, n = out.get(_site_key(s), (s, 0))
        out[_site_key(s)] = (first, n + s.count)
    return out


def _source(s: StallSite) -> str | None:
    if not s.source:
        return None
    src = s.source
    return f"{src.location} ({src.function})" if src.line > 0 else src.location


def _site_change(s: StallSite, base_count: int, cand_count: int) -> SiteChange:
    return SiteChange(klass=s.klass, where=s.where, phase=s.phase, op=s.op, api_chain=s.api_chain,
                      nvtx_path=s.nvtx_path, source=_source(s),
                      source_text=s.source.text.strip() if s.source and s.source.text else None,
                      baseline_count=base_count, candidate_count=cand_count, lost_us=s.lost_us,
                      fix=s.fix or FIXES.get(s.klass, ""))


def changed_sites(base: Summary, cand: Summary, klass: str | None, min_change: float,
                  grown: bool, top: int = 3) -> list[SiteChange]:
    """Stall sites (of ``klass``, or of any class) whose count changed in one direction.

    ``grown``: candidate sites with more launches than the baseline's share predicts (a
    regression's sites); else baseline sites the candidate has fewer of (an improvement's).
    The biggest one, and the others that changed by at least ``min_change`` launches."""
    side, other = (cand, base) if grown else (base, cand)
    scale = side.steady_launches / other.steady_launches
    counts = {key: n for key, (_, n) in _by_site(other.sites).items()}
    out: list[SiteChange] = []
    for key, (s, n) in _by_site(side.sites).items():  # most GPU time lost first
        if klass and s.klass != klass:
            continue
        o = counts.get(key, 0)
        change = n - o * scale
        if change > 0 and (not out or change >= min_change):
            out.append(_site_change(s, o, n) if grown else _site_change(s, n, o))
    return out[:top]


def finding(c: Check, base: Summary, cand: Summary, t: GateThresholds) -> Finding:
    """The regression (a failed check) or improvement, with its sites and fix."""
    regression = c.status == FAIL
    klass = c.metric.split(".", 1)[1] if c.metric.startswith("stalls.") else None
    sites = changed_sites(base, cand, klass, t.stall_min_launches, grown=regression)
    fix = None
    if regression:
        fix = FIXES.get(klass) if klass else (sites[0].fix if sites else None)
    return Finding(check=c.name, kind="regression" if regression else "improvement",
                   message=registry.words().finding(c, sites, regression), sites=tuple(sites),
                   fix=fix)


def new_latent(base: Summary, cand: Summary) -> list[LatentSite]:
    """The hot-path patterns (:class:`~nsysscope.model.LatentSite`) the candidate has and the
    baseline has not: a pageable upload or a readback that costs nothing yet, because a stall
    comes first or the host is behind anyway. No check fails on them (they cost nothing
    measurable), but a gate that passed a new one silently would leave it as the surprise of
    the next fix. The same place in the code on any process is one pattern."""
    def key(x: LatentSite) -> tuple[str, str, str, str]:
        return (x.kind, x.phase or "", x.op or "", x.api_chain)

    known = {key(x) for x in base.latent}
    return list({key(x): x for x in cand.latent if key(x) not in known}.values())


def latent_notes(new: Sequence[LatentSite], top: int = 3) -> list[Note]:
    """The notes naming the first ``top`` new patterns, and how many more there are."""
    notes = [Note("new_pattern", {"kind": x.kind, "api_chain": x.api_chain, "where": x.where,
                                  "steps": x.steps, "steady_steps": x.steady_steps})
             for x in new[:top]]
    if len(new) > top:
        notes.append(Note("more_new_patterns", {"more": len(new) - top}))
    return notes
