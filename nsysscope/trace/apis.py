"""The CUDA API calls nsysscope reads, by what they do, and the process key of a thread.

nsys stores each call under its versioned name (``cudaGraphLaunch_v10000``); these are the
base names (:func:`~nsysscope.trace.nsys.schema.api_base_name`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

LAUNCH_APIS = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})
SYNC_APIS = frozenset({
    "cudaStreamSynchronize", "cudaEventSynchronize", "cudaDeviceSynchronize",
    "cudaThreadSynchronize", "cuStreamSynchronize", "cuEventSynchronize", "cuCtxSynchronize"})
RECORD_APIS = frozenset({"cudaEventRecord", "cudaEventRecordWithFlags", "cuEventRecord",
                         "cuEventRecordWithFlags"})
#: a stream waits for an event recorded on another stream (``torch.cuda.Stream.wait_stream``)
STREAM_WAIT_APIS = frozenset({"cudaStreamWaitEvent", "cuStreamWaitEvent"})
#: non-blocking completion checks: a host that polls them in a loop is waiting
QUERY_APIS = frozenset({"cudaEventQuery", "cudaStreamQuery", "cuEventQuery", "cuStreamQuery"})
#: building CUDA graphs: a capture's begin and end, and the instantiation of an executable
#: graph (start-up: :mod:`nsysscope.analysis.startup`)
CAPTURE_APIS = frozenset({
    "cudaStreamBeginCapture", "cudaStreamBeginCaptureToGraph", "cudaStreamEndCapture",
    "cudaGraphInstantiate", "cudaGraphInstantiateWithFlags", "cudaGraphInstantiateWithParams",
    "cuStreamBeginCapture", "cuStreamBeginCaptureToGraph", "cuStreamEndCapture",
    "cuGraphInstantiate", "cuGraphInstantiateWithFlags", "cuGraphInstantiateWithParams"})
#: of :data:`CAPTURE_APIS`, the calls that make a graph executable
INSTANTIATE_APIS = frozenset(n for n in CAPTURE_APIS if "Instantiate" in n)


#: nsys ``ENUM_CUDA_MEMCPY_OPER``: a copy's kind by id (the same ids in every export schema
#: nsysscope reads; torch.profiler traces name the kind, and are given these ids)
COPY_KINDS = {0: "unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD",
              7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "UVM HtoD", 12: "UVM DtoH",
              13: "UVM DtoD"}
#: nsys ``ENUM_CUDA_MEM_KIND``: a copy's source or destination memory by id
MEMORY_KINDS = {0: "pageable", 1: "pinned", 2: "device", 3: "array", 4: "managed",
                5: "device static", 6: "managed static", 7: "unknown"}
#: the ids the analysis asks for (``Trace.enums``), where an export has no enum tables
DEFAULT_ENUMS = {"htod": 1, "dtoh": 2, "pageable": 0}


def is_copy_api(name: str) -> bool:
    return name.startswith(("cudaMemcpy", "cuMemcpy"))


def wanted_api(name: str) -> bool:
    return (name in LAUNCH_APIS or name in SYNC_APIS or name in RECORD_APIS
            or name in STREAM_WAIT_APIS or name in QUERY_APIS or name in CAPTURE_APIS
            or is_copy_api(name))


def process_of(global_tid: Any) -> np.ndarray:
    """The process key of an nsys ``globalTid`` or ``globalPid``: its VM id and pid (the bits
    above the thread id). CUDA correlation ids, streams, events and device ids are only
    unique within one process, so every join between tables is keyed by it too."""
    return np.asarray(global_tid, dtype=np.int64) >> 24


def process_of_pid(global_pid: Any) -> np.ndarray:
    """:func:`process_of` of a ``globalPid`` column read as ``IFNULL(globalPid, -1)``: a row
    without one stays -1 (its process is not known)."""
    pid = np.asarray(global_pid, dtype=np.int64)
    return np.where(pid >= 0, pid >> 24, -1)
