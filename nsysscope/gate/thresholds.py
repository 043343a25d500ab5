"""The gate's thresholds: defaults, ``[tool.nsysscope.gate]`` in pyproject.toml, CLI options.

Precedence, lowest first: the defaults below, the ``[tool.nsysscope.gate]`` table of the first
``pyproject.toml`` found from the current directory upwards (or the file given with
``--config``), then command-line options. Keys may be spelled ``stall-pp`` or ``stall_pp``.
Why each default has its value: README.md, section "Regression gate" ("The noise model, and
why").
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from ..errors import UnreadableInput


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

    def updated(self, d: dict[str, Any], origin: str = "thresholds") -> GateThresholds:
        """A copy with ``d``'s values (validated); None values are ignored."""
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
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    (want is int and not float(value).is_integer()):
                kind = "an integer" if want is int else "a number"
                raise UnreadableInput(f"{origin}: '{key}' must be {kind}, not {value!r}")
            changes[name] = want(value)
        t = replace(self, **changes)
        t._validate(origin)
        return t

    def _validate(self, origin: str) -> None:
        for f in fields(self):
            if getattr(self, f.name) < 0:
                name = f.name.replace("_", "-")
                raise UnreadableInput(f"{origin}: '{name}' must not be negative")
        if not 0 < self.alpha < 1:
            raise UnreadableInput(f"{origin}: 'alpha' must lie strictly between 0 and 1")
        if not 0.5 <= self.pause_quantile <= 1:
            raise UnreadableInput(f"{origin}: 'pause-quantile' must lie in [0.5, 1]")
        if self.min_samples < 2:
            raise UnreadableInput(f"{origin}: 'min-samples' must be at least 2")


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
    table = doc.get("tool", {}).get("nsysscope", {}).get("gate", {})
    if not isinstance(table, dict):
        raise UnreadableInput(f"{p}: [tool.nsysscope.gate] must be a table")
    return table


def load_thresholds(config: str | Path | None = None, overrides: dict[str, Any] | None = None,
                    start: str | Path | None = None) -> tuple[GateThresholds, Path | None]:
    """Defaults, then the pyproject table (``config`` or the one found from ``start``), then
    ``overrides`` (None values ignored). Returns the thresholds and the file whose
    ``[tool.nsysscope.gate]`` table set any of them (None when no table did)."""
    path = Path(config) if config else find_pyproject(start)
    t = GateThresholds()
    used = None
    if path is not None:
        table = table_from(path)
        if table:
            t, used = t.updated(table, f"{path} [tool.nsysscope.gate]"), path
    if overrides:
        t = t.updated(overrides, "option")
    return t, used
