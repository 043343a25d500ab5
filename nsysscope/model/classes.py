"""The launch classes: what a steady-state graph launch's host wait did to the GPU."""

from __future__ import annotations

from enum import StrEnum


class LaunchClass(StrEnum):
    """A launch's class. A ``str`` enum: each member equals (and hashes like) its value, so the
    plain strings in tables and JSON (``"gpu_to_cpu"``) and the members are interchangeable."""

    #: a device-to-host copy made the host wait for the in-flight launch (case 1)
    GPU_TO_CPU = "gpu_to_cpu"
    #: a copy from pageable host memory made the host wait (case 2)
    CPU_TO_GPU = "cpu_to_gpu"
    #: any other wait that let the GPU run dry before the next launch
    OTHER_STALL = "other_stall"
    #: no stall, but the next launch came long after the GPU went idle (a slow host)
    LAUNCH_BOUND = "launch_bound"
    HEALTHY = "healthy"
    #: the final launch: nothing follows it to judge
    LAST = "last"
    #: the profiler kept no GPU work for this launch
    NO_GPU_WORK = "no_gpu_work"

    @property
    def is_stall(self) -> bool:
        return self in STALL_CLASSES


#: every class, in the order reports list them
LAUNCH_CLASSES: tuple[LaunchClass, ...] = tuple(LaunchClass)
#: the classes that broke overlap
STALL_CLASSES: tuple[LaunchClass, ...] = (
    LaunchClass.GPU_TO_CPU, LaunchClass.CPU_TO_GPU, LaunchClass.OTHER_STALL)
#: the classes whose share of steady launches the gate checks: the stalls, then launch-boundness
GATED_CLASSES: tuple[LaunchClass, ...] = (*STALL_CLASSES, LaunchClass.LAUNCH_BOUND)

#: what to change, per class that has a site to fix
FIXES: dict[str, str] = {
    LaunchClass.GPU_TO_CPU: (
        "Don't read GPU values on the hot path (.item(), .all(), .tolist(), bool(t)): decide on "
        "the CPU from the request parameters (e.g. a CPU-side greedy flag), or copy the value into "
        "pinned memory with non_blocking=True and wait on an event in the next round."),
    LaunchClass.CPU_TO_GPU: (
        "Stage host inputs in preallocated pinned buffers and copy with non_blocking=True; a copy "
        "from pageable memory synchronises with the in-flight forward before the next launch."),
    LaunchClass.OTHER_STALL: (
        "The host waits for the in-flight launch before queuing the next one. Launch first, then "
        "wait only on the previous round's completion event."),
    LaunchClass.LAUNCH_BOUND: (
        "The host is slower than the GPU: the next replay is issued after the GPU went idle. "
        "Trim per-step CPU work, or move it off the launching thread."),
}

#: what each class is, as the headline names it (``a GPU→CPU readback at ... costs``)
CAUSES: dict[str, str] = {
    LaunchClass.GPU_TO_CPU: "a GPU→CPU readback",
    LaunchClass.CPU_TO_GPU: "a CPU→GPU copy from pageable memory",
    LaunchClass.OTHER_STALL: "a host wait on the in-flight launch",
    LaunchClass.LAUNCH_BOUND: "a host slower than the GPU",
}
