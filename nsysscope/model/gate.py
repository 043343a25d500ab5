"""The gate's result: the checks of a baseline against a candidate, and what changed where.

Shares and fractions in a :class:`Check` with ``unit == "%"`` are percent (``0.8`` means 0.8 %)
and their ``change`` is in percentage points: the gate's JSON (``nsysscope.gate/1``) has said so
from the start, so it stays; new fields use fractions 0..1 and say ``_frac``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import registry
from .facts import Note, notes_said, written_notes
from .schema import Record, check_schema, extra_field, optional, to_plain

#: 1.1 added baseline.headline and candidate.headline
#: 1.2 added note_facts (each note's code and values; ``notes`` is made of them)
GATE_SCHEMA = "nsysscope.gate/1.2"

#: a check's status; ``changed`` is a significant change the gate reports without failing on
#: it (the GPU's own work per launch, unless asked to gate slowdowns)
PASS, FAIL, IMPROVED, NA, CHANGED = "pass", "fail", "improved", "n/a", "changed"


@dataclass(frozen=True)
class Check(Record):
    """One metric compared: a row of the side-by-side table."""

    #: stable id: "stalls.gpu_to_cpu", "window_p50", ...; a check of one process of a
    #: multi-process trace is prefixed with its scope: "process1/stalls.gpu_to_cpu"
    name: str
    label: str
    unit: str  # "%" (shares and fractions, in percent), "us", "/s"
    baseline: float | None
    candidate: float | None
    change: float | None  # candidate - baseline, in ``unit`` (pp for "%")
    change_pct: float | None  # relative change, percent of the baseline
    threshold: str  # the rule, as a reader sees it
    status: str  # pass | fail | improved | changed | n/a
    p_value: float | None = None
    ci: tuple[float, float] | None = None  # 95 % bootstrap interval of ``change``
    detail: str = ""
    extra: dict[str, Any] = extra_field()
    nested = {"ci": optional(tuple)}

    @property
    def metric(self) -> str:
        """The metric the check compares, without its process scope."""
        return self.name.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class SiteChange(Record):
    """A stall site (class, phase, op, API chain) and how its count changed."""

    klass: str  # a LaunchClass value
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
    extra: dict[str, Any] = extra_field()

    @property
    def key(self) -> tuple[str, str, str]:
        """What makes two findings' sites the same site."""
        return (self.klass, self.where, self.api_chain)


@dataclass(frozen=True)
class Finding(Record):
    """A regression or an improvement, with where it is and what fixes it."""

    check: str
    kind: str  # regression | improvement
    message: str
    sites: tuple[SiteChange, ...] = ()
    fix: str | None = None
    extra: dict[str, Any] = extra_field()
    nested = {"sites": lambda sites: tuple(SiteChange.from_dict(x) for x in sites)}


@dataclass(frozen=True)
class Side(Record):
    """One side of the gate, as the result reports it."""

    label: str  # the path given to the gate, or the trace path in the summary
    trace: str
    nsys_version: str
    gpus: tuple[str, ...]
    launches: int
    steady_launches: int
    sampled: int  # per-launch values in the distributions
    verdict: str
    #: the side's headline (``Summary.headline.text``: its costliest cause and gain); empty
    #: for a summary from before nsysscope.summary/1.5, or a gate result before 1.1
    headline: str = ""
    extra: dict[str, Any] = extra_field()
    nested = {"gpus": tuple}


@dataclass(frozen=True)
class GateResult(Record):
    """Did the candidate lose CPU/GPU overlap the baseline had? (``passed``), and why."""

    passed: bool
    verdict: str
    baseline: Side
    candidate: Side
    checks: tuple[Check, ...]
    regressions: tuple[Finding, ...]
    improvements: tuple[Finding, ...]
    thresholds: dict[str, Any] = field(default_factory=dict)
    #: patterns not yet costing overlap that the candidate added (each in the notes)
    new_patterns: int = 0
    #: what limits the comparison, as values: each note's code and values (:attr:`notes`
    #: says them); a result from before 1.2 has only its sentences, read as notes of code
    #: ``written``
    note_facts: tuple[Note, ...] = ()
    schema: str = GATE_SCHEMA
    extra: dict[str, Any] = extra_field()
    nested = {"baseline": Side.from_dict, "candidate": Side.from_dict,
              "checks": lambda checks: tuple(Check.from_dict(c) for c in checks),
              "regressions": lambda fs: tuple(Finding.from_dict(f) for f in fs),
              "improvements": lambda fs: tuple(Finding.from_dict(f) for f in fs),
              "note_facts": lambda ns: tuple(Note.from_dict(n) for n in ns),
              "thresholds": dict}
    said = {"notes": "thresholds"}

    @property
    def notes(self) -> list[str]:
        """What limits the comparison (different nsys versions, processes matched by rank, a
        new pattern), said from :attr:`note_facts` by the registered words
        (:mod:`nsysscope.render.notes`)."""
        return notes_said(self, self.note_facts)

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def _repr_html_(self) -> str | None:
        return registry.render_fragment("gate", self)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = to_plain(self)
        d.pop("exit_code", None)  # written from the result, never kept from a file
        d["exit_code"] = self.exit_code
        return d

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GateResult:
        """Read a gate result back (``gate --format json``); :class:`NewerSchema` when a newer
        nsysscope wrote it."""
        check_schema(d, GATE_SCHEMA, "gate result")
        return super().from_dict(written_notes({k: v for k, v in d.items() if k != "exit_code"}))
