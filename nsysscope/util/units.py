"""How numbers read: the one module that turns a time or a fraction into text.

Every time in nsysscope's results is a number of microseconds (``*_us``) or nanoseconds
(``*_ns``); fractions are 0..1 (``*_frac``, or ``gpu_busy`` and ``share`` from before that rule).
Percent appears only here, when a value is shown to a person. The report, the gate's messages,
the many-trace table and the plots all format through :func:`fmt_time`; the named variants
below are its settings for each place, so a change of style is made once.
"""

from __future__ import annotations

import math
from typing import Protocol


def fmt_time(v_us: float | None, *, micro: str = "us", us_digits: int | None = 1,
             ms_digits: int = 2, s_digits: int = 2, smallest: str = "us",
             none: str = "n/a") -> str:
    """A time given in microseconds, in the largest unit it reaches: ``2.26 ms``, ``185.8 us``.

    ``micro``: how microseconds are written (``us`` in text, ``µs`` in figures);
    ``us_digits``: decimals below a millisecond (None: 0 from 10 µs up, else 1);
    ``smallest="ms"`` never goes below milliseconds; ``none``: the text for a missing value.
    """
    if v_us is None or not math.isfinite(v_us):
        return none
    a = abs(v_us)
    if a >= 1e6:
        return f"{v_us / 1e6:.{s_digits}f} s"
    if a >= 1e3 or smallest == "ms":
        return f"{v_us / 1e3:.{ms_digits}f} ms"
    digits = us_digits if us_digits is not None else (0 if a >= 10 else 1)
    return f"{v_us:.{digits}f} {micro}"


def us(v: float | None) -> str:
    """Reports and the gate: ``2.40 ms``, ``185.8 us``, ``n/a``."""
    return fmt_time(v)


def us_figure(v: float | None) -> str:
    """Figure labels: ``2.26 ms``, ``182 µs``, ``4.5 µs``."""
    return fmt_time(v, micro="µs", us_digits=None)


def ms(v: float | None) -> str:
    """The many-trace table: whole milliseconds and up, ``577.6 ms``, ``-`` when missing."""
    return fmt_time(v, ms_digits=1, smallest="ms", none="-")


def axis_us(v: float) -> str:
    """A tick on a microsecond axis: ``0``, ``500 µs``, ``2 ms``, ``1.5 s``."""
    if v <= 0:
        return "0"
    if v >= 1e6:
        return f"{v / 1e6:g} s"
    if v >= 1e3:
        return f"{v / 1e3:g} ms"
    return f"{v:g} µs"


def gain(rate: float | None, speedup: float | None, projected: float | None = None,
         up_to: bool = False) -> str:
    """``~1.58x launches/s (191.9 -> ~302.5)``: the projected gain of a fix, from the measured
    launch rate, the speed-up, and the projected rate where it is known; ``up to ~1.58x ...``
    where that is the high end of a range."""
    if not speedup:
        return "n/a"
    projected = projected or (rate * speedup if rate else None)
    now = f" ({rate:.1f} -> ~{projected:.1f})" if rate and projected else ""
    return f"{'up to ' if up_to else ''}~{speedup:.2f}x launches/s{now}"


def pct(frac: float | None) -> str:
    """A fraction 0..1 as a percentage: ``98.9%``."""
    return "n/a" if frac is None else f"{frac:.1%}"


class _P10P50P90(Protocol):
    @property
    def p10(self) -> float | None: ...
    @property
    def p50(self) -> float | None: ...
    @property
    def p90(self) -> float | None: ...


def triple(p: _P10P50P90) -> str:
    """``p10 / p50 / p90`` of a :class:`~nsysscope.model.Percentiles` (microseconds)."""
    return " / ".join(us(x) for x in (p.p10, p.p50, p.p90))


def timeline_span(start_ns: int | None, end_ns: int | None) -> str:
    """A part of a trace's timeline in the seconds nsys shows: ``12.500 s to 14.000 s``
    (None: ``the start``, ``the end``)."""
    start = "the start" if start_ns is None else f"{start_ns / 1e9:.3f} s"
    end = "the end" if end_ns is None else f"{end_ns / 1e9:.3f} s"
    return f"{start} to {end}"


def plural(n: int, one: str, many: str | None = None) -> str:
    """``1 launch``, ``2 launches``."""
    return f"{n} {one if n == 1 else (many or one + 's')}"
