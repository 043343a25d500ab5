"""The nsys reader: the normalised :class:`~nsysscope.trace.Trace` of an SQLite export (or a
part of it in time: :mod:`..time_range`). Only the rows and columns the analysis needs are
read (:mod:`.tables` for the host side, :mod:`.gpu_work` for the GPU side)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...errors import DamagedExport
from ...util.progress import progress
from ...util.text import clipped
from ..apis import DEFAULT_ENUMS, LAUNCH_APIS
from ..backwards import backwards_note, backwards_rows
from ..names import cut_names_note
from ..normalised import NSYS, Trace, TraceMeta
from ..repeats import checked_calls
from ..time_range import EVERY_CALL, CallRows, TimeRange
from . import tables
from .damage import damage_reported
from .gpu_work import GpuWork, graph_work, own_process
from .schema import Schema, connect_readonly
from .sources import read_resolved


def read_nsys(path: str | Path, nsys: str | None, span: TimeRange) -> Trace:
    """The :class:`Trace` of ``span`` of the nsys export, report or compressed export at
    ``path`` (``nsys``: the nsys that exports a report)."""
    return read_resolved(path, nsys, lambda db: _read_export(path, db, span))


def _read_export(path: str | Path, db: Path, span: TimeRange) -> Trace:
    """The :class:`Trace` of ``span`` of the export ``db`` of ``path``."""
    conn = connect_readonly(db)
    s: Schema | None = None
    try:
        with damage_reported(path):
            s = Schema(conn, Path(path))
            return read_trace(s, Path(path), db, span)
    finally:
        if s is not None:
            s.close()
        else:
            conn.close()


def read_trace(s: Schema, path: Path, db: Path, span: TimeRange) -> Trace:
    """The :class:`Trace` of ``span`` of the export ``db`` (``path``: as the user named it),
    read through ``s``."""
    with progress(f"reading {path.name}"):
        # the calls and ranges in the span; the GPU work and records of the calls read (all
        # of them for the whole trace: then every table is read at once)
        first = {"api": lambda: tables.api_table(s, span),
                 "nvtx": lambda: tables.nvtx_table(s, span)}

        def of(calls: CallRows) -> dict[str, Callable[[], Any]]:
            return {"syncs": lambda: tables.syncs_table(s, calls),
                    "event_records": lambda: tables.event_records_table(s, calls),
                    "gpu": lambda: GpuWork(s, calls),
                    "collectives": lambda: tables.collectives_table(s, calls)}

        if span.whole:
            of_calls = EVERY_CALL
            got = s.at_once(of(of_calls) | first)  # the GPU tables, the longest, first
        else:
            got = s.at_once(first)
            api = got["api"]
            of_calls = span.of_calls(api["corr_id"].to_numpy(), api["proc"].to_numpy())
            got |= s.at_once(of(of_calls))
        api, gpu = got["api"], got["gpu"]
        api, repeats = checked_calls(api, path, tables.recorded_span(s))  # damage: refused,
        # or said
        has_launches = bool(api["name"].isin(LAUNCH_APIS).any())
        cuda_calls = -1
        if span.whole and not has_launches:
            cuda_calls = _refuse_if_damaged(s, path)  # before "no graph launches": a damaged
            # table's read can end early, with no error
        gpu_ops = own_process(gpu.eager_ops(), api)
        graph_work_table, graph_mode = graph_work(s, api, gpu, of_calls)
        syncs = own_process(got["syncs"], api)
        event_records = own_process(got["event_records"], api)
    capture = tables.capture_span(s, api)
    threads, processes, gpus = tables.threads_table(s), tables.processes_table(s), tables.gpus(s)
    meta = TraceMeta(
        path=str(path), nsys_version=s.nsys_version, schema_version=s.schema_version,
        gpus=gpus, graph_trace=graph_mode,
        has_sync_records="eventSyncId" in s.columns("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"),
        has_event_records="eventSyncId" in s.columns("CUPTI_ACTIVITY_KIND_CUDA_EVENT"),
        has_nvtx=s.has("NVTX_EVENTS"), diagnostics=tables.diagnostics(s),
        profiler=NSYS, has_graph_nodes=graph_mode == "node", can_window=True,
        time_range_ns=None if span.whole else (span.start_ns, span.end_ns),
        launches_span_ns=None if span.whole or has_launches else _launches_anywhere(s, path),
        capture_start_ns=capture[0], capture_end_ns=capture[1], cuda_calls=cuda_calls,
        session_start_ns=tables.session_start(s),
        reader_notes=backwards_note(backwards_rows((api, gpu_ops, got["nvtx"]))) + repeats +
        cut_names_note([got["nvtx"]["text"].cat.categories, threads["thread_name"],
                        processes["name"], got["collectives"]["name"], gpus,
                        s.export_meta.values()]))
    enums = dict(
        htod=s.enum_id("ENUM_CUDA_MEMCPY_OPER", "_HTOD", DEFAULT_ENUMS["htod"]),
        dtoh=s.enum_id("ENUM_CUDA_MEMCPY_OPER", "_DTOH", DEFAULT_ENUMS["dtoh"]),
        pageable=s.enum_id("ENUM_CUDA_MEM_KIND", "_PAGEABLE", DEFAULT_ENUMS["pageable"]))
    return Trace(meta=meta, api=api, graph_work=graph_work_table, gpu_ops=gpu_ops,
                 syncs=syncs, event_records=event_records, nvtx=got["nvtx"],
                 threads=threads, processes=processes,
                 collectives=got["collectives"], enums=enums, source=db)


def _refuse_if_damaged(s: Schema, path: Path) -> int:
    """Raise :class:`DamagedExport` where SQLite's own check finds the export damaged. A scan
    of a table whose b-tree is damaged (rowids out of order) can stop early with no error:
    75 of 23,190 CUDA calls read, and no graph launch among them. The check reads the whole
    file, so it runs only where a whole export shows no launch; so does the one for calls
    whose names are lost (:func:`_refuse_if_names_lost`). Returns the export's CUDA calls,
    every kind (:attr:`TraceMeta.cuda_calls`)."""
    problem = str(s.conn.execute("PRAGMA quick_check(1)").fetchone()[0])
    if problem != "ok":  # "*** in database main ***", then what is wrong, a line each
        first = next((line for line in problem.splitlines() if not line.startswith("***")),
                     problem)
        raise DamagedExport(f"{path}: corrupt export (SQLite's check: {clipped(first)})")
    return _refuse_if_names_lost(s, path)


def _launches_anywhere(s: Schema, path: Path) -> tuple[int, int] | None:
    """Where the export's graph launches lie (:func:`.tables.launches_span`), for a time
    range that holds none; where there are none anywhere, an export whose CUDA calls lost
    their names is refused first (:func:`_refuse_if_names_lost`)."""
    found = tables.launches_span(s)
    if found is None:
        _refuse_if_names_lost(s, path)
    return found


def _refuse_if_names_lost(s: Schema, path: Path) -> int:
    """Raise :class:`DamagedExport` where CUDA calls name strings that StringIds lacks: the
    loader finds each call by its name's id, so an emptied string table read as "0 CUDA
    calls" and "no CUDA graph launches" (exit 3) of an export that holds 24,393 of them. One
    scan of the calls, a primary-key look-up each: only where an export shows no launch.
    Returns the number of CUDA calls."""
    if not s.has("CUPTI_ACTIVITY_KIND_RUNTIME"):
        return 0
    total, lost = s.conn.execute(
        "SELECT count(*), count(*) - count(n.id) FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
        "LEFT JOIN StringIds n ON n.id = r.nameId").fetchone()
    if lost:
        raise DamagedExport(f"{path}: corrupt export: {lost} of {total} CUDA calls name a "
                            "string StringIds lacks (their names are lost); copy or export it "
                            "again")
    return int(total)
