"""The normalised :class:`Trace` every reader makes (:mod:`.load`'s table: an nsys export,
:mod:`.nsys`; a torch.profiler JSON trace, :mod:`.kineto`), with what it can do as fields of
:class:`TraceMeta`, never as the name of its format: the layers above ask a trace whether it
has sync records or graph nodes, not which profiler made it.

Column convention: integer nanoseconds in ``*_ns`` columns, thread ids as nsys ``globalTid``
(pid and tid packed), ``corr_id`` for CUDA correlation ids, ``proc`` for the process key
(:func:`~nsysscope.trace.apis.process_of`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..model import Note, TraceInfo
from .python_samples import PythonSamples


@dataclass(frozen=True)
class Profiler:
    """What recorded a trace, and how to ask it for what the trace lacks: the hints a
    refusal or a note gives (the flags are the profiler's own words)."""

    name: str  # as reports name it ("nsys", "torch.profiler")
    #: what makes it record the CUDA calls at all
    record_cuda: str
    #: what makes it record each graph launch's GPU work
    record_gpu_work: str
    #: why a trace of it has no sync-to-event records (event waits are paired by timing)
    without_sync_records: str


#: NVIDIA Nsight Systems (an SQLite export, or a report it is exported from)
NSYS = Profiler(
    name="nsys", record_cuda="-t cuda", record_gpu_work="-t cuda --cuda-graph-trace=node",
    without_sync_records="no sync-to-event records in this export (needs nsys >= 2024 with "
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION.eventSyncId and CUDA_EVENT)")


@dataclass(frozen=True)
class TraceMeta(TraceInfo):
    """Identity of a trace (the :class:`~nsysscope.model.TraceInfo` every result names) and
    what the analysis needs to know about how it was recorded."""

    # SYNCHRONIZATION with eventSyncId: which event each sync waited on
    has_sync_records: bool = False
    has_event_records: bool = False  # CUDA_EVENT: which stream position each event marks
    has_nvtx: bool = False
    capture_start_ns: int = 0
    capture_end_ns: int = 0
    diagnostics: tuple[str, ...] = ()
    #: where the export's graph launches lie (first start, last end), for a time range that
    #: holds none of them: the hint of the error says where to look (None otherwise)
    launches_span_ns: tuple[int, int] | None = None
    #: the profiler that recorded it, and how to ask it for what a trace lacks
    profiler: Profiler = NSYS
    #: whether each graph replay's kernels are recorded (nsys --cuda-graph-trace=node, every
    #: torch.profiler trace), not the replay as one span (nsys's default)
    has_graph_nodes: bool = False
    #: whether a part of the trace can be read alone (``--from``/``--to``), and a long one in
    #: time windows (:mod:`.windows`): the SQL of an nsys export can; a JSON stream cannot
    can_window: bool = False
    #: what the reader left out of a damaged trace, for the report's notes (a code and values)
    reader_notes: tuple[Note, ...] = ()
    #: the wall-clock time of the timeline's zero (Unix epoch, ns; None: not recorded): nsys's
    #: session start, a torch.profiler trace's base time (0 where its timestamps are the
    #: epoch's own). Files of one job are put on one time axis by it
    session_start_ns: int | None = None
    #: the rank the capture names (torch.profiler's ``distributedInfo``, the launcher's
    #: environment: ``RANK``, ``SLURM_PROCID``...), for a trace of one rank
    rank: int | None = None
    #: every CUDA API call the trace holds, of any kind (``api`` keeps the kinds the analysis
    #: reads: launches, syncs, copies, events): what a refusal counts; -1 where not counted
    #: (an nsys export is counted only where it has no graph launch: it costs a scan)
    cuda_calls: int = -1

    @property
    def info(self) -> TraceInfo:
        """Just the identity, as results carry it."""
        return TraceInfo(path=self.path, nsys_version=self.nsys_version,
                         schema_version=self.schema_version, gpus=self.gpus,
                         graph_trace=self.graph_trace, time_range_ns=self.time_range_ns)


@dataclass
class Trace:
    """The normalised trace every analysis reads. Analyses never issue SQL.

    ``proc`` is the process key (:func:`.apis.process_of`); correlation ids, streams, event
    sync ids and device ids mean something only together with it."""

    meta: TraceMeta
    api: pd.DataFrame  # start_ns, end_ns, tid, corr_id, proc, status (return code), name
    graph_work: pd.DataFrame  # proc, corr_id, gpu_start_ns, gpu_end_ns, stream, device, n_ops,
    #                           graph_exec (the replayed exec: nsys's id, else a fingerprint)
    gpu_ops: pd.DataFrame  # eager GPU work: start_ns, end_ns, stream, device, corr_id, proc,
    #                        kind, copy_kind, src_kind, dst_kind, bytes
    syncs: pd.DataFrame  # proc, corr_id, event_sync_id, stream
    event_records: pd.DataFrame  # proc, corr_id, event_sync_id, stream
    nvtx: pd.DataFrame  # start_ns, end_ns, tid, text (categorical: a few names repeat)
    threads: pd.DataFrame  # tid, thread_name
    processes: pd.DataFrame = field(default_factory=pd.DataFrame)  # proc, pid, name
    collectives: pd.DataFrame = field(default_factory=pd.DataFrame)  # NCCL kernels: proc,
    #                        corr_id, start_ns, end_ns, stream, device, name
    enums: dict[str, int] = field(default_factory=dict)  # htod, dtoh, pageable
    source: Path | None = None  # the SQLite file read
    #: Python stacks the trace itself holds (Kineto ``python_function`` ranges), one
    #: pseudo-sample per CUDA call; None: read nsys Python samples from ``source``
    python: PythonSamples | None = None
