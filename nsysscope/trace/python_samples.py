"""Python stacks from nsys Python sampling (``--python-sampling=true``).

nsys stores each sample as an NVTX mark (event type ``NvtxMark``) of the domain it registers
as "Python Periodic Sampling" (an ``NvtxDomainCreate`` event whose text is that name; the
domain id is per process, so it is looked up, never assumed). With ``nsys export --type
sqlite --include-json true`` each mark carries a JSON payload::

    {"Python Periodic Sampling": {"Thread state": "Running",
                                  "Frames": [{"Function": 21, "File": 22, "Line": 123}, ...]}}

``Function`` and ``File`` are ``StringIds`` ids (HTML-escaped: ``&lt;module&gt;``) and the
innermost frame comes first. Without ``--include-json`` the marks are there but the payloads
are not: :attr:`PythonSamples.status` says which, and :attr:`PythonSamples.hint` how to fix it.

Everything is read with SQL and numpy; the only per-row Python is ``json.loads`` of the
payloads, and only of the samples inside the ``spans`` asked for (the host blocks).
"""

from __future__ import annotations

import html
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import pandas as pd

from ..util.text import name_text
from .names import sql_name
from .nsys.damage import damage_reported
from .nsys.schema import connect_readonly

DOMAIN = "Python Periodic Sampling"

#: how to get Python stacks into a trace
CAPTURE_HINT = ("capture with `nsys profile --python-sampling=true "
                "--python-sampling-frequency=2000 ...` and export with "
                "`nsys export --type sqlite --include-json true REPORT.nsys-rep`")
#: the trace has the samples, but the export dropped their payloads
REEXPORT_HINT = ("the report has Python samples but this export has no JSON payloads: re-export "
                 "it with `nsys export --type sqlite --include-json true REPORT.nsys-rep`")

OK, NOT_CAPTURED, NO_PAYLOAD = "ok", "not_captured", "no_payload"
#: a torch.profiler trace recorded without ``with_stack=True``: no python_function ranges
NO_STACKS = "no_stacks"
STACKS_HINT = ("profile with `torch.profiler.profile(activities=[CPU, CUDA], with_stack=True)` "
               "to record the Python functions around each CUDA call")

_SAMPLE_COLS = {"sample": "int64", "tid": "int64", "time_ns": "int64", "state": "object"}
_FRAME_COLS = {"sample": "int64", "depth": "int64", "file": "category", "line": "int64",
               "function": "category"}


def _empty(cols: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in cols.items()})


@dataclass(frozen=True)
class PythonSamples:
    """The Python samples of one trace (or of the spans that were asked for).

    ``samples``: one row per parsed sample: ``sample`` (id, the key into ``frames``), ``tid``
    (nsys ``globalTid``), ``time_ns``, ``state`` (the payload's thread state), sorted by
    ``tid`` then ``time_ns``. ``frames``: one row per frame: ``sample``, ``depth`` (0 =
    innermost), ``file``, ``line``, ``function`` (``file`` and ``function`` categorical).
    """

    status: str  # OK, NOT_CAPTURED or NO_PAYLOAD
    samples: pd.DataFrame
    frames: pd.DataFrame
    marks: int = 0  # sampling marks in the trace, parsed or not

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def hint(self) -> str | None:
        """What to do to get usable samples, or None when they are there."""
        return {NOT_CAPTURED: CAPTURE_HINT, NO_PAYLOAD: REEXPORT_HINT,
                NO_STACKS: STACKS_HINT}.get(self.status)

    def shifted(self, dt_ns: int | np.ndarray) -> PythonSamples:
        """The same samples with their timestamps moved by ``dt_ns`` (a scalar, or one value
        per row of ``samples``): for robustness checks."""
        t = self.samples["time_ns"].to_numpy() + np.asarray(dt_ns, dtype=np.int64)
        s = self.samples.assign(time_ns=t).sort_values(["tid", "time_ns"], kind="stable")
        return replace(self, samples=s.reset_index(drop=True))

    @classmethod
    def none(cls, status: str = NOT_CAPTURED) -> PythonSamples:
        return cls(status, _empty(_SAMPLE_COLS), _empty(_FRAME_COLS))


#: the spans to parse the samples of, or a function that makes them
Spans: TypeAlias = pd.DataFrame | Callable[[], pd.DataFrame]


def read_python_samples(db: str | Path, spans: Spans | None = None,
                        path: str | Path | None = None) -> PythonSamples:
    """The Python samples in the SQLite export ``db`` (of ``path``, as the user named it:
    what a damaged export's error names).

    ``spans`` (columns ``tid``, ``start_ns``, ``end_ns``, bounds included) limits parsing to
    the samples of those threads inside those spans; None parses every sample. It may be a
    function that makes them, called only where the export has samples to parse (the
    spans of every stall of a long trace take memory).
    """
    conn = connect_readonly(Path(db))
    try:
        return _read(conn, spans, db if path is None else path)
    finally:
        conn.close()


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


def _read(conn: sqlite3.Connection, spans: Spans | None, path: str | Path) -> PythonSamples:
    """The samples (:func:`read_python_samples`): a damaged export ``path`` met by the reads
    is reported as such (only by them: an error in making ``spans`` is the program's)."""
    with damage_reported(path):
        marks = _marks(conn)
    if isinstance(marks, PythonSamples):  # nothing to parse
        return marks
    arr, payload = marks
    rowid, tid, t, with_json = arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3].astype(bool)
    if callable(spans):
        spans = spans()
    keep = with_json & (inside(tid, t, spans) if spans is not None else True)
    rowid, tid, t = rowid[keep], tid[keep], t[keep]
    with damage_reported(path):
        texts = _payloads(conn, payload, rowid)
        samples, frames = _parse(texts, tid, t, _strings(conn))
    return PythonSamples(OK, samples, frames, marks=len(arr))


def _marks(conn: sqlite3.Connection) -> PythonSamples | tuple[np.ndarray, list[str]]:
    """The export's sample marks (``rowid, globalTid, start, has a payload``, one row each)
    and the SQL of their payload; or the samples, where there are none to parse."""
    cols = _columns(conn, "NVTX_EVENTS")
    if not {"eventType", "domainId", "globalTid", "start"} <= cols:
        return PythonSamples.none()
    types = dict(conn.execute("SELECT name, id FROM ENUM_NSYS_EVENT_TYPE").fetchall()) \
        if _columns(conn, "ENUM_NSYS_EVENT_TYPE") >= {"name", "id"} else {}
    mark, create = types.get("NvtxMark", 34), types.get("NvtxDomainCreate", 75)
    strings = bool(_columns(conn, "StringIds") >= {"id", "value"})
    name = []
    if "text" in cols:
        name.append("d.text")
    if "textId" in cols and strings:
        name.append("(SELECT value FROM StringIds WHERE id = d.textId)")
    if not name:
        return PythonSamples.none()
    # the domain id is per process: match (process, domain) pairs, the pid being globalTid >> 24
    domains = (f"SELECT DISTINCT d.domainId AS dom, d.globalTid >> 24 AS proc FROM NVTX_EVENTS d "
               f"WHERE d.eventType = {create} AND COALESCE({', '.join(name)}, '') = ?")
    payload = []
    if "jsonText" in cols:
        payload.append("n.jsonText")
    if "jsonTextId" in cols and strings:
        payload.append("(SELECT value FROM StringIds WHERE id = n.jsonTextId)")
    has_json = "(" + " OR ".join(f"{c} IS NOT NULL" for c in ("n.jsonText", "n.jsonTextId")
                                 if c[2:] in cols) + ")" if payload else "0"
    if not strings:  # frames name their file and function by StringIds id
        payload, has_json = [], "0"
    base = (f"FROM NVTX_EVENTS n JOIN ({domains}) d ON n.domainId = d.dom "
            f"AND (n.globalTid >> 24) = d.proc WHERE n.eventType = {mark} "
            "AND n.globalTid IS NOT NULL AND n.start IS NOT NULL")
    head = conn.execute(f"SELECT n.rowid, n.globalTid, n.start, {has_json} {base}",
                        (DOMAIN,)).fetchall()
    if not head:
        return PythonSamples.none()
    arr = np.array(head, dtype=np.int64)
    if not arr[:, 3].any():
        return replace(PythonSamples.none(NO_PAYLOAD), marks=len(arr))
    return arr, payload


def _payloads(conn: sqlite3.Connection, payload: list[str], rowid: np.ndarray) -> list[str | None]:
    """The JSON text of the marks ``rowid``, in that order."""
    expr = f"COALESCE({', '.join(payload)})" if len(payload) > 1 else payload[0]
    out: dict[int, str] = {}
    ids = rowid.tolist()
    for i in range(0, len(ids), 900):
        part = ids[i:i + 900]
        out.update(conn.execute(f"SELECT n.rowid, {expr} FROM NVTX_EVENTS n WHERE n.rowid IN "
                                f"({','.join('?' * len(part))})", part).fetchall())
    return [out.get(r) for r in ids]


#: ``StringIds`` values of an array of ids, as a Categorical
Strings = Callable[[np.ndarray], pd.Categorical]


def _strings(conn: sqlite3.Connection) -> Strings:
    """``resolve(ids)``: a Categorical of the (unescaped) ``StringIds`` values of ``ids``, as
    names are kept (:mod:`.names`)."""
    def resolve(ids: np.ndarray) -> pd.Categorical:
        uniq, inverse = np.unique(ids, return_inverse=True)
        values: dict[int, str] = {}
        ids_list = [int(i) for i in uniq]
        for i in range(0, len(ids_list), 900):
            part = ids_list[i:i + 900]
            values.update((k, name_text(html.unescape(v or ""))) for k, v in conn.execute(
                f"SELECT id, {sql_name('value', escaped=True)} FROM StringIds WHERE id IN "
                f"({','.join('?' * len(part))})", part))
        code, names = pd.factorize(pd.Series([values.get(i, "") for i in ids_list], dtype=object))
        return pd.Categorical.from_codes(code[np.asarray(inverse).reshape(-1)] if len(ids) else
                                         np.zeros(0, dtype=np.int64),
                                         categories=pd.Index(names, dtype=object))
    return resolve


def _parse(texts: list[str | None], tid: np.ndarray, t: np.ndarray,
           strings: Strings) -> tuple[pd.DataFrame, pd.DataFrame]:
    states: list[str | None] = []
    sample_ids: list[int] = []
    fn: list[int] = []
    fl: list[int] = []
    ln: list[int] = []
    depth: list[int] = []
    for i, text in enumerate(texts):
        body = _body(text)
        states.append(body.get("Thread state"))
        frames = _frames(body)
        n = len(frames)
        sample_ids.extend([i] * n)
        depth.extend(range(n))
        for f_id, file_id, line in frames:
            fn.append(f_id)
            fl.append(file_id)
            ln.append(line)
    samples = pd.DataFrame({"sample": np.arange(len(texts), dtype=np.int64),
                            "tid": tid.astype(np.int64), "time_ns": t.astype(np.int64),
                            "state": pd.Series(states, dtype=object)})
    samples = samples.sort_values(["tid", "time_ns"], kind="stable").reset_index(drop=True)
    frames = pd.DataFrame({
        "sample": np.asarray(sample_ids, dtype=np.int64),
        "depth": np.asarray(depth, dtype=np.int64),
        "file": strings(np.asarray(fl, dtype=np.int64)), "line": np.asarray(ln, dtype=np.int64),
        "function": strings(np.asarray(fn, dtype=np.int64))})
    return samples, frames


def _frames(body: dict[str, Any]) -> list[tuple[int, int, int]]:
    """The sample's frames as (function id, file id, line), innermost first; none when one of
    them is not what nsys writes (a damaged payload: the sample then names no line)."""
    frames = body.get("Frames") or []
    out = []
    try:
        for f in frames:
            values = (f.get("Function", -1), f.get("File", -1), f.get("Line", -1))
            if not all(type(v) is int and -1 <= v < 1 << 63 for v in values):
                return []
            out.append(values)
    except (AttributeError, TypeError):  # a frame that is no object, frames that are no list
        return []
    return out


def _body(text: str | None) -> dict[str, Any]:
    """The sample's payload, or {} when it is missing or not what nsys writes."""
    if not text:
        return {}
    try:
        body = json.loads(text).get(DOMAIN)
    except (ValueError, AttributeError):
        return {}
    return body if isinstance(body, dict) else {}


def inside(tid: np.ndarray, t: np.ndarray, spans: pd.DataFrame) -> np.ndarray:
    """Whether each (thread, time) lies in one of ``spans`` (``tid``, ``start_ns``,
    ``end_ns``; bounds included; spans may overlap)."""
    out = np.zeros(len(t), dtype=bool)
    if spans is None or spans.empty or not len(t):
        return out
    for w_tid, w in spans.groupby("tid"):
        q = np.flatnonzero(tid == w_tid)
        if not len(q):
            continue
        w = w.sort_values("start_ns", kind="stable")
        starts = w["start_ns"].to_numpy(dtype=np.float64)
        reach = np.maximum.accumulate(w["end_ns"].to_numpy(dtype=np.float64))
        i = np.searchsorted(starts, t[q], side="right") - 1
        out[q] = (i >= 0) & (reach[np.maximum(i, 0)] >= t[q])
    return out
