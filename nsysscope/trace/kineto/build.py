"""The normalised :class:`~nsysscope.trace.Trace` of a Kineto trace (see the package doc)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...errors import DamagedExport, NotAnNsysExport, UnreadableInput
from ...model import Note
from ...util.text import clipped, name_text
from ..apis import DEFAULT_ENUMS, LAUNCH_APIS, wanted_api
from ..names import cut_names_note, name_categorical, names_of
from ..normalised import Profiler, Trace, TraceMeta
from ..nsys.gpu_work import GPU_KINDS, GRAPH_WORK_COLUMNS
from ..repeats import MAX_DAMAGED, checked_calls
from .events import Collector, to_ns
from .stacks import python_stacks
from .stream import JsonStream, open_text

#: torch.profiler, what records a Kineto trace
TORCH_PROFILER = Profiler(
    name="torch.profiler", record_cuda="ProfilerActivity.CUDA",
    record_gpu_work="activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] (CUPTI must be "
    "able to trace this GPU)",
    without_sync_records="no sync-to-event records in this torch.profiler trace "
    "(torch.profiler.profile records them with the experimental config "
    "torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True))")
_INT = "int64"
_THREAD_NAME = re.compile(r"^thread \d+ \((.*)\)$")


def read_kineto(path: str | Path) -> Trace:
    """The normalised :class:`Trace` of the Kineto JSON trace at ``path`` (plain, gzip or xz)."""
    p = Path(path)
    c = Collector()
    top: dict[str, Any] = {}
    saw_events = False
    try:
        with open_text(p) as f:
            s = JsonStream(f, p)
            first = s.top()
            if first == "[":
                s.events(c.add, exact_times=True)
                saw_events = c.events > 0 or s.count == 0
            elif first == "{":
                for key in s.fields():
                    if key == "traceEvents" and s.is_array():
                        s.events(c.add, exact_times=True)
                        saw_events = True
                    else:
                        top[key] = s.value()
            else:
                raise NotAnNsysExport(f"{p}: not a JSON trace (it starts with {first[:1]!r})")
    except OSError as e:
        raise UnreadableInput(f"{p}: cannot read: {e.strerror or e}") from None
    except (OverflowError, TypeError, ValueError) as e:  # an event's field that no trace
        # holds: a pid past 64 bits, a list for a thread id, a number of 5000 digits
        raise NotAnNsysExport(f"{p}: corrupt torch.profiler trace: an event field of the "
                              f"wrong type or size ({type(e).__name__}: {clipped(str(e))})"
                              ) from None
    if not saw_events:
        raise _not_a_trace(p, top)
    return build_trace(c, top, p)


def _not_a_trace(p: Path, top: dict[str, Any]) -> Exception:
    if {"trace", "verdict"} <= set(top) or "distributions" in top:
        return UnreadableInput(
            f"{p}: an nsysscope summary (summarize or report --format json output), not a "
            "trace; give it to 'nsysscope gate' as a side, or report the trace it came from")
    if "traceEvents" in top:
        return NotAnNsysExport(
            f"{p}: JSON, but not a torch.profiler trace: its traceEvents is not an array of "
            f"events ({json.dumps(top['traceEvents'])[:40]})")
    keys = ", ".join(sorted(top)[:5]) or "none"
    return NotAnNsysExport(
        f"{p}: JSON, but not a torch.profiler trace: no traceEvents array (top-level keys: "
        f"{keys}); nsysscope reads nsys exports and torch.profiler (Kineto) traces")


def _categorical(codes: np.ndarray, table: dict[str, int]) -> pd.Categorical:
    """A Categorical of the names ``codes`` index in ``table`` (as names are kept:
    :mod:`..names`), categories sorted."""
    return name_categorical(codes, table)


def build_trace(c: Collector, top: dict[str, Any], path: Path) -> Trace:
    _refuse_if_timeless(c, path)
    origin = _origin(c)
    api_all = _api_all(c, origin)
    wanted_codes = {code for name, code in c.names.items() if wanted_api(name)}
    api = api_all[api_all["name_code"].isin(wanted_codes)].reset_index(drop=True)
    api = pd.DataFrame({
        "start_ns": api["start_ns"], "end_ns": api["end_ns"], "tid": api["tid"],
        "corr_id": api["corr_id"], "proc": api["proc"],
        "status": np.zeros(len(api), dtype=np.int32),
        "name": _categorical(api["name_code"].to_numpy(), c.names)})
    api, repeats = checked_calls(api, path)  # damage: refused, or said
    gpu = _gpu(c, origin, api_all)
    launches = api.loc[api["name"].isin(LAUNCH_APIS), ["proc", "corr_id"]]
    # a launch's replay: its correlation id, where the events have one (an event without
    # one is -1, which would tie every GPU op without one to every launch without one)
    in_graph = (gpu["corr_id"].to_numpy() >= 0) & pd.MultiIndex.from_frame(
        gpu[["proc", "corr_id"]]).isin(pd.MultiIndex.from_frame(launches)) if len(gpu) else \
        np.zeros(0, dtype=bool)
    graph_work = _graph_work(gpu[in_graph])
    gpu_ops = _eager(gpu[~in_graph])
    nvtx = _nvtx(c, origin)
    names = _thread_names(c)
    threads = pd.DataFrame({"tid": pd.Series(list(names), dtype=_INT),
                            "thread_name": pd.Series(names_of(names.values()), dtype=str)})
    procs = sorted(set(api_all["proc"].tolist()) | set((nvtx["tid"].to_numpy() >> 24).tolist())
                   | set((c.py["gtid"] >> 24).tolist()))
    processes = pd.DataFrame({
        "proc": pd.Series(procs, dtype=_INT), "pid": pd.Series(procs, dtype=_INT),
        "name": pd.Series(names_of(_process_name(c, p) for p in procs), dtype=str)})
    ends = [int(x.max()) for x in (api_all["end_ns"], gpu["end_ns"], nvtx["end_ns"]) if len(x)]
    if c.span is not None:
        start_ns, end_ns = to_ns(np.array([c.span[0]]), np.array([c.span[1] - c.span[0]]), origin)
        span = (int(start_ns[0]), int(end_ns[0]))
    else:
        span = (0, max(ends, default=0))
    devices = top.get("deviceProperties")
    gpus = tuple(sorted({name_text(d.get("name")) for d in devices
                         if isinstance(d, dict) and d.get("name")})) \
        if isinstance(devices, list) else ()
    syncs, event_records = _syncs(c, origin, api_all)
    meta = TraceMeta(
        path=str(path), nsys_version="none",
        schema_version=f"kineto {name_text(top.get('schemaVersion', '?'))}",
        gpus=gpus, graph_trace="node" if len(graph_work) else "none",
        has_sync_records=bool(len(syncs)), has_event_records=c.sync_records,
        has_nvtx=bool(len(nvtx)), capture_start_ns=span[0], capture_end_ns=span[1],
        diagnostics=(), profiler=TORCH_PROFILER, has_graph_nodes=bool(len(graph_work)),
        can_window=False, cuda_calls=len(api_all), session_start_ns=_session_start(c, top, origin),
        rank=_rank(top), reader_notes=_skipped_note(c) + repeats + cut_names_note(
            [nvtx["text"].cat.categories, threads["thread_name"], processes["name"], gpus]))
    return Trace(meta=meta, api=api, graph_work=graph_work, gpu_ops=gpu_ops,
                 syncs=syncs, event_records=event_records,
                 nvtx=nvtx, threads=threads, processes=processes,
                 collectives=_collectives(c, gpu), enums=dict(DEFAULT_ENUMS), source=None,
                 python=python_stacks(c, api, origin))


def _skipped_note(c: Collector) -> tuple[Note, ...]:
    """The note that counts and names the events left out for want of a usable time."""
    n = sum(c.skipped.values())
    if not n:
        return ()
    return (Note("events_without_time", {
        "events": n, "kinds": [[cat, count, c.skipped_names[cat]]
                               for cat, count in c.skipped.most_common(3)],
        "more_kinds": max(0, len(c.skipped) - 3)}),)


#: the categories of a Kineto trace's CUDA calls, and of its GPU work
_CALLS = frozenset({"cuda_runtime", "cuda_driver", "runtime", "driver"})
_GPU_WORK = frozenset({"kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset"})


def _refuse_if_timeless(c: Collector, path: Path) -> None:
    """Raise :class:`DamagedExport` where more than :data:`..repeats.MAX_DAMAGED` of the CUDA
    calls, or of the GPU work, have no usable time (left out, said in a note, where fewer):
    what is left would be judged as another program (the 60 cudaStreamSynchronize of a
    case-1 capture without a duration, 4 % of its calls, read as 'launch-bound')."""
    for what, cats, kept in (("CUDA calls", _CALLS, len(c.api)), ("GPU ops", _GPU_WORK,
                                                                   len(c.gpu))):
        lost = sum(n for cat, n in c.skipped.items() if cat.lower() in cats)
        if lost > MAX_DAMAGED * (kept + lost):
            raise DamagedExport(f"{path}: corrupt torch.profiler trace: {lost} of "
                                f"{kept + lost} {what} have no usable time (dur missing, "
                                "negative or beyond any clock)")


#: Kineto times at least this large are Unix-epoch microseconds (PyTorch 1.x to ~2.3: 1.6e15
#: to 1.7e15); a trace since ~2.4 counts from ``baseTimeNanoseconds`` (7e11-5.2e12 us)
EPOCH_US = 1e15


def _session_start(c: Collector, top: dict[str, Any], origin: float) -> int | None:
    """The wall-clock time (Unix epoch, ns) of the trace's time zero: its base time plus its
    first time, or its first time where it is the epoch's own; None where neither is said
    (files of one job are then put on one axis by their collectives alone)."""
    first_ns = int(c.base or 0) * 1000 + int(round(origin * 1000))  # (exact: the base whole)
    base = top.get("baseTimeNanoseconds")
    if isinstance(base, int) and not isinstance(base, bool) and 0 <= base < 1 << 62:
        return base + first_ns
    return first_ns if first_ns >= EPOCH_US * 1000 else None


def _rank(top: dict[str, Any]) -> int | None:
    """The rank torch.distributed gave the profiled process (``distributedInfo.rank``)."""
    info = top.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    return rank if isinstance(rank, int) and not isinstance(rank, bool) and \
        0 <= rank < 1 << 31 else None


def _origin(c: Collector) -> float:
    """The time zero: the earliest timestamp kept, in whole microseconds."""
    firsts = [float(t["ts"].min()) for t in (c.api, c.gpu, c.py, c.ranges) if len(t)]
    if c.span is not None:
        firsts.append(c.span[0])
    return float(np.floor(min(firsts))) if firsts else 0.0


def _empty(cols: list[str]) -> pd.DataFrame:
    return pd.DataFrame({col: pd.Series(dtype=_INT) for col in cols})


def _api_all(c: Collector, origin: float) -> pd.DataFrame:
    """Every CUDA call, wanted or not (their correlation ids place GPU work in a process),
    sorted by start, then end, thread, correlation id: the same whatever the event order."""
    start, end = to_ns(c.api["ts"], c.api["dur"], origin)
    tid, corr, code = c.api["gtid"], c.api["corr"], c.api["name"]
    keep = ~_nested_driver_calls(start, end, tid, c.api["driver"].astype(bool))
    start, end, tid, corr, code, pid = (x[keep] for x in (start, end, tid, corr, code,
                                                          c.api["pid"]))
    order = np.lexsort((code, corr, tid, end, start))
    return pd.DataFrame({"start_ns": start[order], "end_ns": end[order], "tid": tid[order],
                         "corr_id": corr[order], "proc": pid[order], "name_code": code[order]})


def _nested_driver_calls(start: np.ndarray, end: np.ndarray, tid: np.ndarray,
                         driver: np.ndarray) -> np.ndarray:
    """Driver-API calls (``cuda_driver``) made inside a runtime call on the same thread: the
    runtime's own work (a ``cuGraphLaunch`` under ``cudaGraphLaunch``), not a second call."""
    out = np.zeros(len(start), dtype=bool)
    if not driver.any() or driver.all():
        return out
    # every call by thread and start, a runtime call before a driver call that starts with it:
    # the runtime call around a driver call is the last runtime call before it on its thread
    order = np.lexsort((driver, start, tid))
    runtime = ~driver[order]
    last = np.maximum.accumulate(np.where(runtime, np.arange(len(order)), -1))
    at = np.flatnonzero(~runtime)
    at = at[last[at] >= 0]
    call, around = order[at], order[last[at]]
    out[call] = (tid[around] == tid[call]) & (end[around] >= end[call])
    return out


def _gpu(c: Collector, origin: float, api_all: pd.DataFrame) -> pd.DataFrame:
    g = c.gpu
    start, end = to_ns(g["ts"], g["dur"], origin)
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


def _syncs(c: Collector, origin: float, api_all: pd.DataFrame
           ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``syncs`` and ``event_records`` tables, as an nsys export's SYNCHRONIZATION and
    CUDA_EVENT give them (``proc, corr_id, event_sync_id, stream``), from the ``cuda_sync``
    events: a sync's event is the ``cudaEventRecord`` it waits on, so that record's
    correlation id serves as both ends' event sync id (-1: none named). A record's stream is
    the one the sync says it waits on (``wait_on_stream``); the sync's own is its ``stream``
    (a stream sync's, or the stream a ``cudaStreamWaitEvent`` makes wait; -1 otherwise)."""
    cols = ["proc", "corr_id", "event_sync_id", "stream"]
    y = c.syncs
    if not len(y):
        return _empty(cols), _empty(cols)
    # a sync's process is its call's: the one that started last before the sync's end
    _, end = to_ns(y["ts"], y["dur"], origin)
    calls = pd.DataFrame({"corr_id": y["corr"], "start_ns": end})
    syncs = pd.DataFrame({"proc": _gpu_process(calls, api_all), "corr_id": y["corr"],
                          "event_sync_id": y["record"], "stream": y["stream"]})
    named = syncs["event_sync_id"].to_numpy() >= 0
    records = pd.DataFrame({"proc": syncs["proc"].to_numpy()[named],
                            "corr_id": y["record"][named], "event_sync_id": y["record"][named],
                            "stream": y["record_stream"][named]})
    records = records.drop_duplicates(["proc", "event_sync_id"]).sort_values(
        ["proc", "corr_id"], kind="stable").reset_index(drop=True)
    return syncs.astype(dict.fromkeys(cols, _INT)), records.astype(dict.fromkeys(cols, _INT))


def _graph_work(g: pd.DataFrame) -> pd.DataFrame:
    if not len(g):
        return _empty(GRAPH_WORK_COLUMNS)
    g = g.sort_values(["proc", "corr_id", "start_ns"], kind="stable")
    # torch.profiler names no graph exec: a replay's exec is told by the kernels it runs, in
    # order (execs of two batch sizes that run the very same kernels fall together)
    nth = g.groupby(["proc", "corr_id"], sort=False).cumcount().to_numpy(dtype=np.int64) + 1
    code = g["name"].to_numpy(dtype=np.int64) + 2  # -1 (no name) stays distinct from 0
    g = g.assign(_mix=(code * nth) % _MIX, _sq=(code * code) % _MIX)
    agg = g.groupby(["proc", "corr_id"], sort=True).agg(
        gpu_start_ns=("start_ns", "min"), gpu_end_ns=("end_ns", "max"),
        stream=("stream", "min"), device=("device", "min"), n_ops=("start_ns", "size"),
        _mix=("_mix", "sum"), _sq=("_sq", "sum"))
    out = agg.reset_index()
    out["graph_exec"] = pd.MultiIndex.from_frame(out[["proc", "n_ops", "_mix", "_sq"]]) \
        .factorize()[0]
    return out[GRAPH_WORK_COLUMNS].astype(dict.fromkeys(GRAPH_WORK_COLUMNS, _INT))


#: keeps a replay's kernel-name sums small (a prime): :func:`_graph_work`'s fingerprint
_MIX = 2_147_483_647


def _eager(g: pd.DataFrame) -> pd.DataFrame:
    cols = ["start_ns", "end_ns", "stream", "device", "corr_id", "proc", "kind", "copy_kind",
            "src_kind", "dst_kind", "bytes"]
    df = g[cols].reset_index(drop=True).astype({k: _INT for k in cols if k != "kind"})
    df["kind"] = pd.Categorical.from_codes(df["kind"].to_numpy(), categories=GPU_KINDS)
    return df


def _collectives(c: Collector, gpu: pd.DataFrame) -> pd.DataFrame:
    cols = ["proc", "corr_id", "start_ns", "end_ns", "stream", "device"]
    nccl = gpu[gpu["name"] >= 0]
    df = nccl[cols].reset_index(drop=True).astype(dict.fromkeys(cols, _INT))
    df["name"] = _categorical(nccl["name"].to_numpy(), c.kernel_names) if len(nccl) else \
        pd.Series(dtype=str)
    return df.sort_values(["proc", "start_ns"], kind="stable").reset_index(drop=True)


def _nvtx(c: Collector, origin: float) -> pd.DataFrame:
    r = c.ranges
    start, end = to_ns(r["ts"], r["dur"], origin)
    text = name_categorical(r["name"], c.names)  # as the nsys loader gives it
    order = np.lexsort((text.codes, r["gtid"], -end, start)) if len(r) else \
        np.zeros(0, dtype=np.int64)
    return pd.DataFrame({"start_ns": start[order], "end_ns": end[order],
                         "tid": r["gtid"][order], "text": text[order]})


def _thread_names(c: Collector) -> dict[int, str]:
    out: dict[int, str] = {}
    for (pid, tid), name in sorted(c.thread_names.items(), key=lambda kv: str(kv[0])):
        if pid in c.process_labels and c.process_labels[pid].startswith("GPU"):
            continue  # a stream lane ("stream 7")
        if not (isinstance(pid, int) and isinstance(tid, int)):
            continue
        m = _THREAD_NAME.match(name)
        out.setdefault((c.num(pid) << 24) | (tid & 0xFFFFFF), m.group(1) if m else name)
    return out


def _process_name(c: Collector, pid: int) -> str:
    """The name a metadata event gives process ``pid`` (a number :meth:`Collector.num` made:
    the metadata keeps the pid as the trace wrote it)."""
    return next((name for raw, name in c.process_names.items() if c.num(raw) == pid), "")
