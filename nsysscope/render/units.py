"""Number formatting shared by the text renderers: one place decides how a time reads."""

from __future__ import annotations


def us(v: float | None) -> str:
    """Microseconds as a readable time: ``2.4 ms``, ``185.8 us``."""
    if v is None:
        return "n/a"
    if abs(v) >= 1e6:
        return f"{v / 1e6:.2f} s"
    if abs(v) >= 1e3:
        return f"{v / 1e3:.2f} ms"
    return f"{v:.1f} us"


def pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1%}"


def triple(p) -> str:
    """``p10 / p50 / p90`` of a :class:`~nsysscope.model.Percentiles`."""
    return " / ".join(us(x) for x in (p.p10, p.p50, p.p90))
