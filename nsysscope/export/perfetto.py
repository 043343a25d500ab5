"""An analysed trace as a zoomable Perfetto timeline (Chrome trace JSON, ``.json.gz``).

``nsysscope export TRACE --perfetto out.json.gz``; open the file in https://ui.perfetto.dev
(or ``chrome://tracing``). One process group per profiled process, each with:

* per host thread: its NVTX ranges (the thread's own track) and its CUDA API calls
  (``<thread> <tid>: CUDA API``);
* per GPU stream (``GPU d stream s``): one slice per graph replay (``graph replay #N``), and
  the eager kernels, copies and memsets; with ``all_kernels`` every kernel, copy and memset of
  every replay on ``GPU d stream s: graph kernels``, read from the export as a stream;
* nsysscope's findings: ``nsysscope: class per launch`` (one slice per launch named by its
  class, from its launch call to the next one), ``nsysscope: overlap window`` (launch call end
  to the host block that waited on it) and ``nsysscope: GPU idle`` (the gap after each replay,
  named by the class that caused it; its ``gpu_gap_us`` is the slice's length, its
  ``gpu_idle_us`` the gap less the eager GPU work inside it, the report's figure), with phase,
  op, API chain, and the Python line of the stall site in the args;
* flow arrows from each ``cudaGraphLaunch`` to its replay, and from the replay to the end of
  the host call that waited on it.

Slices that would overlap on one track (NVTX start/end ranges, concurrent kernels, the
windows of consecutive launches) go to numbered extra tracks of the same thread.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd

from ..analysis import Analysis
from ..trace.gpu_work import gpu_op_rows
from ..util.version import __version__
from .chrome_json import EventWriter, Lanes, lanes, open_trace

_COPY = {1: "HtoD", 2: "DtoH", 8: "DtoD", 10: "PtoP"}
_SYNTHETIC = 1 << 24  # first tid of the tracks that are not OS threads


class _Tracks:
    """Chrome ``tid`` of each track, named and ordered on first use."""

    def __init__(self, w: EventWriter) -> None:
        self.w, self.next = w, _SYNTHETIC
        self.tids: dict[tuple[int, tuple[Any, ...], int], int] = {}  # (pid, key, lane)

    def get(self, pid: int, key: tuple[Any, ...], name: str, order: int, lane: int = 0,
            os_tid: int | None = None) -> int:
        k = (pid, key, lane)
        tid = self.tids.get(k)
        if tid is None:
            if os_tid is not None and lane == 0:
                tid = os_tid
            else:
                tid, self.next = self.next, self.next + 1
            self.tids[k] = tid
            self.w.meta(pid, tid, "thread_name", name if lane == 0 else f"{name} ({lane + 1})")
            self.w.meta(pid, tid, "thread_sort_index", order * 16 + lane)
        return tid


def write_perfetto(path: str | os.PathLike[str], a: Analysis, all_kernels: bool = False) -> int:
    """Write ``a`` as a Perfetto/Chrome trace to ``path`` (gzip if ``.gz``); the number of
    events written."""
    if not a.holds_events:
        raise ValueError("this analysis holds none of the trace's events (a long trace "
                         "analysed in windows): analyse it with analyze_file(path, "
                         "events='all') for a timeline of every event")
    tr = a.trace
    other = {"nsysscope_version": __version__, "trace": tr.meta.path,
             "nsys_version": tr.meta.nsys_version, "gpus": list(tr.meta.gpus),
             "verdict": a.summary.verdict}
    with open_trace(path, other) as w:
        tracks = _Tracks(w)
        names = dict(zip(tr.threads["tid"], tr.threads["thread_name"], strict=False))
        L = a.launches
        procs = sorted(set(L["proc"].tolist()) | set(tr.api["proc"].tolist()))
        pnames = dict(zip(tr.processes["proc"], tr.processes["name"], strict=False)) \
            if len(tr.processes) else {}
        for i, proc in enumerate(procs):
            pid = proc & 0xFFFFFF
            w.meta(pid, None, "process_name", f"{pnames.get(proc) or 'process'} (pid {pid})")
            w.meta(pid, None, "process_sort_index", i)
        order = {t: i for i, t in enumerate(sorted(set(tr.api["tid"]) | set(tr.nvtx["tid"])))}
        _nvtx(w, tracks, tr.nvtx, names, order)
        api_tid = _api(w, tracks, tr.api, names, order, _wanted_calls(L))
        gpu_tid = _gpu(w, tracks, L, tr.gpu_ops)
        if all_kernels and tr.source is not None:
            _graph_kernels(w, tracks, tr.source, L)
        _findings(w, tracks, L)
        _flows(w, L, api_tid, gpu_tid, names)
        return w.count


def _thread(tid: int, names: dict[int, str]) -> str:
    return f"{names.get(tid) or 'thread'} {tid & 0xFFFFFF}"


def _sorted(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    d = df.assign(_neg_end=-df["end_ns"])
    return d.sort_values([*by, "start_ns", "_neg_end"], kind="stable")


def _nvtx(w: EventWriter, tracks: _Tracks, nvtx: pd.DataFrame, names: dict[int, str],
          order: dict[int, int]) -> None:
    d = _sorted(nvtx, ["tid"])
    for tid, g in d.groupby("tid", sort=False):
        pid, lane = (tid >> 24) & 0xFFFFFF, lanes(g["start_ns"].to_numpy(), g["end_ns"].to_numpy())
        for (s, e, text), k in zip(g[["start_ns", "end_ns", "text"]].itertuples(index=False),
                                   lane, strict=True):
            t = tracks.get(pid, ("nvtx", tid), names.get(tid) or "thread", 2 * order[tid],
                           int(k), os_tid=tid & 0xFFFFFF)
            w.write({"ph": "X", "cat": "nvtx", "name": text, "pid": pid, "tid": t, "ts_ns": s,
                     "dur_ns": e - s})


def _wanted_calls(L: pd.DataFrame) -> set[tuple[int, int]]:
    """(thread, start) of the API calls flows start or end at: launches and host blocks."""
    want = set(zip(L["tid"].tolist(), L["api_start_ns"].tolist(), strict=True))
    b = L[L["block"] >= 0]
    want.update(zip(b["block_tid"].tolist(), b["block_start_ns"].astype(np.int64).tolist(),
                    strict=True))
    return want


def _api(w: EventWriter, tracks: _Tracks, api: pd.DataFrame, names: dict[int, str],
         order: dict[int, int], want: set[tuple[int, int]]) -> dict[tuple[int, int], int]:
    found: dict[tuple[int, int], int] = {}
    d = _sorted(api, ["tid"])
    for tid, g in d.groupby("tid", sort=False):
        pid, lane = (tid >> 24) & 0xFFFFFF, lanes(g["start_ns"].to_numpy(), g["end_ns"].to_numpy())
        for (s, e, corr, name), k in zip(
                g[["start_ns", "end_ns", "corr_id", "name"]].itertuples(index=False), lane,
                strict=True):
            t = tracks.get(pid, ("api", tid), f"{_thread(tid, names)}: CUDA API",
                           2 * order[tid] + 1, int(k))
            if (tid, s) in want:
                found[(tid, s)] = t
            w.write({"ph": "X", "cat": "cuda_api", "name": str(name), "pid": pid, "tid": t,
                     "ts_ns": s, "dur_ns": e - s, "args": {"corr_id": corr}})
    return found


def _op_name(kind: str, copy_kind: int, nbytes: int) -> str:
    if kind == "memcpy":
        return f"memcpy {_COPY.get(int(copy_kind), int(copy_kind))} {int(nbytes)} B"
    return f"{kind} (eager)" if kind == "kernel" else str(kind)


def _gpu(w: EventWriter, tracks: _Tracks, L: pd.DataFrame,
         ops: pd.DataFrame) -> dict[int, int]:
    """Graph replays and eager GPU work per stream; the track of each launch's replay."""
    r = L[L["gpu_start_ns"].notna()]
    replays = pd.DataFrame({
        "proc": r["proc"], "device": r["device"], "stream": r["stream"],
        "start_ns": r["gpu_start_ns"].astype(np.int64), "end_ns": r["gpu_end_ns"].astype(np.int64),
        "name": "graph replay #" + r["launch"].astype(str), "launch": r["launch"],
        "n_ops": r["n_ops"], "klass": r["klass"].astype(str)})
    eager = pd.DataFrame({
        "proc": ops["proc"], "device": ops["device"], "stream": ops["stream"],
        "start_ns": ops["start_ns"], "end_ns": ops["end_ns"],
        "name": [_op_name(str(k), c, b) for k, c, b in
                 zip(ops["kind"], ops["copy_kind"], ops["bytes"], strict=True)],
        "launch": -1, "n_ops": 1, "klass": ""})
    d = _sorted(pd.concat([replays, eager], ignore_index=True), ["proc", "device", "stream"])
    replay_tid: dict[int, int] = {}
    for (proc, device, stream), g in d.groupby(["proc", "device", "stream"], sort=False):
        pid = proc & 0xFFFFFF
        lane = lanes(g["start_ns"].to_numpy(), g["end_ns"].to_numpy())
        for row, k in zip(g.itertuples(index=False), lane, strict=True):
            t = tracks.get(pid, ("gpu", device, stream), f"GPU {device} stream {stream}",
                           10_000 + device * 1000 + stream % 1000, int(k))
            ev: dict[str, Any] = {"ph": "X", "cat": "gpu", "name": row.name, "pid": pid,
                                  "tid": t, "ts_ns": row.start_ns,
                                  "dur_ns": row.end_ns - row.start_ns}
            if row.launch >= 0:
                replay_tid[row.launch] = t
                ev["args"] = {"launch": row.launch, "ops": row.n_ops, "class": row.klass}
            w.write(ev)
    return replay_tid


def _graph_kernels(w: EventWriter, tracks: _Tracks, db: os.PathLike[str] | str,
                   L: pd.DataFrame) -> None:
    """Every kernel, copy and memset of every replay, streamed from the export."""
    graph = set(zip(L["proc"].tolist(), L["corr_id"].tolist(), strict=True))
    lane: dict[tuple[int, int, int], Lanes] = {}
    for proc, device, stream, s, e, corr, name in gpu_op_rows(db):
        if (proc, corr) not in graph:
            continue
        key = (proc, device, stream)
        k = lane.setdefault(key, Lanes()).add(s, e)
        pid = proc & 0xFFFFFF
        t = tracks.get(pid, ("kernels", device, stream),
                       f"GPU {device} stream {stream}: graph kernels",
                       10_000 + device * 1000 + stream % 1000, k)
        w.write({"ph": "X", "cat": "gpu_graph", "name": name, "pid": pid, "tid": t,
                 "ts_ns": s, "dur_ns": e - s, "args": {"corr_id": corr}})


def _python_line(row: Any) -> str | None:
    if isinstance(row.src_file, str) and row.src_file and not pd.isna(row.src_line):
        text = f": {row.src_text.strip()}" if isinstance(row.src_text, str) and row.src_text else ""
        return f"{row.src_file}:{int(row.src_line)}{text}"
    return None


def _launch_args(row: Any) -> dict[str, Any]:
    args = {"launch": row.launch, "class": str(row.klass), "steady": bool(row.steady),
            "step": None if row.step is None or pd.isna(row.step) else int(row.step),
            "phase": row.phase or None, "op": row.op if isinstance(row.op, str) else None,
            "api_chain": row.api_chain or None,
            "window_us": None if pd.isna(row.window_ns) else round(row.window_ns / 1e3, 2),
            "gpu_idle_us": None if pd.isna(row.gpu_idle_ns) else round(row.gpu_idle_ns / 1e3, 2),
            "python_line": _python_line(row)}
    return {k: v for k, v in args.items() if v is not None}


def _findings(w: EventWriter, tracks: _Tracks, L: pd.DataFrame) -> None:
    cols = ["launch", "proc", "klass", "steady", "step", "phase", "op", "api_chain", "window_ns",
            "gpu_idle_ns", "src_file", "src_line", "src_text", "api_start_ns", "api_end_ns",
            "next_api_start_ns", "block_start_ns", "gpu_end_ns", "next_gpu_start_ns", "waited"]
    d = L[[c for c in cols if c in L.columns]].sort_values(["proc", "api_start_ns"], kind="stable")
    for proc, g in d.groupby("proc", sort=False):
        pid = proc & 0xFFFFFF
        klass, window, idle = Lanes(), Lanes(), Lanes()
        idle_rows = []
        for row in g.itertuples(index=False):
            args = _launch_args(row)
            start = int(row.api_start_ns)
            end = int(row.next_api_start_ns) if not pd.isna(row.next_api_start_ns) \
                else int(row.api_end_ns)
            t = tracks.get(pid, ("class",), "nsysscope: class per launch", 20_000,
                           klass.add(start, end))
            w.write({"ph": "X", "cat": "nsysscope", "name": str(row.klass), "pid": pid,
                     "tid": t, "ts_ns": start, "dur_ns": end - start, "args": args})
            if row.waited and not pd.isna(row.block_start_ns):
                s, e = int(row.api_end_ns), int(row.block_start_ns)
                t = tracks.get(pid, ("window",), "nsysscope: overlap window", 20_001,
                               window.add(s, max(s, e)))
                w.write({"ph": "X", "cat": "nsysscope", "name": "overlap window", "pid": pid,
                         "tid": t, "ts_ns": s, "dur_ns": e - s, "args": args})
            if not pd.isna(row.gpu_end_ns) and not pd.isna(row.next_gpu_start_ns) \
                    and row.next_gpu_start_ns > row.gpu_end_ns:
                idle_rows.append((int(row.gpu_end_ns), int(row.next_gpu_start_ns), row, args))
        for s, e, row, args in sorted(idle_rows, key=lambda x: (x[0], -x[1])):
            t = tracks.get(pid, ("idle",), "nsysscope: GPU idle (named by cause)", 20_002,
                           idle.add(s, e))
            # the slice spans the whole gap; gpu_idle_us leaves out the eager work inside it
            w.write({"ph": "X", "cat": "nsysscope", "name": str(row.klass), "pid": pid,
                     "tid": t, "ts_ns": s, "dur_ns": e - s,
                     "args": args | {"gpu_gap_us": round((e - s) / 1e3, 2)}})


def _flows(w: EventWriter, L: pd.DataFrame, api_tid: dict[tuple[int, int], int],
           gpu_tid: dict[int, int], names: dict[int, str]) -> None:
    """Launch call -> replay, replay -> the host call that waited on it (flow events bound to
    the enclosing slices)."""
    flow = 0
    cols = ["launch", "tid", "proc", "api_start_ns", "api_end_ns", "gpu_start_ns", "gpu_end_ns",
            "block", "block_tid", "block_start_ns", "block_end_ns"]
    for row in L[cols].itertuples(index=False):
        if pd.isna(row.gpu_start_ns) or row.launch not in gpu_tid:
            continue
        pid, g0, g1 = row.proc & 0xFFFFFF, int(row.gpu_start_ns), int(row.gpu_end_ns)
        src = api_tid.get((row.tid, row.api_start_ns))
        if src is not None:
            flow += 1
            _flow(w, flow, "launch -> replay", pid,
                  (src, row.api_start_ns + (row.api_end_ns - row.api_start_ns) // 2),
                  (gpu_tid[row.launch], g0 + (g1 - g0) // 2))
        if row.block >= 0:
            b0, b1 = int(row.block_start_ns), int(row.block_end_ns)
            dst = api_tid.get((row.block_tid, b0))
            if dst is not None:
                flow += 1
                # to the end of the wait: it returned when the replay finished
                _flow(w, flow, "replay -> host wait", pid,
                      (gpu_tid[row.launch], g0 + (g1 - g0) // 2),
                      (dst, max(b0, b1 - 1)), dst_pid=(row.block_tid >> 24) & 0xFFFFFF)


def _flow(w: EventWriter, fid: int, name: str, pid: int, src: tuple[int, int],
          dst: tuple[int, int], dst_pid: int | None = None) -> None:
    w.write({"ph": "s", "cat": "nsysscope.flow", "name": name, "id": fid, "pid": pid,
             "tid": src[0], "ts_ns": src[1]})
    w.write({"ph": "f", "bp": "e", "cat": "nsysscope.flow", "name": name, "id": fid,
             "pid": pid if dst_pid is None else dst_pid, "tid": dst[0], "ts_ns": dst[1]})
