"""Collecting the events the analysis needs from a Kineto trace, in typed arrays."""

from __future__ import annotations

import math
import re
from array import array
from collections import Counter
from typing import Any

import numpy as np

from ...util.text import clipped, name_text
from ..apis import COPY_KINDS, MEMORY_KINDS
from ..nsys.schema import api_base_name

# event categories, as Kineto writes them (current names first, torch < 1.10 names after:
# ``Runtime``, ``Kernel``, ``Memcpy``, ``Operator``; a name not found is looked up again in
# lower case)
_API, _KERNEL, _MEMCPY, _MEMSET, _PY, _ANNOT, _OP, _SPAN, _SYNC = range(9)
_CATEGORIES: dict[Any, int] = {  # looked up with any JSON value
    "cuda_runtime": _API, "cuda_driver": _API, "runtime": _API, "driver": _API,
    "kernel": _KERNEL, "gpu_memcpy": _MEMCPY, "memcpy": _MEMCPY,
    "gpu_memset": _MEMSET, "memset": _MEMSET, "python_function": _PY,
    "user_annotation": _ANNOT, "cpu_op": _OP, "operator": _OP, "trace": _SPAN,
    "cuda_sync": _SYNC,
}

#: a copy kind's and a memory kind's nsys id by its name in lower case (as a copy's name in a
#: Kineto trace says them: ``Memcpy DtoH (Device -> Pinned)``)
COPY_KIND_IDS = {name.lower(): i for i, name in COPY_KINDS.items() if i}
MEMORY_KIND_IDS = {name: i for i, name in MEMORY_KINDS.items()}
_COPY_NAME = re.compile(r"^\s*Memcpy\s+(\w+)(?:\s*\(\s*([^)>]*?)\s*->\s*([^)]*?)\s*\))?", re.I)
_PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")

#: microseconds beyond which a Kineto time (``ts``, or ``dur``) is no clock's. Kineto writes
#: Unix-epoch microseconds (PyTorch 1.x to ~2.3, and tools since: 1.60e15-1.72e15 in the 33
#: public traces of issue 53) or, since ~2.4, microseconds from a base time
#: (``baseTimeNanoseconds``; 7e11-5.2e12 in those and ours). Times are kept relative to the
#: file's first one and made integer nanoseconds from its earliest: start (< 2 x 3e15 us
#: apart) plus duration (< 3e15 us) stays inside int64 nanoseconds (9.22e18). Unix-epoch
#: microseconds reach 3e15 in 2065.
_MAX_US = 3e15
#: pids at or past this do not fit a global thread id (``pid << 24`` in int64): they are
#: numbered as other odd pids are
_MAX_PID = 1 << 39


class Collector:
    """The kept fields of the kept events, in typed arrays (floats for times, in us)."""

    def __init__(self) -> None:
        self.api = Columns("ts dur", "pid gtid corr name driver")
        self.gpu = Columns("ts dur", "device stream corr kind copy src dst bytes name pid")
        self.py = Columns("ts dur", "gtid name")
        self.ranges = Columns("ts dur", "gtid name")
        #: ``cuda_sync`` events (``_ExperimentalConfig(enable_cuda_sync_events=True)``): the
        #: sync call's correlation id, the stream it waits on or (a stream wait) makes wait,
        #: and for an event sync or stream wait the ``cudaEventRecord`` it waits on (its
        #: correlation id, -1 where the trace does not say) and that record's stream
        self.syncs = Columns("ts dur", "corr stream record record_stream")
        self.sync_records = False  # whether any names the record it waits on
        self.names: dict[str, int] = {}  # API and range names
        self.kernel_names: dict[str, int] = {}  # NCCL kernels only
        self.py_names: dict[Any, int] = {}
        self.copy_names: dict[str, tuple[int, int, int]] = {}
        self.process_names: dict[Any, str] = {}
        self.process_labels: dict[Any, str] = {}
        self.thread_names: dict[tuple[Any, Any], str] = {}
        self.span: tuple[float, float] | None = None
        self.ids: dict[Any, int] = {}  # non-integer pids/tids -> synthetic numbers
        #: kept kinds of event without a usable ts/dur, by category, and the first one's name
        self.skipped: Counter[str] = Counter()
        self.skipped_names: dict[str, str] = {}
        self.events = 0  # JSON objects in the events array
        #: every kept time is in microseconds after this one (the file's first time, whole
        #: microseconds): an epoch time (1.7e15 us, a float's step 0.25 us) becomes a small
        #: float exact to the nanosecond, a relative one (5e12 us) stays as exact
        self.base: int | None = None
        py = self.py.cols
        self._py_ts, self._py_dur, self._py_tid, self._py_name = (c.append for c in py)

    def num(self, v: Any) -> int:
        """An integer id for a pid, thread, stream or device id as the trace gives it: itself,
        or, for text or a number past 2**39 (no thread id can hold it), a number of its own."""
        if type(v) is int and -_MAX_PID < v < _MAX_PID:
            return v
        try:
            n = int(v)
        except (TypeError, ValueError):
            n = _MAX_PID
        if -_MAX_PID < n < _MAX_PID:
            return n
        return self.ids.setdefault(v, (1 << 23) + len(self.ids))  # text, or past 2**39

    def _name(self, table: dict[str, int], name: Any) -> int:
        if not isinstance(name, str):
            name = str(name)
        code = table.get(name)
        if code is None:
            code = table[name] = len(table)
        return code

    def _times(self, e: dict[str, Any]) -> tuple[float, float] | None:
        """``ts`` (after :attr:`base`) and ``dur`` of event ``e`` in float microseconds, or None
        (counted by category in :attr:`skipped`) where it has no usable time. ``ts`` may be an
        int, a float, a numeric string, or a :class:`~decimal.Decimal` (an epoch time with a
        fraction, :mod:`.stream`): each is made relative exactly."""
        try:
            ts, dur = e["ts"], e.get("dur")
            if bool in (type(ts), type(dur)):  # float(True) is 1.0: no time
                raise TypeError("a boolean time")
            if isinstance(ts, str):
                ts = float(ts)
            # a complete event ('X') has a length: none (null, missing) or a negative one is
            # damage, where it read as 0 and turned a case-1 capture "launch-bound"
            if dur is None:
                raise ValueError("no duration")
            dur = float(dur)
            if dur < 0:
                raise ValueError("a negative duration")
            # NaN, infinity, or a time no clock gives (1e300, say) is damage: skipped and
            # counted, not cast into garbage
            if not (abs(ts) < _MAX_US and abs(dur) < _MAX_US):
                raise ValueError("beyond any clock")
            if self.base is None:
                self.base = math.floor(ts)
            return float(ts - self.base), dur
        except (KeyError, TypeError, ValueError, ArithmeticError):
            self._skip(e)
            return None

    def _skip(self, e: dict[str, Any]) -> None:
        cat = _label(e.get("cat"))
        self.skipped[cat] += 1
        self.skipped_names.setdefault(cat, _label(e.get("name")))

    def add(self, e: Any) -> None:
        if type(e) is not dict:
            return
        self.events += 1
        if e.get("cat") == "python_function" and e.get("ph") == "X":  # ~80% of the events
            ts, dur, base = e.get("ts"), e.get("dur"), self.base
            if type(ts) is float and type(dur) is float and base is not None and \
                    -_MAX_US < ts < _MAX_US and 0 <= dur < _MAX_US:
                ts -= base
            else:
                times = self._times(e)
                if times is None:
                    return
                ts, dur = times
            pid, tid = e.get("pid"), e.get("tid")
            if type(pid) is not int or not -_MAX_PID < pid < _MAX_PID:
                pid = self.num(pid)
            if type(tid) is not int:
                tid = self.num(tid)
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
            gtid = (self.num(e.get("pid")) << 24) | (self.num(e.get("tid")) & 0xFFFFFF)
            self.py.add(ts, dur, gtid, self._name(self.py_names, e.get("name")))
        elif kind in (_KERNEL, _MEMCPY, _MEMSET):
            self._gpu(kind, e, ts, dur, args)
        elif kind == _API:
            pid, tid = self.num(e.get("pid")), self.num(e.get("tid"))
            corr = args.get("correlation", -1)
            self.api.add(ts, dur, pid, (pid << 24) | (tid & 0xFFFFFF),
                         corr if type(corr) is int else self.num(corr),
                         self._name(self.names, api_base_name(str(e.get("name")))),
                         int("driver" in str(cat).lower()))
        elif kind in (_ANNOT, _OP):
            name = e.get("name")
            if not isinstance(name, str) or (kind == _OP and not name.startswith("aten::")):
                return
            if kind == _ANNOT and (m := _PROFILER_STEP.match(name)):
                name = f"step {m.group(1)}"
            pid, tid = self.num(e.get("pid")), self.num(e.get("tid"))
            self.ranges.add(ts, dur, (pid << 24) | (tid & 0xFFFFFF), self._name(self.names, name))
        elif kind == _SYNC:
            self._sync(ts, dur, args)
        elif kind == _SPAN:
            end = ts + dur
            self.span = (ts, end) if self.span is None else \
                (min(self.span[0], ts), max(self.span[1], end))

    def _gpu(self, kind: int, e: dict[str, Any], ts: float, dur: float,
             args: dict[str, Any]) -> None:
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
        self.gpu.add(ts, dur, self.num(device), self.num(stream),
                     corr if type(corr) is int else self.num(corr), kind - _KERNEL, copy, src,
                     dst, nbytes if type(nbytes) is int else 0, name_code, self.num(pid))

    def _sync(self, ts: float, dur: float, args: dict[str, Any]) -> None:
        record = args.get("wait_on_cuda_event_record_corr_id")
        if record is not None:
            self.sync_records = True
        self.syncs.add(ts, dur, self._int(args.get("correlation")), self._int(args.get("stream")),
                       self._int(record), self._int(args.get("wait_on_stream")))

    @staticmethod
    def _int(v: Any) -> int:
        """An id the trace gives as a number: itself; -1 where absent, not an integer, or
        past what an int64 column holds."""
        return v if type(v) is int and -(1 << 62) < v < (1 << 62) else -1

    def _meta(self, e: dict[str, Any]) -> None:
        name, args = e.get("name"), e.get("args")
        if type(args) is not dict:
            return
        if name == "process_name":
            self.process_names.setdefault(e.get("pid"), str(args.get("name", "")))
        elif name == "process_labels":
            self.process_labels.setdefault(e.get("pid"), str(args.get("labels", "")))
        elif name == "thread_name":
            self.thread_names.setdefault((e.get("pid"), e.get("tid")), str(args.get("name", "")))


def _label(v: Any) -> str:
    """A category or event name for a note: printable, at most ~40 characters."""
    return clipped(name_text(v), 40) or "none"


class Columns:
    """Parallel typed arrays: ``floats`` as float64 ('d'), ``ints`` as int64 ('q')."""

    def __init__(self, floats: str, ints: str) -> None:
        self.names = floats.split() + ints.split()
        self.cols: list[array[Any]] = [array("d") for _ in floats.split()] + \
            [array("q") for _ in ints.split()]
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
    kind = COPY_KIND_IDS.get(m.group(1).lower(), 0)
    src = MEMORY_KIND_IDS.get((m.group(2) or "").strip().lower(), -1)
    dst = MEMORY_KIND_IDS.get((m.group(3) or "").strip().lower(), -1)
    return kind, src, dst


def to_ns(ts: np.ndarray, dur: np.ndarray, origin: float) -> tuple[np.ndarray, np.ndarray]:
    """Kineto's float microseconds (after :attr:`Collector.base`) as integer nanoseconds from
    ``origin`` (start, end)."""
    start = np.rint((ts - origin) * 1e3).astype(np.int64)
    return start, start + np.rint(np.maximum(dur, 0.0) * 1e3).astype(np.int64)
