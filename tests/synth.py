"""Synthetic nsys exports in the real nsys schema, with what their analysis must find.

The tables are created from the DDL of real exports (``tests/data/nsys_<schema>_schema.sql``,
copied verbatim from ``sqlite_master``), so the loader reads a synthetic trace exactly as it
reads a real one: ``StringIds`` for names, ``ENUM_*`` rows, ``META_DATA_EXPORT``, the
``CUPTI_ACTIVITY_KIND_*`` tables with their correlation ids, graph node ids and event sync
ids, and ``NVTX_EVENTS``. Rows follow the real ones of ``sample_traces/h200_case1_300``: a
``cudaStreamSynchronize`` has a SYNCHRONIZATION row with ``syncType`` 2 and ``eventSyncId``
0xFFFFFFFF; a ``cudaEventSynchronize`` has one with ``streamId`` 0xFFFFFFFF and the
``eventSyncId`` of its ``cudaEventRecord``'s CUDA_EVENT row; ``cudaDeviceSynchronize`` has none.

A :class:`Proc` simulates one process: host threads that issue CUDA calls one after the
other on a shared clock, and GPU streams that run work in issue order. It records, for every
call that blocks the host, which graph launches it semantically waits for (stream order:
launches on its stream issued before it, or before the ``cudaEventRecord`` it waits on), so
:func:`expected` can say what the analysis must find without reusing its heuristics: which
call waited on each launch, the overlap window, the GPU gap and idle time, the class.
"""

from __future__ import annotations

import functools
import itertools
import random
import sqlite3
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
SCHEMA_SQL = {"3.20.3": DATA / "nsys_3.20.3_schema.sql", "3.7.2": DATA / "nsys_3.7.2_schema.sql"}

# enum ids of the real exports (ENUM_CUDA_MEMCPY_OPER, ENUM_CUDA_MEM_KIND)
HTOD, DTOH, DTOD = 1, 2, 8
PAGEABLE, PINNED, DEVICE = 0, 1, 2
NO_ID = 0xFFFFFFFF  # what nsys writes for "no stream" / "no event"
NOT_READY = 600  # cudaErrorNotReady: what a query of unfinished work returns
NVTX_PUSHPOP = 59

#: the AnalysisConfig defaults the expectations assume
LAUNCH_BOUND_NS = 150_000


def gtid(pid: int, tid: int) -> int:
    """nsys ``globalTid``: pid and tid packed as in the real exports."""
    return (1 << 48) | (pid << 24) | tid


def gpid(pid: int) -> int:
    return (1 << 48) | (pid << 24)


@dataclass
class Call:
    """One CUDA API call, as the simulator issued it."""

    name: str
    tid: int  # globalTid
    start: int
    end: int
    corr: int
    blocking: bool = False
    covers: frozenset = frozenset()  # corr ids of the launches this call waited for
    copy_kind: int = -1
    src_kind: int = -1
    dst_kind: int = -1
    nbytes: int = 0
    anchor: Call | None = None  # for an event sync: its cudaEventRecord


@dataclass
class Launch:
    corr: int
    pid: int
    tid: int
    stream: int
    device: int
    api_start: int
    api_end: int
    gpu_start: int
    gpu_end: int
    planted: str | None = None


@dataclass
class Event:
    esid: int
    record: Call
    stream: int
    done: int  # when the GPU passes the event
    covers: frozenset


class Synth:
    """The rows of one synthetic export, and how to write them into the real schema."""

    def __init__(self, seed: int = 0) -> None:
        self.rows: dict[str, list[dict]] = {}
        self.strings: dict[str, int] = {}
        self.rng = random.Random(seed)
        self.node_ids = itertools.count(111669149696)
        self.procs: list[Proc] = []
        self.threads: dict[int, str] = {}
        self.devices: set[int] = set()

    def string(self, s: str) -> int:
        if s not in self.strings:
            self.strings[s] = len(self.strings) + 1
        return self.strings[s]

    def add(self, table: str, **row) -> None:
        self.rows.setdefault(table, []).append(row)

    def process(self, pid: int, device: int = 0, corr_base: int = 0) -> Proc:
        p = Proc(self, pid, device, corr_base)
        self.procs.append(p)
        self.devices.add(device)
        return p

    @property
    def launches(self) -> list[Launch]:
        return [ln for p in self.procs for ln in p.launches]

    def write(self, path: Path, schema: str = "3.20.3", drop: tuple[str, ...] = (),
              shuffle: int | None = None) -> Path:
        """Create ``path`` with the real DDL of ``schema`` and these rows. ``drop`` leaves
        tables out; ``shuffle`` (a seed) inserts every table's rows in a random order."""
        path = Path(path)
        path.unlink(missing_ok=True)
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        conn.executescript("BEGIN;\n" + _schema_sql(schema) + "\nCOMMIT;")
        have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if schema != "3.20.3":  # tables the older export lacks (empty there): 3.20.3's DDL
            ref = sqlite3.connect(":memory:")
            ref.executescript(_schema_sql("3.20.3"))
            for table in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
                if table not in have:
                    conn.execute(ref.execute("SELECT sql FROM sqlite_master WHERE name=?",
                                             (table,)).fetchone()[0])
                    have.add(table)
        rows = {t: list(r) for t, r in self.rows.items()}
        rows["ThreadNames"] = [dict(nameId=self.string(n), priority=0, globalTid=t)
                               for t, n in self.threads.items()]
        rows["StringIds"] = [dict(id=i, value=s) for s, i in self.strings.items()]
        rows["TARGET_INFO_GPU"] = [dict(vmId=1 << 48, id=d, name="NVIDIA H200", busLocation="",
                                        isDiscrete=1, uuid="00000000-0000-0000-0000-000000000000",
                                        chipName="GH100", cuDevice=d) for d in sorted(self.devices)]
        rows["PROCESSES"] = [dict(globalPid=gpid(p.pid), pid=p.pid, name="python3")
                             for p in self.procs]
        times = [r[k] for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS")
                 for r in rows.get(t, []) for k in ("start", "end") if r.get(k) is not None]
        times += [r[k] for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY")
                  for r in rows.get(t, []) for k in ("start", "end")]
        if times:
            t0, t1 = min(times) - 1_000_000, max(times) + 1_000_000
            rows["ANALYSIS_DETAILS"] = [dict(globalVid=1 << 48, duration=t1 - t0, startTime=t0,
                                             stopTime=t1)]
        rng = random.Random(shuffle)
        for table, trows in rows.items():
            if table in drop or table not in have or not trows:
                continue
            info = conn.execute(f"PRAGMA table_info('{table}')")
            cols = {r[1]: (r[2].upper(), r[3]) for r in info}
            if shuffle is not None:
                trows = trows[:]
                rng.shuffle(trows)
            names = list(cols)
            values = []
            for r in trows:
                values.append(tuple(r.get(c, _default(*cols[c])) for c in names))
            conn.executemany(f"INSERT INTO {table} ({', '.join(names)}) VALUES "
                             f"({', '.join('?' * len(names))})", values)
        for table in drop:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.commit()
        conn.close()
        return path


@functools.cache
def _schema_sql(schema: str) -> str:
    return SCHEMA_SQL[schema].read_text()


def _default(decl_type: str, notnull: int):
    if not notnull:
        return None
    return "" if "TEXT" in decl_type else 0


class Proc:
    """One simulated process: host threads on one clock, GPU streams in issue order."""

    def __init__(self, synth: Synth, pid: int, device: int, corr_base: int) -> None:
        self.s, self.pid, self.device = synth, pid, device
        self.corr = itertools.count(corr_base + 1)
        self.esid = itertools.count(corr_base + 1)
        self.t = 0
        self.gpu_free: dict[int, int] = {}
        self.issued: dict[int, list[int]] = {}  # stream -> launch corr ids, in issue order
        # stream -> launches of other streams it waited for (cudaStreamWaitEvent)
        self.inherited: dict[int, set[int]] = {}
        self.polls: list[Call] = []  # polling loops, as one blocking call each
        self.launches: list[Launch] = []
        self.calls: list[Call] = []
        self.gpu_ops: list[tuple[int, int, int]] = []  # device, start, end: eager GPU work

    # -- host ---------------------------------------------------------------------------------
    def thread(self, tid: int, name: str) -> int:
        g = gtid(self.pid, tid)
        self.s.threads[g] = name
        return g

    def at(self, t: int) -> Proc:
        self.t = t
        return self

    def work(self, dur: int) -> None:
        self.t += dur

    def nvtx(self, tid: int, text: str, start: int, end: int) -> None:
        self.s.add("NVTX_EVENTS", start=start, end=end, eventType=NVTX_PUSHPOP, text=text,
                   globalTid=tid, domainId=0)

    def _call(self, name: str, tid: int, dur: int, end: int | None = None, ret: int = 0,
              **kw) -> Call:
        c = Call(name=name, tid=tid, start=self.t, end=end if end is not None else self.t + dur,
                 corr=next(self.corr), **kw)
        self.s.add("CUPTI_ACTIVITY_KIND_RUNTIME", start=c.start, end=c.end, eventClass=0,
                   globalTid=tid, correlationId=c.corr, nameId=self.s.string(name),
                   returnValue=ret)
        self.calls.append(c)
        self.t = c.end
        return c

    def _covered(self, stream: int | None) -> frozenset:
        if stream is None:
            return frozenset(c for ids in self.issued.values() for c in ids)
        return frozenset(self.issued.get(stream, ())) | frozenset(self.inherited.get(stream, ()))

    # -- GPU ------------------------------------------------------------------------------------
    def _gpu_slot(self, stream: int, lat: int, q: int, dur: int) -> tuple[int, int]:
        start = max(self.gpu_free.get(stream, 0) + q, self.t + lat)
        self.gpu_free[stream] = start + dur
        return start, start + dur

    def launch(self, tid: int, stream: int, dur: int, lat: int, q: int, nodes: list[int],
               planted: str | None = None, memset_node: bool = False) -> Launch:
        """``cudaGraphLaunch``: ``nodes`` kernels (durations, back to back) replayed on
        ``stream`` once it is free (``q`` after the previous work) and ``lat`` after the call."""
        total = sum(nodes)
        g0, g1 = max(self.gpu_free.get(stream, 0) + q, self.t + lat), 0
        call = self._call("cudaGraphLaunch_v10000", tid, dur)
        cur = g0
        for i, d in enumerate(nodes):
            table = "CUPTI_ACTIVITY_KIND_MEMSET" if memset_node and i == 0 else \
                "CUPTI_ACTIVITY_KIND_KERNEL"
            row = dict(start=cur, end=cur + d, deviceId=self.device, contextId=1, streamId=stream,
                       correlationId=call.corr, globalPid=gpid(self.pid),
                       graphNodeId=next(self.s.node_ids))
            if table == "CUPTI_ACTIVITY_KIND_KERNEL":
                name = self.s.string(f"decode_layer_kernel_{i}")
                row.update(demangledName=name, shortName=name, mangledName=name, launchType=1,
                           gridX=32, gridY=1, gridZ=1, blockX=128, blockY=1, blockZ=1,
                           registersPerThread=32, gridId=call.corr * 16 + i)
            else:
                row.update(value=0, bytes=4096, memKind=DEVICE)
            self.s.add(table, **row)
            cur += d
        g1 = g0 + total
        self.gpu_free[stream] = g1
        self.issued.setdefault(stream, []).append(call.corr)
        ln = Launch(corr=call.corr, pid=self.pid, tid=tid, stream=stream, device=self.device,
                    api_start=call.start, api_end=call.end, gpu_start=g0, gpu_end=g1,
                    planted=planted)
        self.launches.append(ln)
        return ln

    def kernel(self, tid: int, stream: int, dur: int, lat: int, q: int,
               call_dur: int = 3_000) -> Call:
        """An eager ``cudaLaunchKernel`` (nsysscope ignores the call, not its GPU time)."""
        g0, g1 = self._gpu_slot(stream, lat, q, dur)
        call = self._call("cudaLaunchKernel_v7000", tid, call_dur)
        name = self.s.string("elementwise_kernel")
        self.s.add("CUPTI_ACTIVITY_KIND_KERNEL", start=g0, end=g1, deviceId=self.device,
                   contextId=1, streamId=stream, correlationId=call.corr, globalPid=gpid(self.pid),
                   demangledName=name, shortName=name, launchType=0, gridX=1, gridY=1, gridZ=1,
                   blockX=128, blockY=1, blockZ=1, registersPerThread=16, gridId=call.corr)
        self.gpu_ops.append((self.device, g0, g1))
        return call

    def copy(self, tid: int, stream: int, kind: int, src: int, dst: int, nbytes: int,
             call_dur: int, gpu_dur: int, lat: int, q: int, r: int, sync_api: bool = False) -> Call:
        """``cudaMemcpyAsync`` (or ``cudaMemcpy``). It blocks the host until its GPU copy is
        done when it is synchronous or touches pageable memory (returning ``r`` after)."""
        covers = self._covered(stream)
        g0, g1 = self._gpu_slot(stream, lat, q, gpu_dur)
        blocking = sync_api or PAGEABLE in (src, dst)
        name = "cudaMemcpy_v3020" if sync_api else "cudaMemcpyAsync_v3020"
        call = self._call(name, tid, call_dur, end=g1 + r if blocking else None,
                          blocking=blocking, covers=covers if blocking else frozenset(),
                          copy_kind=kind, src_kind=src, dst_kind=dst, nbytes=nbytes)
        self.s.add("CUPTI_ACTIVITY_KIND_MEMCPY", start=g0, end=g1, deviceId=self.device,
                   contextId=1, streamId=stream, correlationId=call.corr,
                   globalPid=gpid(self.pid), bytes=nbytes, copyKind=kind, srcKind=src,
                   dstKind=dst, srcDeviceId=self.device, dstDeviceId=self.device)
        self.gpu_ops.append((self.device, g0, g1))
        return call

    def stream_sync(self, tid: int, stream: int, dur: int, r: int) -> Call:
        covers = self._covered(stream)
        end = max(self.t + dur, self.gpu_free.get(stream, 0) + r)
        call = self._call("cudaStreamSynchronize_v3020", tid, dur, end=end, blocking=True,
                          covers=covers)
        self._sync_row(call, stream=stream, sync_type=2, event_id=NO_ID, esid=NO_ID)
        return call

    def device_sync(self, tid: int, dur: int, r: int) -> Call:
        covers = self._covered(None)
        end = max([self.t + dur] + [f + r for f in self.gpu_free.values()])
        return self._call("cudaDeviceSynchronize_v3020", tid, dur, end=end, blocking=True,
                          covers=covers)

    def record(self, tid: int, stream: int, dur: int) -> Event:
        call = self._call("cudaEventRecordWithFlags_v11010", tid, dur)
        ev = Event(esid=next(self.esid), record=call, stream=stream,
                   done=self.gpu_free.get(stream, 0), covers=self._covered(stream))
        self.s.add("CUPTI_ACTIVITY_KIND_CUDA_EVENT", deviceId=self.device, contextId=1,
                   streamId=stream, correlationId=call.corr, globalPid=gpid(self.pid),
                   eventId=ev.esid % 64, eventSyncId=ev.esid)
        return ev

    def event_sync(self, tid: int, ev: Event, dur: int, r: int) -> Call:
        end = max(self.t + dur, ev.done + r)
        call = self._call("cudaEventSynchronize_v3020", tid, dur, end=end, blocking=True,
                          covers=ev.covers, anchor=ev.record)
        self._sync_row(call, stream=NO_ID, sync_type=1, event_id=ev.esid % 64, esid=ev.esid)
        return call

    def stream_wait(self, tid: int, stream: int, ev: Event, dur: int) -> Call:
        """``cudaStreamWaitEvent``: work queued on ``stream`` from now on runs after ``ev``,
        so a wait on ``stream`` covers what ``ev`` covers (torch's ``wait_stream``)."""
        call = self._call("cudaStreamWaitEvent_v3020", tid, dur)
        self.inherited.setdefault(stream, set()).update(ev.covers)
        self.gpu_free[stream] = max(self.gpu_free.get(stream, 0), ev.done)
        # nsys 2025.3 writes syncType 2 for stream waits (and for stream syncs)
        self._sync_row(call, stream=stream, sync_type=2, event_id=ev.esid % 64, esid=ev.esid)
        return call

    def poll(self, tid: int, ev: Event, gap: int, call_dur: int = 1_500,
             min_queries: int = 3) -> Call | None:
        """``while not event.query(): ...`` with ``gap`` between tries: the loop as one
        blocking call (from the first try's start to the last one's end), or None when it
        took fewer than ``min_queries`` tries (the analysis's default)."""
        before = [c for c in self.calls if c.tid == tid]
        prev = before[-1] if before else None
        tries = []
        while True:
            done = self.t >= ev.done
            ret = 0 if done else NOT_READY
            tries.append(self._call("cudaEventQuery_v3020", tid, call_dur, ret=ret))
            if done:
                break
            self.t += gap
        if len(tries) < min_queries:
            return None
        anchor = prev if prev is not None and prev.name.startswith("cudaEventRecord") else tries[0]
        block = Call(name="cudaEventQuery (polling)", tid=tid, start=tries[0].start,
                     end=tries[-1].end, corr=tries[0].corr, blocking=True, covers=ev.covers,
                     anchor=anchor)
        self.polls.append(block)
        return block

    def _sync_row(self, call: Call, stream: int, sync_type: int, event_id: int, esid: int) -> None:
        inset = min(500, (call.end - call.start) // 4)
        self.s.add("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", start=call.start + inset,
                   end=call.end - inset, deviceId=self.device, contextId=1, streamId=stream,
                   correlationId=call.corr, globalPid=gpid(self.pid), syncType=sync_type,
                   eventId=event_id, eventSyncId=esid)


# -- what the analysis must find ---------------------------------------------------------------

@dataclass
class Expected:
    corr: int
    klass: str
    window_ns: float | None  # None: no call waited on the launch
    gap_ns: float | None
    idle_ns: float | None
    block: Call | None
    planted: str | None = None


def _busy(intervals: list[tuple[int, int]], a: int, b: int) -> int:
    """Time inside [a, b] covered by the union of ``intervals``."""
    total, cur = 0, a
    for s, e in sorted(intervals):
        s, e = max(s, cur), min(e, b)
        if e > s:
            total += e - s
            cur = e
    return total


def expected(proc: Proc) -> dict[int, Expected]:
    """Per launch of ``proc`` (by corr id): the call that waited on it, the window, GPU gap and
    idle time, and the class, from the simulator's own record of what each call waited for."""
    # a process's GPU idle time is about its own work: another process's kernels do not fill
    # its gaps (with CUDA_VISIBLE_DEVICES, processes on different GPUs share device ids)
    gpu = [(s, e) for (d, s, e) in proc.gpu_ops if d == proc.device]
    gpu += [(ln.gpu_start, ln.gpu_end) for ln in proc.launches if ln.device == proc.device]
    out = {}
    by_stream: dict[int, list[Launch]] = {}
    for ln in proc.launches:
        by_stream.setdefault(ln.stream, []).append(ln)
    prev_call: dict[int, dict[int, Call]] = {}
    per_tid: dict[int, list[Call]] = {}
    for c in sorted(proc.calls, key=lambda c: c.start):
        if c.name.startswith("cudaLaunchKernel"):  # eager kernel launches are not copies or waits
            continue
        per_tid.setdefault(c.tid, []).append(c)
    for tid, calls in per_tid.items():
        prev_call[tid] = {c.corr: p for p, c in zip(calls, calls[1:], strict=False)}
    # a thread that only ever queries (NCCL's watchdog) is not the engine waiting
    polls = [b for b in proc.polls
             if any(not c.name.startswith("cudaEventQuery") for c in per_tid.get(b.tid, ()))]
    for _stream, ls in by_stream.items():
        ls = sorted(ls, key=lambda ln: ln.api_start)
        for ln, nxt in zip(ls, ls[1:] + [None], strict=False):
            waits = [c for c in proc.calls + polls
                     if c.blocking and ln.corr in c.covers and c.start < ln.gpu_end]
            block = min(waits, key=lambda c: c.start) if waits else None
            gap = idle = None
            if nxt is not None:
                gap = nxt.gpu_start - ln.gpu_end
                idle = gap - _busy(gpu, ln.gpu_end, nxt.gpu_start)
            if nxt is None:
                klass = "last"
            elif block is not None and block.end <= nxt.api_start:
                cause = block if block.copy_kind >= 0 else \
                    prev_call[(block.anchor or block).tid].get((block.anchor or block).corr)
                if cause is not None and (cause.copy_kind < 0 or cause.start < ln.api_start):
                    cause = None
                if cause is not None and cause.copy_kind == DTOH:
                    klass = "gpu_to_cpu"
                elif cause is not None and cause.copy_kind == HTOD and cause.src_kind == PAGEABLE:
                    klass = "cpu_to_gpu"
                else:
                    klass = "other_stall"
            elif idle > LAUNCH_BOUND_NS:
                klass = "launch_bound"
            else:
                klass = "healthy"
            out[ln.corr] = Expected(corr=ln.corr, klass=klass, planted=ln.planted, block=block,
                                   window_ns=None if block is None
                                   else float(block.start - ln.api_end),
                                   gap_ns=None if gap is None else float(gap),
                                   idle_ns=None if idle is None else float(idle))
    return out


# -- a decode loop with planted patterns -------------------------------------------------------

@dataclass
class Step:
    """One decode step of :func:`decode_loop`, and the class its launch must get.

    ``klass``: ``healthy`` (launch, record an event, wait on the previous step's event after
    the next launch), ``nowait`` (healthy, and nothing ever waits on it), ``gpu_to_cpu`` (a
    DtoH readback of the output, then ``cudaStreamSynchronize``), ``cpu_to_gpu`` (a pageable
    HtoD upload, then ``cudaStreamSynchronize``) or ``other_stall`` (a bare stream or device
    sync). The waiting calls run on ``wait_thread`` (0: the launching thread).

    ``output_copy``: the output goes back vLLM-style on a side stream (record on the compute
    stream, ``cudaStreamWaitEvent`` on the copy stream, a pinned DtoH copy, a completion
    event there): ``healthy`` waits on that event a step later, ``gpu_to_cpu`` at once.
    ``poll_gap_ns``: waits on events poll ``cudaEventQuery`` with this gap between tries
    instead of calling ``cudaEventSynchronize`` (``gpu_to_cpu`` then reads back into pinned
    memory, records an event and polls it)."""

    klass: str
    launch_ns: int = 8_000
    lat_ns: int = 10_000
    q_ns: int = 3_000
    nodes: tuple[int, ...] = (600_000, 600_000)
    pre_ns: int = 20_000
    window_ns: int = 30_000
    post_ns: int = 40_000
    call_ns: int = 4_000
    copy_ns: int = 3_000
    ret_ns: int = 2_000
    pinned_input: bool = True
    pageable_readback: bool = False
    device_sync: bool = False
    wait_thread: int = 0
    memset_node: bool = False
    output_copy: bool = False
    poll_gap_ns: int | None = None


STALLS = ("gpu_to_cpu", "cpu_to_gpu", "other_stall")
COPY_STREAM = 8


def output_copy(p: Proc, tid: int, stream: int, st: Step) -> Event:
    """vLLM's async output copy: the copy stream waits for the compute stream, copies the
    sampled tokens to pinned memory and records its completion event."""
    ready = p.record(tid, stream, st.call_ns)
    p.stream_wait(tid, COPY_STREAM, ready, st.call_ns)
    p.copy(tid, COPY_STREAM, DTOH, DEVICE, PINNED, 512, st.call_ns, st.copy_ns, st.lat_ns,
           st.q_ns, st.ret_ns)
    return p.record(tid, COPY_STREAM, st.call_ns)


def wait_event(p: Proc, tid: int, ev: Event, st: Step) -> None:
    if st.poll_gap_ns is None:
        p.event_sync(tid, ev, st.call_ns, st.ret_ns)
    else:
        p.poll(tid, ev, st.poll_gap_ns)


def decode_loop(proc: Proc, steps: list[Step], stream: int = 7, start: int = 1_000_000_000,
                threads: int = 2) -> None:
    """The host loop of an inference engine replaying one CUDA graph per step, with NVTX
    ranges ``step N`` > ``prepare`` / ``launch`` / ``sample`` / ``upload`` / ``sync`` /
    ``wait`` like the engine under test."""
    p = proc.at(start)
    tids = [p.thread(100 + i, "python3" if i == 0 else f"worker{i}") for i in range(threads)]
    launcher = tids[0]
    pending = None  # the previous healthy step's event, waited on after the next launch
    for k, st in enumerate(steps):
        wt = tids[st.wait_thread % len(tids)]
        step_start = p.t
        t = p.t
        p.work(st.pre_ns)
        if st.pinned_input:
            p.copy(launcher, stream, HTOD, PINNED, DEVICE, 1024, st.call_ns, st.copy_ns,
                   st.lat_ns, st.q_ns, st.ret_ns)
        p.nvtx(launcher, "prepare", t, p.t)
        t = p.t
        klass = None if k == len(steps) - 1 else ("healthy" if st.klass == "nowait" else st.klass)
        p.launch(launcher, stream, st.launch_ns, st.lat_ns, st.q_ns, list(st.nodes), planted=klass,
                 memset_node=st.memset_node)
        ev = None
        if st.klass == "healthy":
            ev = output_copy(p, launcher, stream, st) if st.output_copy else \
                p.record(launcher, stream, st.call_ns)
        p.nvtx(launcher, "launch", t, p.t)
        if pending is not None:
            t = p.t
            wait_event(p, pending[1], pending[0], pending[2])
            p.nvtx(pending[1], "wait", t, p.t)
        pending = (ev, wt, st) if ev is not None else None
        p.work(st.window_ns)
        t = p.t
        if st.klass == "gpu_to_cpu" and st.output_copy:
            wait_event(p, wt, output_copy(p, wt, stream, st), st)
            p.nvtx(wt, "sample", t, p.t)
        elif st.klass == "gpu_to_cpu" and st.poll_gap_ns is not None:
            p.copy(wt, stream, DTOH, DEVICE, PINNED, 4, st.call_ns, st.copy_ns, st.lat_ns, st.q_ns,
                   st.ret_ns)
            p.poll(wt, p.record(wt, stream, st.call_ns), st.poll_gap_ns)
            p.nvtx(wt, "sample", t, p.t)
        elif st.klass == "gpu_to_cpu":
            p.copy(wt, stream, DTOH, DEVICE, PAGEABLE if st.pageable_readback else PINNED, 4,
                   st.call_ns, st.copy_ns, st.lat_ns, st.q_ns, st.ret_ns)
            p.stream_sync(wt, stream, st.call_ns, st.ret_ns)
            p.nvtx(wt, "sample", t, p.t)
        elif st.klass == "cpu_to_gpu":
            p.copy(wt, stream, HTOD, PAGEABLE, DEVICE, 5120, st.call_ns, st.copy_ns, st.lat_ns,
                   st.q_ns, st.ret_ns)
            p.stream_sync(wt, stream, st.call_ns, st.ret_ns)
            p.nvtx(wt, "upload", t, p.t)
        elif st.klass == "other_stall":
            if st.device_sync:
                p.device_sync(wt, st.call_ns, st.ret_ns)
            else:
                p.stream_sync(wt, stream, st.call_ns, st.ret_ns)
            p.nvtx(wt, "sync", t, p.t)
        p.work(st.post_ns)
        p.nvtx(launcher, f"step {k}", step_start, p.t)
    if pending is not None:
        t = p.t
        wait_event(p, pending[1], pending[0], pending[2])
        p.nvtx(pending[1], "wait", t, p.t)


def phase_of(klass: str, healthy_waited: bool = True) -> str | None:
    """The NVTX phase ``decode_loop`` puts around the call that waits on a launch."""
    return {"gpu_to_cpu": "sample", "cpu_to_gpu": "upload", "other_stall": "sync",
            "healthy": "wait"}.get(klass)


def unrelated_thread(proc: Proc, start: int, end: int, stream: int = 99, tid: int = 900,
                     period: int = 250_000, seed: int = 0) -> None:
    """A thread busy with its own stream: eager kernels, pinned copies, event records and
    syncs, stream syncs, NVTX. ``proc`` shares the decode loop's pid but simulates another
    device, so none of this waits for, or fills the GPU gaps of, the decode loop."""
    rng = random.Random(seed)
    g = proc.thread(tid, "pin_memory")
    proc.t = start + 137
    while proc.t < end:
        t = proc.t
        proc.kernel(g, stream, rng.randrange(5_000, 80_000), 5_000, 1_000)
        proc.copy(g, stream, HTOD, PINNED, DEVICE, 2048, 3_000, 2_000, 5_000, 1_000, 1_000)
        ev = proc.record(g, stream, 2_000)
        proc.event_sync(g, ev, 2_000, 1_000)
        proc.stream_sync(g, stream, 2_000, 1_000)
        proc.nvtx(g, "background", t, proc.t)
        proc.t += rng.randrange(period // 2, period)


def watchdog_thread(proc: Proc, seed: int = 0) -> None:
    """NCCL's watchdog: a thread that only queries events, polling while each replay of the
    decode loop runs (from just after its launch call to just after its GPU work ends), as
    the watchdog does while a graph's collectives are outstanding. It waits for nothing the
    engine needs, so it must never be paired with a launch."""
    rng = random.Random(seed)
    g = proc.thread(950, "pt_nccl_watchdg")
    for launch in list(proc.launches):
        proc.t = launch.api_end + rng.randrange(500, 3_000)
        while proc.t < launch.gpu_end + 5_000:
            proc._call("cudaEventQuery_v3020", g, 1_500, ret=NOT_READY)
            proc.t += rng.randrange(500, 5_000)


def unrelated_process(proc: Proc, start: int, end: int, stream: int = 7, seed: int = 0) -> None:
    """Another process on its own GPU, with the decode loop's stream id: graph launches,
    pageable readbacks and uploads, device-wide syncs, all of its own."""
    rng = random.Random(seed)
    g = proc.thread(1, "python3")
    proc.t = start + 251
    while proc.t < end:
        t = proc.t
        proc.launch(g, stream, 6_000, 8_000, 2_000, [rng.randrange(200_000, 900_000)])
        proc.work(rng.randrange(1_000, 50_000))
        choice = rng.randrange(3)
        if choice == 0:
            proc.copy(g, stream, DTOH, DEVICE, PAGEABLE, 8, 3_000, 2_000, 5_000, 1_000, 1_000)
        elif choice == 1:
            proc.copy(g, stream, HTOD, PAGEABLE, DEVICE, 4096, 3_000, 2_000, 5_000, 1_000, 1_000)
        proc.device_sync(g, 2_000, 1_000)
        proc.nvtx(g, "other rank", t, proc.t)
        proc.work(rng.randrange(1_000, 100_000))
