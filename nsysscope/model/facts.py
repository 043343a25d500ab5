"""What a result says, as values: the verdict's case and numbers, and each note's code and
values. The analysis decides them; :mod:`nsysscope.render.words` makes the sentences
(``Summary.verdict``, ``Summary.notes``), which the JSON keeps beside them.

A summary written before these values were kept holds only its sentences: its notes are read
as notes of code :data:`WRITTEN` (``nsysscope.summary/1.8`` and before), its verdict as the line
it wrote without values (``verdict_facts`` None, before 1.10); every format shows them as they
were written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import registry
from .schema import Record, extra_field, shown

#: the case of a verdict, the code of a note, read from a result that kept only its sentence
WRITTEN = "written"


@dataclass(frozen=True)
class Note(Record):
    """One note: what limits the analysis or the comparison. ``code`` is its row in
    :data:`nsysscope.render.notes.NOTES`, whose template says it with ``values`` (numbers,
    names, lists of them; times in microseconds)."""

    code: str
    values: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = extra_field()

    @classmethod
    def written(cls, text: str) -> Note:
        """A note an older nsysscope kept only as its sentence."""
        return cls(WRITTEN, {"text": text})

    def __hash__(self) -> int:  # (its values are a dict: the same note twice is one)
        return hash((self.code, json.dumps(self.values, sort_keys=True, default=str)))


#: the cases of a verdict. One process's verdict (``ProcessSummary.status`` too): ``idle`` (no
#: steady launch to judge), ``stalls``, ``waits_for_peer`` (its launches are on time; its GPU
#: waits in collectives for a slower rank), ``launch_bound``, ``healthy``. A summary of one
#: process has the same cases; a summary of several names its processes:
#: ``processes_stall``, ``processes_wait``, ``processes_launch_bound``, ``processes_healthy``
VERDICT_CASES = ("idle", "stalls", "waits_for_peer", "launch_bound", "healthy",
                 "processes_stall", "processes_wait", "processes_launch_bound",
                 "processes_healthy")


@dataclass(frozen=True)
class Verdict(Record):
    """The verdict as values: its case (:data:`VERDICT_CASES`; a newer version's is read as
    it is, its line shown as written), what it counts, the class and the place it names, the
    times it gives. A field a case does not use is left at its default."""

    case: str
    #: what ``count`` and ``of`` count: ``launches``, or ``steps`` where a step is several
    #: graph launches (piecewise CUDA graphs: :class:`~nsysscope.model.Bursts`)
    unit: str = "launches"
    #: the steady launches (steps) of the case: that stall (``stalls``), that came after the
    #: GPU idled (``launch_bound``, and ``healthy`` with ``idle_over_us``), or that queued
    #: ahead of the GPU (``healthy``)
    count: int = 0
    of: int = 0  # the steady launches (steps) they are counted among
    klass: str | None = None  # ``stalls``: the class named (the costliest site's)
    #: ``stalls``: the place named, an index into the summary's (process's) ``sites``; None
    #: where the costliest site is not a stall
    site: int | None = None
    launches_per_step: float | None = None  # with ``unit`` steps: graph launches per step
    #: ``stalls``: the median overlap window (of a step's last launch, in steps)
    window_us: float | None = None
    #: ``launch_bound`` of a summary, in launches: the GPU idle gap between replays, p50
    idle_us: float | None = None
    gpu_busy: float | None = None  # ``healthy``: the fraction of the time the GPU was busy
    #: ``healthy`` where most launches came after the GPU idled: the launch-bound threshold
    #: they passed (None: most queued ahead)
    idle_over_us: float | None = None
    wait_us: float | None = None  # ``waits_for_peer``: the wait per step in collectives, p50
    #: ``processes_*``: the processes named, indices into ``processes`` (stalling ones the
    #: worst first; waiting; launch-bound); ``waits_for_peer`` of a summary: its process
    processes: list[int] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)  # ``processes_stall``: those that wait
    extra: dict[str, Any] = extra_field()


def notes_said(record: Record, facts: Sequence[Note]) -> list[str]:
    """``facts``, the notes of ``record``, said by the registered words (the sentences the
    file it was read from wrote beside them: for a code this version does not know)."""
    written = record.written("notes")
    return registry.words().notes(facts, written if isinstance(written, list) else None)


def written_notes(d: Mapping[str, Any], key: str = "notes",
                  facts: str = "note_facts") -> Mapping[str, Any]:
    """``d`` (a result's JSON) with its notes as values: those of a file from before they
    were kept are its sentences, each a note of code :data:`WRITTEN`."""
    if facts in d or key not in d:
        return d
    said = d[key]
    if not isinstance(said, list) or not all(isinstance(n, str) for n in said):
        raise ValueError(f"'{key}' is {shown(said)}, not a list (each item text)")
    return {**d, facts: [Note.written(n).to_dict() for n in said]}
