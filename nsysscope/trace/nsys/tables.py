"""The host-side tables of a trace: CUDA API calls, sync and event records, NVTX ranges,
threads, processes, NCCL kernels, and what the export says about itself."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...util.text import name_text
from ..apis import LAUNCH_APIS, process_of, process_of_pid, wanted_api
from ..arrays import INT, frame, in_order, query
from ..names import name_categorical, sql_name
from ..time_range import EVERY_CALL, WHOLE, CallRows, TimeRange
from .schema import Schema, api_base_name


def api_table(s: Schema, span: TimeRange = WHOLE) -> pd.DataFrame:
    cols = ["start_ns", "end_ns", "tid", "corr_id"]
    if not s.has("CUPTI_ACTIVITY_KIND_RUNTIME"):
        return pd.DataFrame({c: pd.Series(dtype=INT) for c in cols + ["proc"]}
                            | {"status": pd.Series(dtype="int32"), "name": pd.Series(dtype=str)})
    wanted = wanted_api_ids(s)
    ids = ",".join(str(i) for i in wanted) or "NULL"
    has_ret = "returnValue" in s.columns("CUPTI_ACTIVITY_KIND_RUNTIME")
    ret = "IFNULL(returnValue, 0)" if has_ret else "0"
    start, end, tid, corr, name_id, status = s.read(
        'SELECT start, "end", IFNULL(globalTid, -1), IFNULL(correlationId, -1), nameId, '
        f"{ret} FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE nameId IN ({ids}){span.overlapping()}",
        "iiiiii", split="CUPTI_ACTIVITY_KIND_RUNTIME", within=span)
    start, end, tid, corr, name_id, status = in_order(
        [start, end, tid, corr, name_id, status], np.argsort(start, kind="stable"))
    categories = sorted(set(wanted.values()))
    code_of = {i: categories.index(n) for i, n in wanted.items()}
    ids_sorted = np.array(sorted(code_of), dtype=np.int64)
    codes = np.array([code_of[i] for i in ids_sorted], dtype=np.int64)
    name_codes = codes[np.searchsorted(ids_sorted, name_id)] if len(ids_sorted) else \
        np.zeros(0, dtype=np.int64)
    df = frame(cols, [start, end, tid, corr])
    df["proc"] = process_of(df["tid"])
    # the call's return code: a query that found its work unfinished returns
    # cudaErrorNotReady (600), which is how a polling loop's last try is told apart
    df["status"] = status.astype(np.int32)
    present = np.unique(name_codes)  # categories: the names present, sorted (as pd.Categorical)
    remap = np.full(len(categories), -1, dtype=np.int64)
    remap[present] = np.arange(len(present))
    df["name"] = pd.Categorical.from_codes(remap[name_codes],
                                           categories=[categories[i] for i in present])
    return df


def wanted_api_ids(s: Schema) -> dict[int, str]:
    """The string ids of the CUDA API calls nsysscope reads, and their base names: every such
    name in the string table (the names present in the calls are found later, from the rows
    read: asking SQLite for them first would scan the table twice)."""
    names = {i: api_base_name(v) for i, v in s.conn.execute(
        f"SELECT id, {sql_name('value')} FROM StringIds WHERE value LIKE 'cu%'")}
    return {i: n for i, n in names.items() if wanted_api(n)}


def syncs_table(s: Schema, of_calls: CallRows = EVERY_CALL) -> pd.DataFrame:
    """``of_calls``: the rows of the calls read (:meth:`TimeRange.of_calls`)."""
    cols = ["proc", "corr_id", "event_sync_id", "stream"]
    tcols = s.columns("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
    if not tcols:
        return pd.DataFrame({c: pd.Series(dtype=INT) for c in cols})
    esid = "IFNULL(eventSyncId, -1)" if "eventSyncId" in tcols else "-1"
    pid = "IFNULL(globalPid, -1)" if "globalPid" in tcols else "-1"
    df = frame(cols, s.read(f"SELECT {pid}, IFNULL(correlationId, -1), {esid}, streamId "
                            "FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION WHERE TRUE"
                            f"{of_calls.sql('globalPid' in tcols)}",
                            "iiii", split="CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                            within=of_calls))
    return df.assign(proc=process_of_pid(df["proc"]))


def event_records_table(s: Schema, of_calls: CallRows = EVERY_CALL) -> pd.DataFrame:
    cols = ["proc", "corr_id", "event_sync_id", "stream"]
    table = "CUPTI_ACTIVITY_KIND_CUDA_EVENT"
    if not s.has(table):
        return pd.DataFrame({c: pd.Series(dtype=INT) for c in cols})
    tcols = s.columns(table)
    has_pid = "globalPid" in tcols
    pid = "IFNULL(globalPid, -1)" if has_pid else "-1"
    esid = "IFNULL(eventSyncId, -1)" if "eventSyncId" in tcols else "-1"  # schema 2.x: none
    df = frame(cols, s.read(f"SELECT {pid}, IFNULL(correlationId, -1), "
                            f"{esid}, streamId FROM {table} "
                            f"WHERE TRUE{of_calls.sql(has_pid)}", "iiii", split=table,
                            within=of_calls))
    return df.assign(proc=process_of_pid(df["proc"]))


def nvtx_table(s: Schema, span: TimeRange = WHOLE) -> pd.DataFrame:
    cols = ["start_ns", "end_ns", "tid", "text"]
    if not s.has("NVTX_EVENTS"):
        return pd.DataFrame({c: pd.Series(dtype=INT) for c in cols[:-1]}
                            | {"text": pd.Series(dtype=str).astype("category")})
    types = s.enum("ENUM_NSYS_EVENT_TYPE")
    ranges = [types.get("NvtxPushPopRange", 59), types.get("NvtxStartEndRange", 60)]
    tcols = s.columns("NVTX_EVENTS")
    # a range's name is its own text, or else the interned string its textId names
    # (COALESCE(NULLIF(text, ''), StringIds.value, '')), put together after the read: SQL
    # that computes text copies it per row, at twice the cost of reading the table
    text = sql_name("n.text") if "text" in tcols else "NULL"
    text_id = "IFNULL(n.textId, -1)" if "textId" in tcols else "-1"
    sql = (f'SELECT n.start, n."end", IFNULL(n.globalTid, -1), n.rowid, {text}, {text_id} '
           f"FROM NVTX_EVENTS n WHERE n.eventType IN ({ranges[0]}, {ranges[1]}) "
           f'AND n."end" IS NOT NULL{span.overlapping("n.")}')
    start, end, tid, rowid, own, interned = s.read(sql, "iiiici", split="NVTX_EVENTS",
                                                   within=span)
    start, end, tid, names = in_order([start, end, tid, _range_names(s, own, interned)],
                                      np.lexsort((rowid, start)))  # ties in table order
    df = frame(cols[:-1], [start, end, tid])
    df["text"] = names
    return df


def _range_names(s: Schema, own: pd.Categorical, interned: np.ndarray) -> pd.Categorical:
    """Each range's name: its ``own`` text where it has one, else the string its textId
    (``interned``, -1: none) names, else ''; a categorical of the names present, sorted."""
    codes = np.asarray(own.codes, dtype=np.int64)
    names = list(own.categories)
    if "" in names:
        codes = np.where(codes == names.index(""), -1, codes)
    missing = codes < 0
    ids = np.unique(interned[missing & (interned >= 0)])
    found = dict(s.conn.execute(f"SELECT id, {sql_name('value')} FROM StringIds WHERE id IN "
                                f"({','.join(map(str, ids.tolist()))})")) if len(ids) else {}
    # the interned names, and '' for a range with neither, after the range's own names
    extra = [str(found.get(i, "")) for i in ids.tolist()] + [""]
    at = np.searchsorted(ids, interned[missing])
    known = (at < len(ids)) & (ids[np.minimum(at, max(len(ids) - 1, 0))] == interned[missing]) \
        if len(ids) else np.zeros(int(missing.sum()), dtype=bool)
    codes[missing] = len(names) + np.where(known, at, len(ids))
    return name_categorical(codes, names + extra)


def processes_table(s: Schema) -> pd.DataFrame:
    """``proc`` (the process key), ``pid`` and ``name`` of every process in the report."""
    if not {"globalPid", "pid"} <= s.columns("PROCESSES"):
        return pd.DataFrame({"proc": pd.Series(dtype=INT), "pid": pd.Series(dtype=INT),
                             "name": pd.Series(dtype=str)})
    name = f"COALESCE({sql_name('name')}, '')" if "name" in s.columns("PROCESSES") else "''"
    df = query(s, f"SELECT globalPid, pid, {name} FROM PROCESSES WHERE globalPid IS NOT NULL",
                ["proc", "pid", "name"], {"proc": INT, "pid": INT})
    df["proc"] = df["proc"].to_numpy() >> 24
    df["name"] = df["name"].map(name_text)
    return df.drop_duplicates("proc").reset_index(drop=True)


#: kernels of NCCL collectives, by name (ncclKernel_AllReduce_..., ncclDevKernel_...)
_COLLECTIVE_NAME = "nccl%"


def collectives_table(s: Schema, of_calls: CallRows = EVERY_CALL) -> pd.DataFrame:
    """Every NCCL kernel, in graphs or eager (of the calls read: ``of_calls``, as
    :func:`syncs_table`): ``proc, corr_id, start_ns, end_ns, stream, device, name``. Ranks of
    a tensor-parallel group meet in these kernels, so a rank whose host stalled makes its
    peers' kernels run long."""
    cols = ["proc", "corr_id", "start_ns", "end_ns", "stream", "device"]
    table = "CUPTI_ACTIVITY_KIND_KERNEL"
    tcols = s.columns(table)
    name_col = next((c for c in ("shortName", "demangledName") if c in tcols), None)
    empty = pd.DataFrame({c: pd.Series(dtype=INT) for c in cols} | {"name": pd.Series(dtype=str)})
    if name_col is None:
        return empty
    names = {i: name_text(v) for i, v in s.conn.execute(
        f"SELECT id, {sql_name('value')} FROM StringIds WHERE value LIKE '{_COLLECTIVE_NAME}'")}
    if not names:
        return empty
    pid = "IFNULL(globalPid, -1)" if "globalPid" in tcols else "-1"
    ids = ",".join(str(i) for i in names)
    proc, corr, start, end, stream, device, name_id = s.read(
        f'SELECT {pid}, IFNULL(correlationId, -1), start, "end", streamId, deviceId, '
        f"{name_col} FROM {table} WHERE {name_col} IN ({ids})"
        f"{of_calls.sql('globalPid' in tcols)}", "iiiiiii", split=table, within=of_calls)
    df = frame(cols, [process_of_pid(proc), corr, start, end, stream, device])
    df["name"] = pd.Categorical(pd.Series(name_id).map(names).to_numpy())
    return df.sort_values(["proc", "start_ns"], kind="stable").reset_index(drop=True)


def threads_table(s: Schema) -> pd.DataFrame:
    if not s.has("ThreadNames"):
        return pd.DataFrame({"tid": pd.Series(dtype=INT), "thread_name": pd.Series(dtype=str)})
    df = query(s, f"SELECT t.globalTid, COALESCE({sql_name('CAST(s.value AS TEXT)')}, '') "
                  "FROM ThreadNames t LEFT JOIN StringIds s ON s.id = t.nameId",
               ["tid", "thread_name"], {"tid": INT}).drop_duplicates("tid")
    return df.assign(thread_name=df["thread_name"].map(name_text))


def gpus(s: Schema) -> tuple[str, ...]:
    if "name" not in s.columns("TARGET_INFO_GPU"):
        return ()
    return tuple(dict.fromkeys(name_text(r[0]) for r in s.conn.execute(
        f"SELECT DISTINCT {sql_name('name')} FROM TARGET_INFO_GPU "
        "WHERE name IS NOT NULL AND name != ''")))


def diagnostics(s: Schema) -> tuple[str, ...]:
    """Warnings and errors nsys recorded about the capture itself (e.g. dropped events)."""
    if "text" not in s.columns("DIAGNOSTIC_EVENT"):
        return ()
    rows = s.conn.execute(f"SELECT DISTINCT {sql_name('text')} FROM DIAGNOSTIC_EVENT "
                          "WHERE severity >= 2 AND text IS NOT NULL")
    # a message's tabs and line breaks are spacing (nsys: "produced: \t99549")
    return tuple(dict.fromkeys(name_text(" ".join(str(r[0]).split())) for r in rows))


def launches_span(s: Schema) -> tuple[int, int] | None:
    """The first start and last end of the export's graph launch calls (a scan of the CUDA
    API table: only asked for when a time range holds no launch), or None."""
    ids = [i for i, name in wanted_api_ids(s).items() if name in LAUNCH_APIS]
    if not ids or not s.has("CUPTI_ACTIVITY_KIND_RUNTIME"):
        return None
    first, last = s.conn.execute(
        'SELECT MIN(start), MAX("end") FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE nameId IN '
        f"({','.join(map(str, ids))})").fetchone()
    return None if first is None else (int(first), int(last))


def session_start(s: Schema) -> int | None:
    """The wall-clock time of the timeline's zero (Unix epoch, ns): nsys's
    ``TARGET_INFO_SESSION_START_TIME.utcEpochNs`` (None in an export without it)."""
    if "utcEpochNs" not in s.columns("TARGET_INFO_SESSION_START_TIME"):
        return None
    row = s.conn.execute("SELECT MIN(utcEpochNs) FROM TARGET_INFO_SESSION_START_TIME").fetchone()
    return None if row[0] is None else int(row[0])


def recorded_span(s: Schema) -> tuple[int, int] | None:
    """The capture's start and stop (ns) as nsys recorded them, or None."""
    if {"startTime", "stopTime"} <= s.columns("ANALYSIS_DETAILS"):
        start, stop = s.conn.execute(
            "SELECT MIN(startTime), MAX(stopTime) FROM ANALYSIS_DETAILS").fetchone()
        if start is not None and stop is not None:
            return int(start), int(stop)
    return None


def capture_span(s: Schema, api: pd.DataFrame) -> tuple[int, int]:
    """The capture's start and stop (ns): nsys's own record of them, else the CUDA calls'."""
    recorded = recorded_span(s)
    if recorded is not None:
        return recorded
    if len(api):
        return int(api["start_ns"].min()), int(api["end_ns"].max())
    return 0, 0
