"""The gate's thresholds: defaults, ``[tool.nsysscope.gate]`` in pyproject.toml, CLI options.

Precedence, lowest first: the defaults below, the ``[tool.nsysscope.gate]`` table of the first
``pyproject.toml`` found from the current directory upwards (or the file given with
``--config``), then command-line options. Keys may be spelled ``stall-pp`` or ``stall_pp``.
Why each default has its value: README.md, section "Regression gate" ("The noise model, and
why").
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, cast

from ..errors import UnreadableInput
from ..model import Note


@dataclass(frozen=True)
class GateThresholds:
    #: a stall class (gpu_to_cpu, cpu_to_gpu, other_stall) fails when its share of steady
    #: launches grows by more than this many percentage points ...
    stall_pp: float = 2.0
    #: ... and launch-bound gaps by more than this many: a healthy capture's host has slow
    #: stretches (10 separate healthy H200 captures: 0-11 of 194 steady launches, 5.7 %)
    launch_bound_pp: float = 10.0
    #: ... and by at least this many launches (the candidate's count minus what the baseline's
    #: share predicts for the candidate's steady launches)
    stall_min_launches: int = 5
    #: the median effective overlap window fails when it shrinks by more than this % ...
    window_pct: float = 10.0
    #: ... and by more than this many microseconds
    window_us: float = 100.0
    #: the median GPU idle gap between replays fails when it grows by more than this % ...
    gap_pct: float = 50.0
    #: ... and by more than this many microseconds
    gap_us: float = 20.0
    #: the GPU idle fraction (1 - GPU busy, host pauses excluded) may grow this many pp
    idle_pp: float = 2.0
    #: the launch rate (steps/s, host pauses excluded) and the GPU's own work per launch are
    #: reported as changed beyond this % (with a rank test): GPU clocks and neighbours move
    #: them between captures, and they are not the host breaking overlap ...
    rate_pct: float = 5.0
    #: ... and fail the gate only when this is set above 0: a drop of the launch rate, or a
    #: growth of the GPU work per launch, by more than this % (``--fail-on-slowdown``)
    fail_on_slowdown_pct: float = 0.0
    #: one-sided significance level of the rank and proportion tests
    alpha: float = 0.01
    #: per-launch GPU idle gaps above this quantile count as host pauses (GC, profiler buffer
    #: flushes) and are taken out of the launch rate and idle fraction; 1.0 keeps them
    pause_quantile: float = 0.99
    #: a distribution with fewer finite values than this on either side is not tested
    min_samples: int = 20

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any], origin: str = "thresholds") -> GateThresholds:
        return cls().updated(d, origin)

    def updated(self, d: dict[str, Any], origin: str = "thresholds",
                options: dict[str, str] | None = None) -> GateThresholds:
        """A copy with ``d``'s values (validated); None values are ignored. ``origin``: where
        they come from, for the error message; ``options``: instead, the command-line option
        that gave each (by field name)."""
        known = {f.name: f for f in fields(self)}
        changes: dict[str, Any] = {}
        for key, value in d.items():
            name = str(key).replace("-", "_")
            if name not in known:
                raise UnreadableInput(
                    f"{origin}: unknown gate threshold '{key}' (known: "
                    f"{', '.join(k.replace('_', '-') for k in known)})")
            if value is None:
                continue
            want = int if known[name].type in (int, "int") else float
            # NaN passes every range check below, and would switch its check off
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not math.isfinite(value) or (want is int and not float(value).is_integer()):
                kind = "an integer" if want is int else "a finite number"
                raise UnreadableInput(_bad(origin, options, name,
                                           f"must be {kind}, not {value!r}"))
            changes[name] = want(value)
        t = replace(self, **changes)
        t._validate(origin, options)
        return t

    def _validate(self, origin: str, options: dict[str, str] | None) -> None:
        for f in fields(self):
            ok, rule = _RANGES.get(f.name, _NOT_NEGATIVE)
            value = getattr(self, f.name)
            if not ok(value):
                raise UnreadableInput(_bad(origin, options, f.name, f"{rule} (not {value:g})"))


_Rule = tuple[Callable[[float], bool], str]
_NOT_NEGATIVE: _Rule = (lambda v: v >= 0, "must not be negative")
#: thresholds with a range of their own (the others must not be negative)
_RANGES: dict[str, _Rule] = {
    "alpha": (lambda v: 0 < v < 1, "must lie strictly between 0 and 1"),
    "pause_quantile": (lambda v: 0.5 <= v <= 1, "must lie in [0.5, 1]"),
    "min_samples": (lambda v: v >= 2, "must be at least 2"),
}


def _bad(origin: str, options: dict[str, str] | None, name: str, what: str) -> str:
    """The error for threshold ``name``: as the option that gave it (``--pause-quantile``),
    else as ``origin``'s key."""
    if options and name in options:
        return f"{options[name]}: {what}"
    return f"{origin}: '{name.replace('_', '-')}' {what}"


def find_pyproject(start: str | Path | None = None) -> Path | None:
    """The first ``pyproject.toml`` in ``start`` (default: the cwd) or a folder above it."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        p = folder / "pyproject.toml"
        if p.is_file():
            return p
    return None


def table_from(path: str | Path) -> dict[str, Any]:
    """The ``[tool.nsysscope.gate]`` table of a TOML file (empty when it has none)."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        raise UnreadableInput(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UnreadableInput(f"{p}: cannot read: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise UnreadableInput(f"{p}: not valid TOML: {e}") from None
    table: Any = doc
    for depth, key in enumerate(("tool", "nsysscope", "gate"), start=1):
        table = table.get(key, {})
        if not isinstance(table, dict):  # ``tool = 3``, or ``nsysscope = 3`` under [tool]
            name = ".".join(("tool", "nsysscope", "gate")[:depth])
            raise UnreadableInput(f"{p}: [{name}] must be a table, not {table!r}")
    return cast(dict[str, Any], table)


def source_note(path: Path) -> Note:
    """The gate's note naming the file whose table set its thresholds."""
    return Note("thresholds_from", {"path": str(path)})


def load_thresholds(config: str | Path | None = None, overrides: dict[str, Any] | None = None,
                    start: str | Path | None = None,
                    options: dict[str, str] | None = None) -> tuple[GateThresholds, Path | None]:
    """Defaults, then the pyproject table (``config`` or the one found from ``start``), then
    ``overrides`` (None values ignored; ``options``: the command-line option of each, by
    field name, for error messages). Returns the thresholds and the file whose
    ``[tool.nsysscope.gate]`` table set any of them (None when no table did)."""
    path = Path(config) if config else find_pyproject(start)
    t = GateThresholds()
    used = None
    if path is not None:
        table = table_from(path)
        if table:
            t, used = t.updated(table, f"{path} [tool.nsysscope.gate]"), path
        elif config:  # named to set thresholds, it sets none: a misspelled table, say
            raise UnreadableInput(f"{path}: no threshold in a [tool.nsysscope.gate] table (see "
                                  "the README's 'Regression gate')")
    if overrides:
        t = t.updated(overrides, "option", options)
    return t, used
