"""The summary of one analysed trace: what ``report`` prints and ``summarize`` writes.

Everything here is a frozen dataclass of plain values, so ``to_dict()`` is JSON and
``from_dict()`` reads it back: ``nsysscope summarize`` and ``report --format json`` write a
:class:`Summary`, the gate reads two, and every renderer formats one.

Units are in the names: ``*_us`` microseconds, ``*_ns`` nanoseconds. Three names from before
that rule say less than they should and stay, because the JSON is a public contract:

* ``Summary.gpu_gap_us`` holds the percentiles of each steady launch's **GPU idle gap**: the
  time from the end of its replay on the GPU to the start of the next replay on that stream
  (the analysis column ``gpu_idle_ns``, in microseconds). It is not the analysis column
  ``gpu_gap_ns``.
* ``gpu_busy`` and ``StallSite.share`` are fractions 0..1 (new names say ``_frac``); percent
  appears only when a renderer shows them.
* ``window_us`` is the percentiles of the effective overlap window in a :class:`Summary`, the
  per-launch values in :class:`Distributions`, and a threshold in the gate's settings.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import registry
from .checks import check_counts, check_rate
from .classes import LaunchClass, with_new_classes
from .facts import Note, Verdict, notes_said, written_notes
from .headline import Headline
from .schema import (
    Record,
    check_schema,
    extra_field,
    json_text,
    minor_of,
    optional,
    shown,
    to_plain,
)
from .serving import GraphExec, IdlePeriods, Startup
from .sites import LatentSite, Percentiles, StallSite

#: bump the major version when a field changes meaning (readers refuse a newer major), the
#: minor version when fields are added
#: 1.1 added (keys only, so a 1.0 reader reads it): processes, if_fixed, latent,
#: sites[].pid/mean_polls/speedup_if_fixed, distributions.gpu_work_us, and report --format json
#: writes the distributions too
#: 1.2 added trace.time_range_ns
#: 1.3 added sites[].launches_per_s_if_fixed
#: 1.4 added bursts and processes[].bursts
#: 1.5 added headline
#: 1.6 added processes[].rank/waits_for_rank/waits_for_missing_rank/collectives
#: 1.7 added server_launches_per_s, processes[].group, if_fixed.withheld/launches_per_s_low/
#: speedup_low
#: 1.8 added startup, idle, gpu_busy_capture and graphs (a server's trace)
#: 1.9 added note_facts (each note's code and values; ``notes`` is made of them)
#: 1.10 added verdict_facts and processes[].verdict_facts (the verdict's values)
SCHEMA = "nsysscope.summary/1.10"
_CLASS_NAMES = frozenset(c.value for c in LaunchClass)


#: the names reports give the profilers whose readers set no nsys version (``nsys_version``
#: "none"), by the first word the reader writes in ``schema_version`` (``kineto 1.0``)
_PROFILER_NAMES = {"kineto": "torch.profiler"}


def profiler_of(nsys_version: str, schema_version: str | None = None) -> str:
    """The profiler that made a trace, from the identity results keep of it (summaries of
    every version, where it is no field of its own): ``nsys``, where there is an nsys
    version; else the one its reader names first in ``schema_version`` (a gate's side keeps
    none: torch.profiler, the one other reader)."""
    if nsys_version != "none":
        return "nsys"
    tool = (schema_version or "kineto").split(" ")[0]
    return _PROFILER_NAMES.get(tool, tool)


@dataclass(frozen=True)
class TraceInfo(Record):
    """Which trace a result is about: its path as given, and what captured it."""

    path: str
    nsys_version: str
    schema_version: str
    gpus: tuple[str, ...]
    graph_trace: str
    #: the part of the timeline read (``report --from/--to``), start and end in nanoseconds
    #: (None: from the start, to the end); None: the whole trace
    time_range_ns: tuple[int | None, int | None] | None = None
    extra: dict[str, Any] = extra_field()
    nested = {"gpus": tuple, "time_range_ns": optional(tuple)}

    @property
    def profiler_name(self) -> str:
        """The profiler that made the trace (:func:`profiler_of`)."""
        return profiler_of(self.nsys_version, self.schema_version)


@dataclass(frozen=True)
class Distributions(Record):
    """Per-launch steady-state values the gate compares (sampled when the trace is large)."""

    window_us: list[float | None]  # the effective overlap window of each launch
    gpu_idle_us: list[float | None]  # the GPU idle gap after each launch's replay
    klass: list[str]  # each launch's LaunchClass value
    sampled_from: int  # steady launches the values were sampled from
    #: the GPU's work for each launch: its replay plus other GPU work before the next replay
    #: (so a launch's period is its ``gpu_work_us`` plus its ``gpu_idle_us``); empty in
    #: summaries written before it was kept
    gpu_work_us: list[float | None] = field(default_factory=list)
    extra: dict[str, Any] = extra_field()

    def check_values(self) -> None:
        n = len(self.klass)
        lengths = {"window_us": len(self.window_us), "gpu_idle_us": len(self.gpu_idle_us)}
        if self.gpu_work_us:
            lengths["gpu_work_us"] = len(self.gpu_work_us)
        for name, length in lengths.items():
            if length != n:
                raise ValueError(f"'{name}' has {length} values for {n} launches (klass)")
        if n > self.sampled_from:
            raise ValueError(f"'sampled_from' is {self.sampled_from}, fewer than the {n} "
                             "launches it holds")
        for name in lengths:
            bad = next((v for v in getattr(self, name) if v is not None and
                        not math.isfinite(v)), None)
            if bad is not None:  # JSON has no NaN or infinity; Python's reader takes them
                raise ValueError(f"'{name}' holds {bad}, not a time")
        unknown = next((k for k in self.klass if k not in _CLASS_NAMES), None)
        if unknown is not None:
            raise ValueError(f"'klass' holds {shown(unknown)}, not a launch class")


@dataclass(frozen=True)
class IfFixed(Record):
    """The projected launch rate with every stall site fixed, and its ratio to the measured
    one (1.0: nothing to fix)."""

    launches_per_s: float | None
    speedup: float | None
    #: why no gain is projected, where the model lacks what it needs (None: projected)
    withheld: str | None = None
    #: the low end of the gain, where the trace cannot tell whether the fixed steps' GPU work
    #: runs longer back to back than after the idle gaps it was measured after (None: no range)
    launches_per_s_low: float | None = None
    speedup_low: float | None = None
    extra: dict[str, Any] = extra_field()


#: fewer steady bursts than this are judged per launch (:attr:`Bursts.several`)
MIN_BURSTS = 10


@dataclass(frozen=True)
class Bursts(Record):
    """The steady launches grouped into bursts: the launches a process issues between two of
    its host blocks (one per step with the whole step in one graph, one per piece with
    piecewise CUDA graphs; :mod:`nsysscope.analysis.bursts`). A burst stalls when one of its
    launches does; where bursts hold several launches (``launches_p50`` >= 2) the verdict
    counts them, not launches."""

    steady: int
    stalled: int
    launches_p50: float  # launches per burst, median
    window_us: Percentiles  # the overlap window of each burst's last launch
    launch_bound: int = 0  # bursts that left the GPU idle past the threshold without a stall
    extra: dict[str, Any] = extra_field()
    nested = {"window_us": Percentiles.from_dict}

    @property
    def several(self) -> bool:
        """Whether a burst typically holds several launches (piecewise graphs), over enough
        bursts to judge (a launching thread that never blocks makes one burst of all)."""
        return self.launches_p50 >= 2 and self.steady >= MIN_BURSTS


def counted_steps(s: Summary | ProcessSummary) -> Bursts | None:
    """``s``'s bursts where its verdict counts steps rather than launches (a step is several
    launches: :attr:`Bursts.several`), else None."""
    return s.bursts if s.bursts is not None and s.bursts.several else None


@dataclass(frozen=True)
class ProcessSummary(Record):
    """One process of the trace that launched CUDA graphs: an engine, or one tensor-parallel
    rank. The same steady-state numbers as :class:`Summary`, for this process alone, and how
    long it waited inside collectives for a slower peer.

    ``status`` says what limits the process: ``stalls`` (its own host waits let the GPU run
    dry), ``waits_for_peer`` (its own launches are on time, but its GPU spins in collectives
    waiting for ``waits_for_pid``, or for a rank not in the input), ``launch_bound``,
    ``healthy``, or ``idle`` (no steady launch to judge)."""

    pid: int
    name: str
    device: int  # the CUDA device id as the process saw it
    status: str
    verdict: str
    launches: int
    steady_launches: int
    warmup_launches: int
    stalls: dict[str, int]
    classes: dict[str, int]
    no_wait: int
    window_us: Percentiles
    gpu_gap_us: Percentiles
    gpu_busy: float | None
    launches_per_s: float | None
    collective_wait_us: Percentiles  # per steady launch: time in collectives beyond the peer
    waits_for_pid: int | None  # the peer it waited for longest (None: none)
    waits_in: str | None  # the collective it waited in longest (``all-reduce``...)
    sites: list[StallSite]
    if_fixed: IfFixed | None = None
    distributions: Distributions | None = None
    bursts: Bursts | None = None  # None in a summary written before 1.4
    #: its rank, where the trace says it (torch.distributed's or the launcher's environment,
    #: the CUDA device of a rank of a group, a file's place in a job); None before 1.6
    rank: int | None = None
    waits_for_rank: int | None = None  # the rank of ``waits_for_pid``, where known
    #: its collectives wait for a rank whose trace is not in the input (one file of a job)
    waits_for_missing_rank: bool = False
    collectives: bool = False  # it ran collectives (NCCL kernels): a rank of a group
    #: the group of ranks it runs collectives with, named by its first member's pid (None)
    group: int | None = None
    verdict_facts: Verdict | None = None  # ``verdict`` as values (None before 1.10)
    extra: dict[str, Any] = extra_field()
    nested = {"window_us": Percentiles.from_dict, "gpu_gap_us": Percentiles.from_dict,
              "collective_wait_us": Percentiles.from_dict, "if_fixed": optional(IfFixed.from_dict),
              "sites": lambda sites: [StallSite.from_dict(s) for s in sites],
              "distributions": optional(Distributions.from_dict),
              "bursts": optional(Bursts.from_dict), "verdict_facts": optional(Verdict.from_dict)}

    def check_values(self) -> None:
        check_counts(self)

    @property
    def label(self) -> str:
        """How reports name it: ``rank 1 (pid 938)``, or ``pid 938`` where its rank is not
        known."""
        return f"pid {self.pid}" if self.rank is None else f"rank {self.rank} (pid {self.pid})"

    @property
    def waits_for(self) -> str | None:
        """The peer it waits for, as reports name it (None: none)."""
        if self.waits_for_missing_rank and self.waits_for_pid is None:
            return "a rank not in the input"
        if self.waits_for_pid is None:
            return None
        return f"pid {self.waits_for_pid}" if self.waits_for_rank is None else \
            f"rank {self.waits_for_rank} (pid {self.waits_for_pid})"


@dataclass(frozen=True)
class Summary(Record):
    """The steady-state summary of one trace (warm-up and the last launch excluded)."""

    trace: TraceInfo
    verdict: str
    overlap_ok: bool
    launches: int
    steady_launches: int
    warmup_launches: int
    stalls: dict[str, int]  # steady state, per stall class
    classes: dict[str, int]  # steady state, every class
    no_wait: int  # steady launches the host never had to wait for
    window_us: Percentiles  # the effective overlap window
    gpu_gap_us: Percentiles  # the GPU idle gap after each replay (see the module docstring)
    gpu_busy: float | None  # fraction 0..1 of the steady span the GPU was busy
    launches_per_s: float | None
    steps_per_s: float | None  # NVTX "step N" ranges per second, when the trace has them
    sites: list[StallSite]
    config: dict[str, Any]
    #: the launch rate with every stall site fixed (projected from the trace)
    if_fixed: IfFixed | None = None
    #: hot-path patterns that will stall once the current stalls are fixed
    latent: list[LatentSite] = field(default_factory=list)
    #: one entry per process that launched graphs, sorted by pid; the numbers above are their
    #: totals (counts summed, percentiles pooled, launch rates added)
    processes: list[ProcessSummary] = field(default_factory=list)
    distributions: Distributions | None = None
    bursts: Bursts | None = None  # None in a summary written before 1.4
    #: the first line of every report: the costliest cause and its gain (None before 1.5)
    headline: Headline | None = None
    #: the launch rate of its servers: the ranks of a group step together, counted once (their
    #: mean); independent processes added (None before 1.7)
    server_launches_per_s: float | None = None
    startup: Startup | None = None  # a server's start-up, left out (None: none, or before 1.8)
    idle: IdlePeriods | None = None  # its idle periods, left out (None: none, or before 1.8)
    gpu_busy_capture: float | None = None  # GPU busy, idle included (None before 1.8)
    graphs: list[GraphExec] = field(default_factory=list)  # per graph exec (bucket), >= 2
    #: what limits the analysis, as values: each note's code and values (:attr:`notes` says
    #: them); a summary from before 1.9 has only sentences, read as notes of code ``written``
    note_facts: list[Note] = field(default_factory=list)
    verdict_facts: Verdict | None = None  # ``verdict`` as values (None before 1.10)
    schema: str = SCHEMA
    extra: dict[str, Any] = extra_field()
    nested = {"trace": TraceInfo.from_dict, "window_us": Percentiles.from_dict,
              "gpu_gap_us": Percentiles.from_dict,
              "sites": lambda sites: [StallSite.from_dict(s) for s in sites],
              "processes": lambda ps: [ProcessSummary.from_dict(p) for p in ps],
              "if_fixed": optional(IfFixed.from_dict),
              "latent": lambda ls: [LatentSite.from_dict(x) for x in ls],
              "distributions": optional(Distributions.from_dict),
              "bursts": optional(Bursts.from_dict), "headline": optional(Headline.from_dict),
              "startup": optional(Startup.from_dict), "idle": optional(IdlePeriods.from_dict),
              "graphs": lambda gs: [GraphExec.from_dict(g) for g in gs],
              "note_facts": lambda ns: [Note.from_dict(n) for n in ns],
              "verdict_facts": optional(Verdict.from_dict)}
    said = {"notes": "config"}

    def _repr_html_(self) -> str | None:
        return registry.render_fragment("summary", self)

    @property
    def notes(self) -> list[str]:
        """What limits the analysis (no Python samples, an older export, lost data), said
        from :attr:`note_facts` by the registered words (:mod:`nsysscope.render.notes`)."""
        return notes_said(self, self.note_facts)

    def __call__(self) -> Summary:
        """``t.summary()`` from when an OpenTrace's summary was a method: the summary itself,
        with a DeprecationWarning (it is a property now, as the trace's tables are)."""
        warnings.warn("OpenTrace.summary is a property: write t.summary, not t.summary()",
                      DeprecationWarning, stacklevel=2)
        return self

    def check_values(self) -> None:
        check_counts(self)
        check_rate("steps_per_s", self.steps_per_s)

    @property
    def rate(self) -> float | None:
        """The launch rate reports show: its servers' (the ranks of a group step together,
        counted once), where the summary says it, else its processes' added."""
        return self.launches_per_s if self.server_launches_per_s is None else \
            self.server_launches_per_s

    def rate_if(self, speedup: float | None, projected: float | None) -> float | None:
        """The projected rate reports show for ``speedup`` (``projected``: its processes'
        rates added, shown as it is where the processes are all servers)."""
        if self.rate == self.launches_per_s:
            return projected
        return None if self.rate is None or speedup is None else \
            round(self.rate * speedup, 2)

    # -- serialisation ---------------------------------------------------------------------
    def to_dict(self, with_distributions: bool = True) -> dict[str, Any]:
        """The JSON object ``nsysscope summarize`` writes (a gate side), or without the
        per-launch distributions (a few KB less per trace, but no gate side) where the
        summary is part of a larger result."""
        d: dict[str, Any] = to_plain(self)
        if not with_distributions:
            d.pop("distributions")
            for p in d["processes"]:
                p.pop("distributions")
        return d

    def to_json(self, with_distributions: bool = True, indent: int | None = 2) -> str:
        """:meth:`to_dict` as JSON text: by default what ``nsysscope summarize`` and ``report
        --format json`` write, byte for byte (:func:`.schema.json_text`: each per-launch list
        of the ``distributions`` on one line). ``indent=None``: one line."""
        return json_text(self.to_dict(with_distributions), indent, "distributions")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Summary:
        """Read a summary back. ValueError or KeyError when ``d`` is not one,
        :class:`~nsysscope.errors.NewerSchema` when a newer nsysscope wrote it."""
        schema = check_schema(d, SCHEMA, "summary")
        return super().from_dict(written_notes(with_new_classes(d, minor_of(schema))))


def summary_in(x: Any) -> Summary | None:
    """The :class:`Summary` that ``x`` is or holds: a Summary, an Analysis's ``summary``
    attribute, an OpenTrace's ``summary`` property; None for anything else."""
    s = getattr(x, "summary", x)
    if callable(s) and not isinstance(s, Summary):  # a method of a user's own type
        s = s()
    return s if isinstance(s, Summary) else None
