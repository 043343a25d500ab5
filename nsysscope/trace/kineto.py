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
  line (Kineto records the code object, not the line executing).

Metadata events (``"ph": "M"``) name processes and threads.

The file is read as a stream: one JSON event at a time is decoded (``json``'s C scanner on a
1 MB window of text, gzip or xz decompressed on the fly), and only the fields the analysis
needs of the event kinds it needs are kept, in typed arrays. Memory is therefore that of the
kept events (~50 bytes a ``python_function``, less for the rest), not of the file's JSON
objects. The stdlib reader was measured against ijson (yajl2_c backend) and is faster on
these files (bench/README.md), so it needs no dependency.

Kineto records no event-sync ids and no stream for a sync, so ``syncs`` and
``event_records`` are empty and :attr:`TraceMeta.has_sync_records` is False: the analysis
pairs event waits by timing, and says so. Times are integer nanoseconds from the earliest
timestamp of the file (``ts`` are absolute microseconds; kept relative so that float math in
the analysis stays exact to the nanosecond). Thread ids are nsys-style global ids
``(pid << 24) | tid`` and the process key is the pid.

Python stacks: for every CUDA call the analysis uses (launch, sync, copy, event record,
query, stream wait) the stack of ``python_function`` ranges enclosing it on its thread,
innermost first (C functions, ``<built-in ...>``, left out as nsys's sampler does), is one
pseudo-sample at the call's midpoint in :attr:`Trace.python`; the analysis votes on them as
on nsys Python samples, so a stall is attributed to the innermost user function around the
blocking call.
"""

from __future__ import annotations

import codecs
import gzip
import json
import lzma
import re
import zlib
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pandas as pd

from ..errors import NotAnNsysExport, UnreadableInput
from .load import GRAPH_WORK_COLUMNS, LAUNCH_APIS, Trace, TraceMeta, _wanted_api
from .python_samples import NO_STACKS, OK, PythonSamples
from .schema import api_base_name
from .sources import GZIP_MAGIC, XZ_MAGIC

#: what TraceMeta says for a Kineto trace
FORMAT = "kineto"

_CHUNK = 1 << 20  # characters decoded per read
#: one JSON value (an event, a metadata field) larger than this is taken as corrupt
_MAX_VALUE = 64 << 20
_INT = "int64"

# event categories, as Kineto writes them (current names first, torch < 1.10 names after)
_API, _KERNEL, _MEMCPY, _MEMSET, _PY, _ANNOT, _OP, _SPAN = range(8)
_CATEGORIES = {
    "cuda_runtime": _API, "cuda_driver": _API, "runtime": _API, "driver": _API,
    "kernel": _KERNEL, "gpu_memcpy": _MEMCPY, "memcpy": _MEMCPY,
    "gpu_memset": _MEMSET, "memset": _MEMSET, "python_function": _PY,
    "user_annotation": _ANNOT, "cpu_op": _OP, "operator": _OP, "trace": _SPAN,
}
_GPU_KINDS = ["kernel", "memcpy", "memset"]

# copy kinds and memory kinds: the ids nsys uses (ENUM_CUDA_MEMCPY_OPER, ENUM_CUDA_MEM_KIND)
COPY_KINDS = {"HtoD": 1, "DtoH": 2, "HtoA": 3, "AtoH": 4, "AtoA": 5, "AtoD": 6, "DtoA": 7,
              "DtoD": 8, "HtoH": 9, "PtoP": 10}
MEMORY_KINDS = {"pageable": 0, "pinned": 1, "device": 2, "array": 3, "managed": 4,
                "device static": 5, "managed static": 6, "unknown": 7}
ENUMS = {"htod": 1, "dtoh": 2, "pageable": 0}
_COPY_NAME = re.compile(r"^\s*Memcpy\s+(\w+)(?:\s*\(\s*([^)>]*?)\s*->\s*([^)]*?)\s*\))?", re.I)
_PY_NAME = re.compile(r"^(.*)\((\d+)\): (.*)$", re.S)
_PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_THREAD_NAME = re.compile(r"^thread \d+ \((.*)\)$")
_WS = re.compile(r"[ \t\r\n]*").match
_SEP = re.compile(r"[ \t\r\n,]*").match
_decode = json.JSONDecoder().raw_decode


# -- reading the JSON as a stream ---------------------------------------------------------------

def open_text(path: Path) -> BinaryIO:
    """``path`` as a binary stream, gzip or xz decompressed by its first bytes."""
    with open(path, "rb") as f:
        magic = f.read(6)
    if magic.startswith(GZIP_MAGIC):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if magic.startswith(XZ_MAGIC):
        return lzma.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


class JsonStream:
    """One pass over a JSON document: its top-level object's keys one by one, and the
    elements of its ``traceEvents`` array one at a time (a bare top-level array is taken as
    the events). Text is decoded in windows of ``_CHUNK`` characters; every value is decoded
    by ``json``'s C scanner (``raw_decode``) once it lies whole in the window."""

    def __init__(self, f: BinaryIO, path: Path) -> None:
        self.f, self.path = f, path
        self.text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.offset = 0  # characters dropped from the front of buf
        self.count = 0

    # reading
    def _more(self, at_least: int = _CHUNK) -> bool:
        if self.eof:
            return False
        want = max(_CHUNK, at_least)
        try:
            raw = self.f.read(want)
        except (EOFError, zlib.error, lzma.LZMAError, gzip.BadGzipFile) as e:
            raise UnreadableInput(f"{self.path}: corrupt or truncated compressed file "
                                  f"({str(e) or type(e).__name__})") from None
        except OSError as e:
            raise UnreadableInput(f"{self.path}: cannot read: {e.strerror or e}") from None
        chunk = self.text.decode(raw, final=not raw)
        if not raw:
            self.eof = True
        self.offset += self.pos
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0
        return bool(raw) or bool(chunk)

    def _peek(self) -> str:
        """The next character that is not white space ('' at the end)."""
        while True:
            self.pos = _WS(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def _value(self) -> Any:
        while True:
            try:
                value, end = _decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                self._after_error(e, self.pos)
                continue
            # a number or literal cut by the window's end decodes too: read on and again
            if end >= len(self.buf) and not self.eof and self._more():
                continue
            self.pos = end
            return value

    def _after_error(self, e: json.JSONDecodeError, pos: int) -> None:
        """Read on when the value at ``pos`` may just be cut by the window's end; raise when
        the file ends there (truncated) or the text is not JSON (corrupt)."""
        cut = e.msg.startswith("Unterminated string") or \
            len(self.buf) - e.pos <= 16 and "\n" not in self.buf[e.pos:]
        if not cut or len(self.buf) - pos > _MAX_VALUE:
            raise NotAnNsysExport(
                f"{self.path}: corrupt torch.profiler trace: invalid JSON at character "
                f"{self.offset + e.pos} ({e.msg})") from None
        self.pos = pos
        if not self._more(len(self.buf) - pos):
            raise self._truncated() from None

    def _truncated(self) -> NotAnNsysExport:
        return NotAnNsysExport(
            f"{self.path}: truncated torch.profiler trace: the JSON ends after {self.count} "
            "events, in the middle of the trace; copy or export it again")

    def _expect(self, char: str) -> None:
        c = self._peek()
        if c != char:
            if not c:
                raise self._truncated()
            raise NotAnNsysExport(f"{self.path}: corrupt torch.profiler trace: expected "
                                  f"'{char}' at character {self.offset + self.pos}, found "
                                  f"{c!r}")
        self.pos += 1

    # structure
    def top(self) -> str:
        """``{`` or ``[``: how the document starts (anything else is not JSON)."""
        return self._peek()

    def fields(self) -> Iterator[str]:
        """The top-level object's keys; the caller reads each value with :meth:`value`,
        :meth:`events` or :meth:`skip_value` before asking for the next key."""
        self._expect("{")
        while True:
            c = self._peek()
            if c == "}":
                self.pos += 1
                return
            if c == ",":
                self.pos += 1
                continue
            if not c:
                raise self._truncated()
            key = self._value()
            if not isinstance(key, str):
                raise NotAnNsysExport(f"{self.path}: corrupt torch.profiler trace: a key that "
                                      f"is not a string at character {self.offset + self.pos}")
            self._expect(":")
            yield key

    def value(self) -> Any:
        self._peek()
        return self._value()

    def is_array(self) -> bool:
        return self._peek() == "["

    def events(self, on_event: Callable[[Any], None]) -> int:
        """Decode the array at the current position, calling ``on_event`` with each
        element; returns their number."""
        self._expect("[")
        n = 0
        decode, sep = _decode, _SEP
        while True:
            buf = self.buf
            pos = sep(buf, self.pos).end()
            if pos >= len(buf):
                self.pos = pos
                if not self._more():
                    self.count = n
                    raise self._truncated()
                continue
            if buf[pos] == "]":
                self.pos = pos + 1
                self.count = n
                return n
            try:
                obj, end = decode(buf, pos)
            except json.JSONDecodeError as e:
                self.count = n
                self._after_error(e, pos)
                continue
            if end >= len(buf) and not self.eof:  # a bare number cut by the window
                self.pos = pos
                if self._more():
                    continue
            self.pos = end
            n += 1
            on_event(obj)


# -- collecting the events the analysis needs -----------------------------------------------------

class _Collector:
    """The kept fields of the kept events, in typed arrays (floats for times, in us)."""

    def __init__(self) -> None:
        self.api = _Columns("ts dur", "pid gtid corr name")
        self.gpu = _Columns("ts dur", "device stream corr kind copy src dst bytes name pid")
        self.py = _Columns("ts dur", "gtid name")
        self.ranges = _Columns("ts dur", "gtid name")
        self.names: dict[str, int] = {}  # API and range names
        self.kernel_names: dict[str, int] = {}  # NCCL kernels only
        self.py_names: dict[Any, int] = {}
        self.copy_names: dict[str, tuple[int, int, int]] = {}
        self.process_names: dict[Any, str] = {}
        self.process_labels: dict[Any, str] = {}
        self.thread_names: dict[tuple[Any, Any], str] = {}
        self.span: tuple[float, float] | None = None
        self.ids: dict[Any, int] = {}  # non-integer pids/tids -> synthetic numbers
        self.skipped = 0  # kept kinds of event without a usable ts/dur
        self.events = 0  # JSON objects in the events array
        py = self.py.cols
        self._py_ts, self._py_dur, self._py_tid, self._py_name = (c.append for c in py)

    def _num(self, v: Any) -> int:
        if type(v) is int:
            return v
        try:
            return int(v)
        except (TypeError, ValueError):
            return self.ids.setdefault(v, (1 << 23) + len(self.ids))

    def _name(self, table: dict[str, int], name: Any) -> int:
        if not isinstance(name, str):
            name = str(name)
        code = table.get(name)
        if code is None:
            code = table[name] = len(table)
        return code

    def _times(self, e: dict) -> tuple[float, float] | None:
        try:
            ts, dur = float(e["ts"]), float(e.get("dur") or 0.0)
        except (KeyError, TypeError, ValueError):
            self.skipped += 1
            return None
        return (ts, dur) if ts == ts and dur == dur else None  # NaN

    def add(self, e: Any) -> None:
        if type(e) is not dict:
            return
        self.events += 1
        if e.get("cat") == "python_function" and e.get("ph") == "X":  # ~80% of the events
            ts, dur = e.get("ts"), e.get("dur")
            if type(ts) is not float or type(dur) is not float:
                times = self._times(e)
                if times is None:
                    return
                ts, dur = times
            pid, tid = e.get("pid"), e.get("tid")
            if type(pid) is not int:
                pid = self._num(pid)
            if type(tid) is not int:
                tid = self._num(tid)
            name = e.get("name")
            code = self.py_names.get(name)
            if code is None:
                code = self.py_names[name] = len(self.py_names)
            self._py_ts(ts)
            self._py_dur(dur)
            self._py_tid((pid << 24) | (tid & 0xFFFFFF))
            self._py_name(code)
            return
        ph = e.get("ph")
        if ph != "X":
            if ph == "M":
                self._meta(e)
            return
        cat = e.get("cat")
        kind = _CATEGORIES.get(cat)
        if kind is None and (not isinstance(cat, str)
                             or (kind := _CATEGORIES.get(cat.lower())) is None):
            return
        times = self._times(e)
        if times is None:
            return
        ts, dur = times
        args = e.get("args")
        if type(args) is not dict:
            args = {}
        if kind == _PY:  # a category spelt otherwise
            gtid = (self._num(e.get("pid")) << 24) | (self._num(e.get("tid")) & 0xFFFFFF)
            self.py.add(ts, dur, gtid, self._name(self.py_names, e.get("name")))
        elif kind in (_KERNEL, _MEMCPY, _MEMSET):
            self._gpu(kind, e, ts, dur, args)
        elif kind == _API:
            pid, tid = self._num(e.get("pid")), self._num(e.get("tid"))
            corr = args.get("correlation", -1)
            self.api.add(ts, dur, pid, (pid << 24) | (tid & 0xFFFFFF),
                         corr if type(corr) is int else self._num(corr),
                         self._name(self.names, api_base_name(str(e.get("name")))))
        elif kind in (_ANNOT, _OP):
            name = e.get("name")
            if not isinstance(name, str) or (kind == _OP and not name.startswith("aten::")):
                return
            if kind == _ANNOT and (m := _PROFILER_STEP.match(name)):
                name = f"step {m.group(1)}"
            pid, tid = self._num(e.get("pid")), self._num(e.get("tid"))
            self.ranges.add(ts, dur, (pid << 24) | (tid & 0xFFFFFF), self._name(self.names, name))
        elif kind == _SPAN:
            end = ts + dur
            self.span = (ts, end) if self.span is None else \
                (min(self.span[0], ts), max(self.span[1], end))

    def _gpu(self, kind: int, e: dict, ts: float, dur: float, args: dict) -> None:
        pid = e.get("pid")
        device = args.get("device", pid)
        stream = args.get("stream", e.get("tid"))
        corr = args.get("correlation", -1)
        nbytes = args.get("bytes", 0)
        copy = src = dst = -1
        name_code = -1
        name = e.get("name")
        if kind == _MEMCPY:
            kinds = self.copy_names.get(name) if isinstance(name, str) else None
            if kinds is None:
                kinds = self.copy_names[str(name)] = copy_kinds(str(name))
            copy, src, dst = kinds
        elif kind == _KERNEL and isinstance(name, str) and name[:4].lower() == "nccl":
            name_code = self._name(self.kernel_names, name)
        self.gpu.add(ts, dur, self._num(device), self._num(stream),
                     corr if type(corr) is int else self._num(corr), kind - _KERNEL, copy, src,
                     dst, nbytes if type(nbytes) is int else 0, name_code, self._num(pid))

    def _meta(self, e: dict) -> None:
        name, args = e.get("name"), e.get("args")
        if type(args) is not dict:
            return
        if name == "process_name":
            self.process_names.setdefault(e.get("pid"), str(args.get("name", "")))
        elif name == "process_labels":
            self.process_labels.setdefault(e.get("pid"), str(args.get("labels", "")))
        elif name == "thread_name":
            self.thread_names.setdefault((e.get("pid"), e.get("tid")), str(args.get("name", "")))


class _Columns:
    """Parallel typed arrays: ``floats`` as float64 ('d'), ``ints`` as int64 ('q')."""

    def __init__(self, floats: str, ints: str) -> None:
        self.names = floats.split() + ints.split()
        self.cols = [array("d") for _ in floats.split()] + [array("q") for _ in ints.split()]
        appends = [c.append for c in self.cols]

        def add(*values: Any) -> None:
            for append, v in zip(appends, values, strict=True):
                append(v)
        self.add = add

    def __len__(self) -> int:
        return len(self.cols[0])

    def __getitem__(self, name: str) -> np.ndarray:
        col = self.cols[self.names.index(name)]
        return np.frombuffer(col, dtype=np.float64 if col.typecode == "d" else np.int64) \
            if len(col) else np.zeros(0, dtype=np.float64 if col.typecode == "d" else np.int64)


def copy_kinds(name: str) -> tuple[int, int, int]:
    """``Memcpy DtoH (Device -> Pinned)`` -> (copy kind, source and destination memory kinds)
    as nsys numbers them (DtoH 2; pinned 1, device 2; -1 where the name does not say)."""
    m = _COPY_NAME.match(name)
    if not m:
        return -1, -1, -1
    kind = next((v for k, v in COPY_KINDS.items() if k.lower() == m.group(1).lower()), 0)
    src = MEMORY_KINDS.get((m.group(2) or "").strip().lower(), -1)
    dst = MEMORY_KINDS.get((m.group(3) or "").strip().lower(), -1)
    return kind, src, dst


# -- the Trace ---------------------------------------------------------------------------------

def read_kineto(path: str | Path) -> Trace:
    """The normalised :class:`Trace` of the Kineto JSON trace at ``path`` (plain, gzip or xz)."""
    p = Path(path)
    c = _Collector()
    top: dict[str, Any] = {}
    saw_events = False
    try:
        with open_text(p) as f:
            s = JsonStream(f, p)
            first = s.top()
            if first == "[":
                s.events(c.add)
                saw_events = c.events > 0 or s.count == 0
            elif first == "{":
                for key in s.fields():
                    if key == "traceEvents" and s.is_array():
                        s.events(c.add)
                        saw_events = True
                    else:
                        top[key] = s.value()
            else:
                raise NotAnNsysExport(f"{p}: not a JSON trace (it starts with {first[:1]!r})")
    except OSError as e:
        raise UnreadableInput(f"{p}: cannot read: {e.strerror or e}") from None
    if not saw_events:
        raise _not_a_trace(p, top)
    return build_trace(c, top, p)


def _not_a_trace(p: Path, top: dict[str, Any]) -> Exception:
    if {"trace", "verdict"} <= set(top) or "distributions" in top:
        return UnreadableInput(
            f"{p}: an nsysscope summary (summarize or report --format json output), not a "
            "trace; give it to 'nsysscope gate' as a side, or report the trace it came from")
    keys = ", ".join(sorted(top)[:5]) or "none"
    return NotAnNsysExport(
        f"{p}: JSON, but not a torch.profiler trace: no traceEvents array (top-level keys: "
        f"{keys}); nsysscope reads nsys exports and torch.profiler (Kineto) traces")


def _ns(ts: np.ndarray, dur: np.ndarray, origin: float) -> tuple[np.ndarray, np.ndarray]:
    start = np.rint((ts - origin) * 1e3).astype(np.int64)
    return start, start + np.rint(np.maximum(dur, 0.0) * 1e3).astype(np.int64)


def _categorical(codes: np.ndarray, table: dict[str, int]) -> pd.Categorical:
    """A Categorical of the names ``codes`` index in ``table``, categories sorted."""
    names = np.array(list(table), dtype=object)
    present = np.unique(codes)
    cats = sorted(names[present].tolist()) if len(present) else []
    pos = {n: i for i, n in enumerate(cats)}
    remap = np.full(len(names), -1, dtype=np.int64)
    for code in present:
        remap[code] = pos[names[code]]
    return pd.Categorical.from_codes(remap[codes] if len(codes) else np.zeros(0, dtype=np.int64),
                                     categories=cats)


def build_trace(c: _Collector, top: dict[str, Any], path: Path) -> Trace:
    origin = _origin(c)
    api_all = _api_all(c, origin)
    wanted_codes = {code for name, code in c.names.items() if _wanted_api(name)}
    api = api_all[api_all["name_code"].isin(wanted_codes)].reset_index(drop=True)
    api = pd.DataFrame({
        "start_ns": api["start_ns"], "end_ns": api["end_ns"], "tid": api["tid"],
        "corr_id": api["corr_id"], "proc": api["proc"],
        "status": np.zeros(len(api), dtype=np.int32),
        "name": _categorical(api["name_code"].to_numpy(), c.names)})
    gpu = _gpu(c, origin, api_all)
    launches = api.loc[api["name"].isin(LAUNCH_APIS), ["proc", "corr_id"]]
    in_graph = pd.MultiIndex.from_frame(gpu[["proc", "corr_id"]]).isin(
        pd.MultiIndex.from_frame(launches)) if len(gpu) else np.zeros(0, dtype=bool)
    graph_work = _graph_work(gpu[in_graph])
    gpu_ops = _eager(gpu[~in_graph])
    nvtx = _nvtx(c, origin)
    names = _thread_names(c)
    threads = pd.DataFrame({"tid": pd.Series(list(names), dtype=_INT),
                            "thread_name": pd.Series(list(names.values()), dtype=str)})
    procs = sorted(set(api_all["proc"].tolist()) | set((nvtx["tid"].to_numpy() >> 24).tolist())
                   | set((c.py["gtid"] >> 24).tolist()))
    processes = pd.DataFrame({
        "proc": pd.Series(procs, dtype=_INT), "pid": pd.Series(procs, dtype=_INT),
        "name": pd.Series([_process_name(c, p) for p in procs], dtype=str)})
    ends = [int(x.max()) for x in (api_all["end_ns"], gpu["end_ns"], nvtx["end_ns"]) if len(x)]
    if c.span is not None:
        start_ns, end_ns = _ns(np.array([c.span[0]]), np.array([c.span[1] - c.span[0]]), origin)
        span = (int(start_ns[0]), int(end_ns[0]))
    else:
        span = (0, max(ends, default=0))
    devices = top.get("deviceProperties")
    gpus = tuple(sorted({str(d.get("name")) for d in devices
                         if isinstance(d, dict) and d.get("name")})) \
        if isinstance(devices, list) else ()
    meta = TraceMeta(
        path=str(path), nsys_version="none",
        schema_version=f"kineto {top.get('schemaVersion', '?')}",
        gpus=gpus, graph_trace="node" if len(graph_work) else "none",
        has_sync_records=False, has_event_records=False, has_nvtx=bool(len(nvtx)),
        capture_start_ns=span[0], capture_end_ns=span[1], diagnostics=(), format=FORMAT)
    return Trace(meta=meta, api=api, graph_work=graph_work, gpu_ops=gpu_ops,
                 syncs=_empty(["proc", "corr_id", "event_sync_id", "stream"]),
                 event_records=_empty(["proc", "corr_id", "event_sync_id", "stream"]),
                 nvtx=nvtx, threads=threads, processes=processes,
                 collectives=_collectives(c, gpu), enums=dict(ENUMS), source=None,
                 python=python_stacks(c, api, origin))


def _origin(c: _Collector) -> float:
    """The time zero: the earliest timestamp kept, in whole microseconds."""
    firsts = [float(t["ts"].min()) for t in (c.api, c.gpu, c.py, c.ranges) if len(t)]
    if c.span is not None:
        firsts.append(c.span[0])
    return float(np.floor(min(firsts))) if firsts else 0.0


def _empty(cols: list[str]) -> pd.DataFrame:
    return pd.DataFrame({col: pd.Series(dtype=_INT) for col in cols})


def _api_all(c: _Collector, origin: float) -> pd.DataFrame:
    """Every CUDA call, wanted or not (their correlation ids place GPU work in a process),
    sorted by start, then end, thread, correlation id: the same whatever the event order."""
    start, end = _ns(c.api["ts"], c.api["dur"], origin)
    tid, corr, code = c.api["gtid"], c.api["corr"], c.api["name"]
    order = np.lexsort((code, corr, tid, end, start))
    return pd.DataFrame({"start_ns": start[order], "end_ns": end[order], "tid": tid[order],
                         "corr_id": corr[order], "proc": c.api["pid"][order],
                         "name_code": code[order]})


def _gpu(c: _Collector, origin: float, api_all: pd.DataFrame) -> pd.DataFrame:
    g = c.gpu
    start, end = _ns(g["ts"], g["dur"], origin)
    df = pd.DataFrame({"start_ns": start, "end_ns": end, "stream": g["stream"],
                       "device": g["device"], "corr_id": g["corr"], "kind": g["kind"],
                       "copy_kind": g["copy"], "src_kind": g["src"], "dst_kind": g["dst"],
                       "bytes": g["bytes"], "name": g["name"]})
    df = df.sort_values(["start_ns", "kind", "end_ns", "stream", "corr_id", "device", "name"],
                        kind="stable").reset_index(drop=True)
    df.insert(5, "proc", _gpu_process(df, api_all))
    return df


def _gpu_process(gpu: pd.DataFrame, api_all: pd.DataFrame) -> np.ndarray:
    """The process of each GPU op: the one whose CUDA call has its correlation id. Where
    several processes of the file used that id, the call that started last before the op."""
    proc = np.full(len(gpu), -1, dtype=np.int64)
    if not len(gpu) or not len(api_all):
        return proc
    calls = api_all[["corr_id", "proc", "start_ns"]].drop_duplicates(["corr_id", "proc"])
    procs = calls["proc"].unique()
    if len(procs) == 1:
        # one process: its GPU work, also that of calls made before the capture started
        return np.full(len(gpu), procs[0], dtype=np.int64)
    ops = pd.DataFrame({"i": np.arange(len(gpu)), "corr_id": gpu["corr_id"].to_numpy(),
                        "op_start": gpu["start_ns"].to_numpy()})
    m = ops.merge(calls, on="corr_id")
    m = m[m["start_ns"] <= m["op_start"]].sort_values(["i", "start_ns", "proc"])
    last = m.drop_duplicates("i", keep="last")
    proc[last["i"].to_numpy()] = last["proc"].to_numpy()
    return proc


def _graph_work(g: pd.DataFrame) -> pd.DataFrame:
    if not len(g):
        return _empty(GRAPH_WORK_COLUMNS)
    agg = g.groupby(["proc", "corr_id"], sort=True).agg(
        gpu_start_ns=("start_ns", "min"), gpu_end_ns=("end_ns", "max"),
        stream=("stream", "min"), device=("device", "min"), n_ops=("start_ns", "size"))
    out = agg.reset_index()[GRAPH_WORK_COLUMNS]
    return out.astype(dict.fromkeys(GRAPH_WORK_COLUMNS, _INT))


def _eager(g: pd.DataFrame) -> pd.DataFrame:
    cols = ["start_ns", "end_ns", "stream", "device", "corr_id", "proc", "kind", "copy_kind",
            "src_kind", "dst_kind", "bytes"]
    df = g[cols].reset_index(drop=True).astype({k: _INT for k in cols if k != "kind"})
    df["kind"] = pd.Categorical.from_codes(df["kind"].to_numpy(), categories=_GPU_KINDS)
    return df


def _collectives(c: _Collector, gpu: pd.DataFrame) -> pd.DataFrame:
    cols = ["proc", "corr_id", "start_ns", "end_ns", "stream", "device"]
    nccl = gpu[gpu["name"] >= 0]
    df = nccl[cols].reset_index(drop=True).astype(dict.fromkeys(cols, _INT))
    df["name"] = _categorical(nccl["name"].to_numpy(), c.kernel_names) if len(nccl) else \
        pd.Series(dtype=str)
    return df.sort_values(["proc", "start_ns"], kind="stable").reset_index(drop=True)


def _nvtx(c: _Collector, origin: float) -> pd.DataFrame:
    r = c.ranges
    start, end = _ns(r["ts"], r["dur"], origin)
    names = np.array(list(c.names), dtype=object)
    text = names[r["name"]] if len(r) else np.zeros(0, dtype=object)
    order = np.lexsort((text.astype(str), r["gtid"], -end, start)) if len(r) else \
        np.zeros(0, dtype=np.int64)
    df = pd.DataFrame({"start_ns": start[order], "end_ns": end[order], "tid": r["gtid"][order],
                       "text": text[order]})
    df["text"] = df["text"].astype(str)
    return df


def _thread_names(c: _Collector) -> dict[int, str]:
    out: dict[int, str] = {}
    for (pid, tid), name in sorted(c.thread_names.items(), key=lambda kv: str(kv[0])):
        if pid in c.process_labels and c.process_labels[pid].startswith("GPU"):
            continue  # a stream lane ("stream 7")
        if not (isinstance(pid, int) and isinstance(tid, int)):
            continue
        m = _THREAD_NAME.match(name)
        out.setdefault((pid << 24) | (tid & 0xFFFFFF), m.group(1) if m else name)
    return out


def _process_name(c: _Collector, pid: int) -> str:
    return c.process_names.get(pid, "")


# -- Python stacks -------------------------------------------------------------------------------

def python_stacks(c: _Collector, api: pd.DataFrame, origin: float) -> PythonSamples:
    """One pseudo-sample per CUDA call of ``api``: the stack of ``python_function`` ranges
    around it, innermost first (see the module docstring)."""
    py = c.py
    if not len(py):
        return PythonSamples.none(NO_STACKS)
    mine = np.isin(py["gtid"], api["tid"].unique())  # threads that made the calls
    start, end = _ns(py["ts"][mine], py["dur"][mine], origin)
    code, gtid = py["name"][mine], py["gtid"][mine]
    parsed = [_py_frame(str(n)) for n in c.py_names]
    builtin = np.array([p is None for p in parsed], dtype=bool)
    t = api["start_ns"].to_numpy() + (api["end_ns"].to_numpy() - api["start_ns"].to_numpy()) // 2
    tids = api["tid"].to_numpy()
    s_sample, s_tid, s_time = [], [], []
    f_sample, f_depth, f_code = [], [], []
    for sid, stack in enumerate(enclosing_stacks(start, end, gtid, t, tids)):
        s_sample.append(sid)
        s_tid.append(int(tids[sid]))
        s_time.append(int(t[sid]))
        depth = 0
        for j in stack:
            if not builtin[code[j]]:
                f_sample.append(sid)
                f_depth.append(depth)
                f_code.append(code[j])
                depth += 1
    samples = pd.DataFrame({"sample": np.asarray(s_sample, dtype=np.int64),
                            "tid": np.asarray(s_tid, dtype=np.int64),
                            "time_ns": np.asarray(s_time, dtype=np.int64),
                            "state": pd.Series([None] * len(s_sample), dtype=object)})
    samples = samples.sort_values(["tid", "time_ns"], kind="stable").reset_index(drop=True)
    fc = np.asarray(f_code, dtype=np.int64)
    files = [p[0] if p else "" for p in parsed]
    lines = np.array([p[1] if p else -1 for p in parsed], dtype=np.int64)
    funcs = [p[2] if p else "" for p in parsed]
    frames = pd.DataFrame({
        "sample": np.asarray(f_sample, dtype=np.int64),
        "depth": np.asarray(f_depth, dtype=np.int64),
        "file": pd.Categorical(np.asarray(files, dtype=object)[fc] if len(fc) else []),
        "line": lines[fc] if len(fc) else np.zeros(0, dtype=np.int64),
        "function": pd.Categorical(np.asarray(funcs, dtype=object)[fc] if len(fc) else [])})
    return PythonSamples(OK, samples, frames, marks=len(samples))


def enclosing_stacks(start: np.ndarray, end: np.ndarray, gtid: np.ndarray, times: np.ndarray,
                     tids: np.ndarray) -> Iterator[list[int]]:
    """For each (thread ``tids[k]``, time ``times[k]``): the indices of the ranges
    (``start``, ``end``, ``gtid``: python_function ranges in any order) that enclose it on
    that thread, innermost first (empty where none does)."""
    order = np.lexsort((-end, start, gtid))  # per thread, by start; enclosing range first
    start, end, gtid = start[order], end[order], gtid[order]
    parent = _parents(start, end, gtid)
    for tid, when in zip(tids.tolist(), times.tolist(), strict=True):
        lo = int(np.searchsorted(gtid, tid, side="left"))
        hi = int(np.searchsorted(gtid, tid, side="right"))
        stack: list[int] = []
        if lo < hi:
            j = lo + int(np.searchsorted(start[lo:hi], when, side="right")) - 1
            while j >= lo and end[j] < when:
                j = int(parent[j])
            while j >= 0:
                stack.append(int(order[j]))
                j = int(parent[j])
        yield stack


def _py_frame(name: str) -> tuple[str, int, str] | None:
    """``file.py(12): f`` -> (file, 12, f); None for C functions (``<built-in ...>``)."""
    if name.startswith("<built-in"):
        return None
    m = _PY_NAME.match(name)
    if not m:
        return (name, -1, name)
    return m.group(1), int(m.group(2)), m.group(3)


def _parents(start: np.ndarray, end: np.ndarray, gtid: np.ndarray) -> np.ndarray:
    """The index of each range's innermost enclosing range on its thread (-1: none), for
    ranges sorted by thread, start, and longest first. Ranges that overlap without nesting
    (clock jitter at their edges) are treated as siblings. One pass with a stack; the columns
    are read as typed arrays (a list of Python ints would take ~100 bytes an event)."""
    n = len(start)
    parent = array("q", bytes(8 * n))
    s, e, g = (array("q", np.ascontiguousarray(x, dtype=np.int64).tobytes())
               for x in (start, end, gtid))
    stack: list[int] = []
    prev_tid = None
    for i in range(n):
        if g[i] != prev_tid:
            stack.clear()
            prev_tid = g[i]
        ei = e[i]
        while stack and e[stack[-1]] < ei:
            stack.pop()
        parent[i] = stack[-1] if stack else -1
        stack.append(i)
    return np.frombuffer(parent, dtype=np.int64) if n else np.zeros(0, dtype=np.int64)