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

import json
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ..analysis import Analysis
from ..model.sites import source_location
from ..trace.nsys.gpu_work import gpu_op_blocks, op_window_bounds
from ..util.version import __version__
from .chrome_json import EventWriter, Lanes, json_texts, lanes, open_trace

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

    def of_lanes(self, lane: np.ndarray, pid: int, key: tuple[Any, ...], name: str, order: int,
                 os_tid: int | None = None) -> np.ndarray:
        """The ``tid`` of each slice of one track from its lane (:func:`lanes`): each lane's
        track got once, in order of first use (the order tracks are numbered and named in)."""
        used, first = np.unique(lane, return_index=True)
        tid_of = np.zeros(int(used.max()) + 1 if len(used) else 0, dtype=np.int64)
        for k in used[np.argsort(first)]:
            tid_of[k] = self.get(pid, key, name, order, int(k), os_tid)
        out: np.ndarray = tid_of[lane]
        return out


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
        api_tid = _api(w, tracks, tr.api, names, order, _wanted_starts(L))
        gpu_tid = _gpu(w, tracks, L, tr.gpu_ops)
        if all_kernels and tr.source is not None:
            _graph_kernels(w, tracks, tr.source, L)
        _findings(w, tracks, L)
        _flows(w, L, api_tid, gpu_tid)
        return w.count


def _thread(tid: int, names: dict[int, str]) -> str:
    return f"{names.get(tid) or 'thread'} {tid & 0xFFFFFF}"


def _sorted(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    d = df.assign(_neg_end=-df["end_ns"])
    return d.sort_values([*by, "start_ns", "_neg_end"], kind="stable")


def _runs(*keys: np.ndarray) -> list[slice]:
    """The runs of equal keys in rows sorted by them."""
    n = len(keys[0])
    change = np.zeros(max(n - 1, 0), dtype=bool)
    for k in keys:
        change |= k[1:] != k[:-1]
    bounds = np.r_[0, np.flatnonzero(change) + 1, n]
    return [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


def _thread_tracks(tracks: _Tracks, d: pd.DataFrame, kind: str, name: Callable[[int], str],
                   order: Callable[[int], int], os_tid: bool) -> np.ndarray:
    """The Chrome ``tid`` of each row of ``d`` (sorted by thread, then as :func:`lanes`
    wants): per host thread, one track of ``kind`` and its extra lanes."""
    tids, start, end = d["tid"].to_numpy(), d["start_ns"].to_numpy(), d["end_ns"].to_numpy()
    out = np.empty(len(d), dtype=np.int64)
    for run in _runs(tids):
        tid = int(tids[run.start])
        pid = (tid >> 24) & 0xFFFFFF
        out[run] = tracks.of_lanes(lanes(start[run], end[run]), pid, (kind, tid), name(tid),
                                   order(tid), tid & 0xFFFFFF if os_tid else None)
    return out


def _nvtx(w: EventWriter, tracks: _Tracks, nvtx: pd.DataFrame, names: dict[int, str],
          order: dict[int, int]) -> None:
    d = _sorted(nvtx, ["tid"])
    t = _thread_tracks(tracks, d, "nvtx", lambda tid: names.get(tid) or "thread",
                       lambda tid: 2 * order[tid], os_tid=True)
    w.write_slices("nvtx", json_texts(d["text"]), (d["tid"].to_numpy() >> 24) & 0xFFFFFF, t,
                   d["start_ns"].to_numpy(), d["end_ns"].to_numpy())


def _wanted_starts(L: pd.DataFrame) -> np.ndarray:
    """The starts of the API calls flows start or end at: launches and host blocks."""
    blocks = L.loc[L["block"] >= 0, "block_start_ns"].astype(np.int64)
    return np.unique(np.r_[L["api_start_ns"].to_numpy(dtype=np.int64), blocks.to_numpy()])


def _api(w: EventWriter, tracks: _Tracks, api: pd.DataFrame, names: dict[int, str],
         order: dict[int, int], wanted: np.ndarray) -> pd.Series:
    """The CUDA API calls per host thread; the track of each call that starts at one of the
    ``wanted`` times, by (thread, start)."""
    d = _sorted(api, ["tid"])
    t = _thread_tracks(tracks, d, "api", lambda tid: f"{_thread(tid, names)}: CUDA API",
                       lambda tid: 2 * order[tid] + 1, os_tid=False)
    tid, start = d["tid"].to_numpy(), d["start_ns"].to_numpy()
    w.write_slices("cuda_api", json_texts(d["name"]), (tid >> 24) & 0xFFFFFF, t, start,
                   d["end_ns"].to_numpy(), {"corr_id": d["corr_id"].to_numpy()})
    keep = np.isin(start, wanted)
    found = pd.Series(t[keep], index=pd.MultiIndex.from_arrays([tid[keep], start[keep]]))
    return found[~found.index.duplicated(keep="last")]


def _op_names(ops: pd.DataFrame) -> np.ndarray:
    """Each eager op's slice name, made once per distinct kind, copy kind and size."""
    keys = ops[["kind", "copy_kind", "bytes"]].astype({"kind": str})
    codes, distinct = pd.MultiIndex.from_frame(keys).factorize()
    names = [_op_name(k, c, b) for k, c, b in distinct]
    out: np.ndarray = np.array(names, dtype=object)[codes]
    return out


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
        "start_ns": ops["start_ns"], "end_ns": ops["end_ns"], "name": _op_names(ops),
        "launch": -1, "n_ops": 1, "klass": ""})
    d = _sorted(pd.concat([replays, eager], ignore_index=True), ["proc", "device", "stream"])
    t = _stream_tracks(tracks, d, "gpu")
    start, end = d["start_ns"].to_numpy(), d["end_ns"].to_numpy()
    name, pid_of = json_texts(d["name"]), d["proc"].to_numpy() & 0xFFFFFF
    launch = d["launch"].to_numpy()
    replay = launch >= 0
    w.write_slices("gpu", name[replay], pid_of[replay], t[replay], start[replay], end[replay],
                   {"launch": launch[replay], "ops": d["n_ops"].to_numpy()[replay],
                    "class": json_texts(d["klass"].to_numpy()[replay])})
    w.write_slices("gpu", name[~replay], pid_of[~replay], t[~replay], start[~replay],
                   end[~replay])
    return dict(zip(launch[replay].tolist(), t[replay].tolist(), strict=True))


def _stream_tracks(tracks: _Tracks, d: pd.DataFrame, kind: str,
                   carried: dict[tuple[int, int, int], Lanes] | None = None) -> np.ndarray:
    """The Chrome ``tid`` of each GPU op of ``d`` (sorted by process, device, stream, then as
    :func:`lanes` wants): per stream, one track of ``kind`` (``gpu``: replays and eager work;
    ``kernels``: every graph node) and its extra lanes; ``carried``: each stream's lanes so
    far, for ops read a block at a time."""
    proc, device, stream = (d[c].to_numpy() for c in ("proc", "device", "stream"))
    start, end = d["start_ns"].to_numpy(), d["end_ns"].to_numpy()
    suffix = ": graph kernels" if kind == "kernels" else ""
    t = np.empty(len(d), dtype=np.int64)
    for run in _runs(proc, device, stream):
        dev, st = int(device[run.start]), int(stream[run.start])
        track = None if carried is None else \
            carried.setdefault((int(proc[run.start]), dev, st), Lanes())
        t[run] = tracks.of_lanes(lanes(start[run], end[run], track),
                                 int(proc[run.start]) & 0xFFFFFF, (kind, dev, st),
                                 f"GPU {dev} stream {st}{suffix}",
                                 10_000 + dev * 1000 + st % 1000)
    return t


def _graph_kernels(w: EventWriter, tracks: _Tracks, db: os.PathLike[str] | str,
                   L: pd.DataFrame) -> None:
    """Every kernel, copy and memset of every replay, read from the export a time window at a
    time and written a block at a time; each stream's lanes carried from block to block."""
    procs = np.unique(L["proc"].to_numpy())
    graph = np.unique(_op_key(procs, L["proc"].to_numpy(), L["corr_id"].to_numpy()))
    lane_state: dict[tuple[int, int, int], Lanes] = {}
    for block in gpu_op_blocks(db, op_window_bounds(L["gpu_start_ns"], L["n_ops"])):
        proc, corr = block["proc"].to_numpy(), block["corr_id"].to_numpy()
        known = np.isin(proc, procs)
        keep = known & np.isin(_op_key(procs, np.where(known, proc, procs[0]), corr), graph)
        d = block[keep]
        t = _stream_tracks(tracks, d, "kernels", lane_state)
        w.write_slices("gpu_graph", json_texts(d["name"]), d["proc"].to_numpy() & 0xFFFFFF, t,
                       d["start_ns"].to_numpy(), d["end_ns"].to_numpy(),
                       {"corr_id": d["corr_id"].to_numpy()})


def _op_key(procs: np.ndarray, proc: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """(process, correlation id) as one integer: the process's place among ``procs`` (which
    holds it), and the 32-bit correlation id."""
    return np.searchsorted(procs, proc).astype(np.int64) << 32 | (corr.astype(np.int64)
                                                                  & 0xFFFFFFFF)


def _distinct(values: Any, text: Callable[[Any], str | None]) -> np.ndarray:
    """``text(v)`` of each value, made once per distinct value (missing ones included): an
    object array, None where ``text`` gives None."""
    codes, distinct = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=False)
    out: np.ndarray = np.array([text(v) for v in distinct] + [None], dtype=object)[codes]
    return out


def _us(ns: Any) -> str | None:
    """Nanoseconds as microseconds to two decimals, as JSON; None where missing."""
    return None if pd.isna(ns) else json.dumps(round(ns / 1e3, 2))


def _text(v: Any) -> str | None:
    """A non-empty text as JSON; None otherwise."""
    return json.dumps(v, ensure_ascii=False) if isinstance(v, str) and v else None


def _python_lines(L: pd.DataFrame) -> np.ndarray:
    """Each launch's Python line of its stall site (``file:line: text``), as JSON; None where
    it has none."""
    if "src_file" not in L.columns:
        return np.full(len(L), None, dtype=object)
    sites = pd.MultiIndex.from_arrays([L[c].astype(object) for c in
                                       ("src_file", "src_line", "src_text", "src_function")])
    codes, distinct = sites.factorize()

    def line(file: Any, number: Any, text: Any, func: Any) -> str | None:
        if not (isinstance(file, str) and file and not pd.isna(number)):
            return None
        said = f": {text.strip()}" if isinstance(text, str) and text else ""
        where = source_location(file, int(number), func if isinstance(func, str) else None)
        return json.dumps(f"{where}{said}", ensure_ascii=False)

    out: np.ndarray = np.array([line(*site) for site in distinct] + [None], dtype=object)[codes]
    return out


def _launch_args(L: pd.DataFrame) -> np.ndarray:
    """Each launch's findings as the fields of a JSON object (without its braces), the
    missing ones left out: launch, class, steady, step, phase, op, API chain, window and GPU
    idle (us), and the Python line of the stall site."""
    step = L["step"] if "step" in L.columns else pd.Series(None, index=L.index, dtype=object)
    fields = {
        "launch": L["launch"].astype(str).to_numpy(dtype=object),
        "class": np.asarray(json_texts(L["klass"].astype(str)), dtype=object),
        "steady": np.where(L["steady"].to_numpy(dtype=bool), "true", "false").astype(object),
        "step": _distinct(step, lambda v: None if v is None or pd.isna(v) else str(int(v))),
        "phase": _distinct(L["phase"], _text),
        "op": _distinct(L["op"], lambda v: _text(v) if v != "" else '""'),
        "api_chain": _distinct(L["api_chain"], _text),
        "window_us": _distinct(L["window_ns"], _us),
        "gpu_idle_us": _distinct(L["gpu_idle_ns"], _us),
        "python_line": _python_lines(L),
    }
    out = np.full(len(L), "", dtype=object)
    for key, value in fields.items():
        given = ~pd.isna(value)
        piece = np.full(len(L), "", dtype=object)
        piece[given] = np.where(out[given] == "", "", ",") + f'"{key}":' + value[given]
        out = out + piece
    return out


def _findings(w: EventWriter, tracks: _Tracks, L: pd.DataFrame) -> None:
    """Per process, three tracks of nsysscope's findings: the class of each launch (from its
    launch call to the next), its overlap window, and the GPU idle gap after its replay."""
    d = L.sort_values(["proc", "api_start_ns"], kind="stable")
    args = _launch_args(d)
    proc = d["proc"].to_numpy()
    pid = proc & 0xFFFFFF
    start, end = d["api_start_ns"].to_numpy(), d["api_end_ns"].to_numpy()
    nxt = d["next_api_start_ns"].to_numpy()
    class_end = np.where(np.isnan(nxt), end, np.nan_to_num(nxt)).astype(np.int64)
    block = d["block_start_ns"].to_numpy()
    waited = d["waited"].to_numpy(dtype=bool) & ~np.isnan(block)
    window_end = np.nan_to_num(block).astype(np.int64)
    gpu_end, next_gpu = d["gpu_end_ns"].to_numpy(), d["next_gpu_start_ns"].to_numpy()
    idle = ~np.isnan(gpu_end) & ~np.isnan(next_gpu) & (next_gpu > gpu_end)
    idle_start, idle_end = np.nan_to_num(gpu_end).astype(np.int64), \
        np.nan_to_num(next_gpu).astype(np.int64)
    klass = json_texts(d["klass"].astype(str))
    window_name = np.full(len(d), json.dumps("overlap window"), dtype=object)
    for run in _runs(proc):
        p, rows = int(pid[run.start]), np.arange(run.start, run.stop)
        w_rows = rows[waited[run]]
        i_rows = rows[idle[run]]
        i_rows = i_rows[np.lexsort((-idle_end[i_rows], idle_start[i_rows]))]
        gap = _distinct(idle_end[i_rows] - idle_start[i_rows],
                        lambda ns: json.dumps(round(ns / 1e3, 2)))
        for what, take, s, e, name, body, slot, label in (
                ("class", rows, start[rows], class_end[rows], klass[rows], args[rows], 20_000,
                 "nsysscope: class per launch"),
                ("window", w_rows, end[w_rows], window_end[w_rows], window_name[w_rows],
                 args[w_rows], 20_001, "nsysscope: overlap window"),
                # the slice spans the whole gap; gpu_idle_us leaves out the eager work in it
                ("idle", i_rows, idle_start[i_rows], idle_end[i_rows], klass[i_rows],
                 args[i_rows] + ',"gpu_gap_us":' + gap, 20_002,
                 "nsysscope: GPU idle (named by cause)")):
            t = tracks.of_lanes(lanes(s, np.maximum(s, e)), p, (what,), label, slot)
            w.write_events({"ph": "X", "cat": "nsysscope"},
                           {"name": name, "pid": np.full(len(take), p), "tid": t,
                            "args": "{" + body + "}"}, s, e - s)


def _flows(w: EventWriter, L: pd.DataFrame, api_tid: pd.Series, gpu_tid: dict[int, int]) -> None:
    """Launch call -> replay, replay -> the host call that waited on it (flow events bound to
    the enclosing slices), numbered in the order of the launches."""
    replay = pd.Series(gpu_tid, dtype=np.int64)
    r = L[L["gpu_start_ns"].notna() & L["launch"].isin(replay.index)]
    g0, g1 = r["gpu_start_ns"].to_numpy().astype(np.int64), r["gpu_end_ns"].to_numpy().astype(
        np.int64)
    mid = g0 + (g1 - g0) // 2
    on = replay.reindex(r["launch"]).to_numpy()
    a0, a1 = r["api_start_ns"].to_numpy(), r["api_end_ns"].to_numpy()
    src = _track_of(api_tid, r["tid"].to_numpy(), a0)
    block = r["block"].to_numpy() >= 0
    b0 = np.nan_to_num(r["block_start_ns"].to_numpy()).astype(np.int64)
    b1 = np.nan_to_num(r["block_end_ns"].to_numpy()).astype(np.int64)
    block_tid = r["block_tid"].to_numpy()
    dst = np.where(block, _track_of(api_tid, block_tid, b0), -1)
    first, second = src >= 0, dst >= 0
    ids = np.cumsum(first.astype(np.int64) + second)  # each launch's flows, in turn
    pid = r["proc"].to_numpy() & 0xFFFFFF
    for name, has, fid, src_tid, src_ts, dst_tid, dst_ts, dst_pid in (
            ("launch -> replay", first, ids - second, src, a0 + (a1 - a0) // 2, on, mid, pid),
            # to the end of the wait: it returned when the replay finished
            ("replay -> host wait", second, ids, on, mid, dst, np.maximum(b0, b1 - 1),
             (block_tid >> 24) & 0xFFFFFF)):
        w.write_events({"ph": "s", "cat": "nsysscope.flow", "name": name},
                       {"id": fid[has], "pid": pid[has], "tid": src_tid[has]}, src_ts[has])
        w.write_events({"ph": "f", "bp": "e", "cat": "nsysscope.flow", "name": name},
                       {"id": fid[has], "pid": dst_pid[has], "tid": dst_tid[has]}, dst_ts[has])


def _track_of(api_tid: pd.Series, tid: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The track of each API call (thread, start) in ``api_tid``; -1 where it has none."""
    at = api_tid.index.get_indexer(pd.MultiIndex.from_arrays([tid, start]))
    return np.where(at >= 0, api_tid.to_numpy()[np.maximum(at, 0)], -1)
