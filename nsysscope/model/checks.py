"""What the counts and rates of a summary (or of one of its processes) may be: where an
analysis puts them. A summary read back from JSON is checked so (a hand-edited or damaged
file is one error line, not a wrong verdict or a crash deep in the gate)."""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING

from .classes import LAUNCH_CLASSES, STALL_CLASSES
from .schema import shown

if TYPE_CHECKING:
    from .summary import ProcessSummary, Summary


def check_counts(r: Summary | ProcessSummary) -> None:
    """The launch counts, class counts, busy fraction and rate of a summary or one process
    lie where an analysis puts them (ValueError naming the field otherwise)."""
    for name, have, known in (("stalls", r.stalls, STALL_CLASSES),
                              ("classes", r.classes, LAUNCH_CLASSES)):
        # every class counted: a class left out would read as 0 launches, and the gate would
        # pass a candidate whose summary lost its stalls (one it does not know is a newer
        # version's, which the schema allows)
        missing = [str(k) for k in known if k not in have]
        if missing:
            raise ValueError(f"'{name}' has no count of {', '.join(missing)}")
    for name in ("launches", "steady_launches", "warmup_launches"):
        if getattr(r, name) < 0:
            raise ValueError(f"'{name}' is {getattr(r, name)}, below 0")
    counts = {"no_wait": r.no_wait} | {f"stalls.{k}": v for k, v in r.stalls.items()} | \
        {f"classes.{k}": v for k, v in r.classes.items()}
    for name, value in counts.items():
        if not 0 <= value <= r.steady_launches:
            raise ValueError(f"'{name}' is {value}, not a count of the {r.steady_launches} "
                             "steady launches")
    if r.gpu_busy is not None and not 0 <= r.gpu_busy <= 1:  # NaN too
        raise ValueError(f"'gpu_busy' is {shown(r.gpu_busy)}, not a fraction from 0 to 1")
    check_rate("launches_per_s", r.launches_per_s)
    d = r.distributions
    if d is not None and len(d.klass) == d.sampled_from:  # every steady launch: the same counts
        seen = Counter(d.klass)
        wrong = next((k for k in sorted(set(seen) | set(r.classes))
                      if seen.get(k, 0) != r.classes.get(k, 0)), None)
        if wrong is not None:
            raise ValueError(f"'classes.{wrong}' is {r.classes.get(wrong, 0)}, but "
                             f"'distributions.klass' holds {seen.get(wrong, 0)} of it")


def check_rate(name: str, value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise ValueError(f"'{name}' is {shown(value)}, not a rate (a finite number >= 0)")
