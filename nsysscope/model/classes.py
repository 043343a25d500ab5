"""The launch classes: what a steady-state graph launch's host wait did to the GPU, and the
one table of what is said and done about each (:data:`CLASS_TABLE`): its label, colour and
fix, whether it is a stall, how the gate checks it, where reports count it, and the summary
version that first counted it. The classifier (:mod:`nsysscope.analysis.pairing`), the
renderers, the palette, the figures, the verdict, the gate and the summary's JSON Schema read
it; a new class is a member of :class:`LaunchClass`, a row here and the rule that emits it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class LaunchClass(StrEnum):
    """A launch's class. A ``str`` enum: each member equals (and hashes like) its value, so the
    plain strings in tables and JSON (``"gpu_to_cpu"``) and the members are interchangeable.
    What each means is its row's :attr:`ClassRow.meaning`."""

    GPU_TO_CPU = "gpu_to_cpu"
    CPU_TO_GPU = "cpu_to_gpu"
    OTHER_STALL = "other_stall"
    LAUNCH_BOUND = "launch_bound"
    HEALTHY = "healthy"
    LAST = "last"
    NO_GPU_WORK = "no_gpu_work"

    @property
    def is_stall(self) -> bool:
        return self in STALL_CLASSES

    @classmethod
    def of(cls, name: str) -> LaunchClass | None:
        """The class named ``name``; None for a name no class has (a newer version's)."""
        return cls._value2member_map_.get(name)  # type: ignore[return-value]

    @property
    def row(self) -> ClassRow:
        """What is said and done about this class (:data:`CLASS_TABLE`)."""
        return _ROWS[self]


@dataclass(frozen=True)
class ClassRow:
    """One launch class and what every layer says and does about it."""

    klass: LaunchClass
    meaning: str
    #: the figures' legend for a launch of it
    label: str
    #: its colour everywhere (figures, HTML): Okabe & Ito (2008), safe for the common
    #: colour-vision deficiencies; plain hex, so HTML never needs matplotlib
    colour: str
    #: whether it broke overlap (counted in ``Summary.stalls`` too, gated, given sites)
    is_stall: bool = False
    #: whether :attr:`colour` is light: text on it is black
    light: bool = False
    #: whether a launch of it is judged (False: the last launch, one without GPU work):
    #: legends and bar charts show the judged classes
    judged: bool = True
    #: the figures' legend for a host wait that stalled a launch of it (None: none is drawn
    #: so; a wait the GPU outlasted is drawn as healthy's)
    wait_label: str | None = None
    #: the reports' row counting its steady launches (None: no row of its own)
    count_label: str | None = None
    #: the gate's check of its share of steady launches: the check's label, and the
    #: threshold (a field of ``GateThresholds``) its growth is held to; None: not gated
    gate_label: str | None = None
    gate_threshold: str | None = None
    #: what to change, where it has a site to fix (None: nothing to point at)
    fix: str | None = None
    #: what it is, as the headline names it (``a GPU→CPU readback at ... costs``; None: the
    #: headline never names it)
    cause: str | None = None
    #: the summary's minor version (``nsysscope.summary/1.N``) that first counted it: an
    #: older summary lacks its count and reads it as 0
    since: int = 0


#: every class, in the order reports, legends and the JSON list them
CLASS_TABLE: tuple[ClassRow, ...] = (
    ClassRow(
        LaunchClass.GPU_TO_CPU,
        "a stall caused by a device→host readback: the host waited for the in-flight launch "
        "(case 1)",
        label="gpu_to_cpu stall (readback)", colour="#D55E00", is_stall=True,
        wait_label="wait: gpu_to_cpu stall", count_label="stalls gpu_to_cpu (case 1)",
        gate_label="gpu_to_cpu stalls", gate_threshold="stall_pp",
        fix="Don't read GPU values on the hot path (.item(), .all(), .tolist(), bool(t)): "
        "decide on the CPU from the request parameters (e.g. a CPU-side greedy flag), or copy "
        "the value into pinned memory with non_blocking=True and wait on an event in the next "
        "round.", cause="a GPU→CPU readback"),
    ClassRow(
        LaunchClass.CPU_TO_GPU,
        "a stall caused by a host→device copy from pageable memory (case 2)",
        label="cpu_to_gpu stall (pageable upload)", colour="#E69F00", is_stall=True, light=True,
        wait_label="wait: cpu_to_gpu stall", count_label="stalls cpu_to_gpu (case 2)",
        gate_label="cpu_to_gpu stalls", gate_threshold="stall_pp",
        fix="Stage host inputs in preallocated pinned buffers and copy with non_blocking=True; "
        "a copy from pageable memory synchronises with the in-flight forward before the next "
        "launch.", cause="a CPU→GPU copy from pageable memory"),
    ClassRow(
        LaunchClass.OTHER_STALL, "any other wait that let the GPU run dry before the next launch",
        label="other stall", colour="#CC79A7", is_stall=True, wait_label="wait: other stall",
        count_label="stalls other", gate_label="other_stall stalls", gate_threshold="stall_pp",
        fix="The host waits for the in-flight launch before queuing the next one. Launch "
        "first, then wait only on the previous round's completion event.",
        cause="a host wait on the in-flight launch"),
    ClassRow(
        LaunchClass.LAUNCH_BOUND,
        "no stall, but the GPU idled longer than `--launch-bound-us` before the next replay "
        "(a slow host)",
        label="launch-bound gap", colour="#000000", count_label="launch-bound gaps",
        gate_label="launch-bound gaps", gate_threshold="launch_bound_pp",
        fix="The host is slower than the GPU: the next replay is issued after the GPU went "
        "idle. Trim per-step CPU work, or move it off the launching thread.",
        cause="a host slower than the GPU"),
    ClassRow(LaunchClass.HEALTHY, "the GPU still had work when the next launch came",
             label="healthy", colour="#009E73", wait_label="wait, GPU still busy after it"),
    ClassRow(LaunchClass.LAST, "the last launch on its stream: nothing follows to judge it by",
             label="last launch", colour="#999999", judged=False),
    ClassRow(LaunchClass.NO_GPU_WORK, "the profiler kept no GPU work for this launch",
             label="no GPU work", colour="#999999", judged=False),
)
_ROWS = {r.klass: r for r in CLASS_TABLE}

#: every class, in the order reports list them
LAUNCH_CLASSES: tuple[LaunchClass, ...] = tuple(r.klass for r in CLASS_TABLE)
#: the classes that broke overlap
STALL_CLASSES: tuple[LaunchClass, ...] = tuple(r.klass for r in CLASS_TABLE if r.is_stall)
#: the classes of launches that are not judged (nothing follows, or nothing ran)
NOT_JUDGED: tuple[LaunchClass, ...] = tuple(r.klass for r in CLASS_TABLE if not r.judged)
#: the classes whose share of steady launches the gate checks: the stalls, then launch-boundness
GATED_CLASSES: tuple[LaunchClass, ...] = tuple(r.klass for r in CLASS_TABLE if r.gate_threshold)
#: what to change, per class that has a site to fix
FIXES: dict[str, str] = {r.klass: r.fix for r in CLASS_TABLE if r.fix is not None}
#: what each class is, as the headline names it
CAUSES: dict[str, str] = {r.klass: r.cause for r in CLASS_TABLE if r.cause is not None}


def with_new_classes(d: Mapping[str, Any], minor: int) -> Mapping[str, Any]:
    """The summary ``d`` (JSON, of minor version ``minor``) with a count of 0 for every class
    a newer version added (:attr:`ClassRow.since`), in ``stalls`` and ``classes`` and in each
    process's: an older summary never counted it. A class its own version counts stays
    missing, and is refused (a summary that lost its stalls must not pass the gate)."""
    new = [r for r in CLASS_TABLE if r.since > minor]
    if not new:
        return d

    def filled(counts: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(counts)
        for name, rows in (("stalls", [r for r in new if r.is_stall]), ("classes", new)):
            if isinstance(out.get(name), dict):
                out[name] = {**{str(r.klass): 0 for r in rows}, **out[name]}
        return out

    out = filled(d)
    if isinstance(out.get("processes"), list):
        out["processes"] = [filled(p) if isinstance(p, Mapping) else p
                            for p in out["processes"]]
    return out


def schema_with_classes(schema: dict[str, Any]) -> dict[str, Any]:
    """The summary's JSON Schema (``docs/summary.schema.json``) with its lists of classes as
    :data:`CLASS_TABLE` says: the counts a summary of any 1.x version holds (a class added
    later is not required), and every class's name."""
    first = [str(r.klass) for r in CLASS_TABLE if r.since == 0]
    stalls = [str(r.klass) for r in CLASS_TABLE if r.since == 0 and r.is_stall]
    for where in (schema["properties"], schema["$defs"]["process"]["properties"]):
        where["stalls"]["required"] = stalls
        where["classes"]["required"] = first
    schema["$defs"]["klass"]["examples"] = [str(k) for k in LAUNCH_CLASSES]
    return schema
