"""Read a torch.profiler (Kineto) Chrome-trace JSON into the normalised :class:`Trace`.

``torch.profiler.profile(activities=[CPU, CUDA], with_stack=True)`` and
``export_chrome_trace("x.pt.trace.json.gz")`` (sglang's ``/start_profile``, vLLM's
``VLLM_TORCH_PROFILER_DIR``) write one JSON object whose ``traceEvents`` array holds, as
complete events (``"ph": "X"``, ``ts``/``dur`` in microseconds):

* ``cuda_runtime`` / ``cuda_driver``: the CUDA calls (``cudaGraphLaunch``,
  ``cudaStreamSynchronize``, ``cudaMemcpyAsync``...) with ``args.correlation``, on the host
  process and thread (``pid``, ``tid``);
* ``kernel``, ``gpu_memcpy``, ``gpu_memset``: GPU work, ``pid`` = device, ``tid`` = stream,
  ``args.correlation`` = the call that enqueued it. The kernels, copies and memsets of a CUDA
  graph replay carry the correlation id of its ``cudaGraphLaunch``. A copy's kinds are in its
  name: ``Memcpy DtoH (Device -> Pinned)``;
* ``user_annotation`` (``record_function`` ranges: ``step 12``, ``sample``) and ``cpu_op``
  (``aten::`` ops): they become the NVTX table (``ProfilerStep#N`` becomes ``step N``);
* ``python_function`` (``with_stack=True``): ``file.py(line): function`` ranges, nested, with
  ``args["Python id"]`` and ``args["Python parent id"]``. ``line`` is the function's first
  line (Kineto records the code object, not the line executing), 0 where it records none;
* ``cuda_sync`` (with ``experimental_config=_ExperimentalConfig(enable_cuda_sync_events=True)``,
  PyTorch >= 2.3): what each sync call waited on, ``args.cuda_sync_kind`` ``Stream Sync``,
  ``Event Sync``, ``Context Sync`` or ``Stream Wait Event``, with the stream and, for an event,
  ``wait_on_cuda_event_record_corr_id`` (the ``cudaEventRecord`` it waits on) and
  ``wait_on_stream``.

Category names of PyTorch < 1.10 (``Runtime``, ``Kernel``, ``Memcpy``, ``Operator``) are
read as today's.

Metadata events (``"ph": "M"``) name processes and threads.

The file is read as a stream: one JSON event at a time is decoded (``json``'s C scanner on a
1 MB window of text, gzip or xz decompressed on the fly), and only the fields the analysis
needs of the event kinds it needs are kept, in typed arrays. Memory is therefore that of the
kept events (32 bytes a ``python_function``: start, duration, thread, interned name; 56 a CUDA
call, 96 a GPU op), not of the file's JSON objects. The stdlib reader was measured against
ijson (yajl2_c backend) and is faster on these files (bench/README.md), so it needs no
dependency.

The ``cuda_sync`` events become ``syncs`` and ``event_records`` as an nsys export's sync and
event records do (the record's correlation id is the event's id), so event waits are paired
through them; without them (the default) both are empty, :attr:`TraceMeta.has_sync_records`
is False, and the analysis pairs event waits by timing and says so.

Times are integer nanoseconds from the earliest timestamp of the file. ``ts`` are Unix-epoch
microseconds (PyTorch 1.x to ~2.3: 1.6e15-1.7e15) or microseconds from a base time (since
~2.4, ``baseTimeNanoseconds``); each is made relative to the file's first time as it is read,
exactly (epoch times with a fraction are decoded as decimals: :mod:`.stream`), so that float
math stays exact to the nanosecond. An event whose time is missing, not a number or beyond
any clock is left out, counted by kind in a note. Thread ids are nsys-style global ids
``(pid << 24) | tid`` and the process key is the pid.

Python stacks: for every CUDA call the analysis uses (launch, sync, copy, event record,
query, stream wait) the stack of ``python_function`` ranges enclosing it on its thread,
innermost first (C functions, ``<built-in ...>``, left out as nsys's sampler does), is one
pseudo-sample at the call's midpoint in :attr:`Trace.python`; the analysis votes on them as
on nsys Python samples, so a stall is attributed to the innermost user function around the
blocking call.
"""

from .build import TORCH_PROFILER, build_trace, read_kineto
from .events import copy_kinds
from .stacks import enclosing_stacks, python_stacks
from .stream import JsonStream, open_text

__all__ = ["TORCH_PROFILER", "JsonStream", "build_trace", "copy_kinds", "enclosing_stacks",
           "open_text", "python_stacks", "read_kineto"]
