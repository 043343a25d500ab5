"""Writing the Chrome trace event format (JSON Object Format) as a stream, for Perfetto.

Events go to the file as they are made, one per line, gzip-compressed when the name ends with
``.gz``: a trace of 10^5 launches never holds its whole JSON in memory. Times are written in
microseconds with exactly three decimals (the nanosecond, as nsys records it).

The slices of a table of events (every CUDA call, NVTX range, GPU op) are written a block of
rows at a time (:meth:`EventWriter.write_slices`): DuckDB, which the loader reads with already,
formats each block's lines in C++, and every distinct text is made JSON once. One
``json.dumps`` per event took ~30 s of the light 10^5 replica's 3.3 M events
(bench/README.md, "Perfetto timelines").

Perfetto draws the slices of one track (one ``pid``/``tid``) as a strict hierarchy: a slice
that starts inside another must end inside it. :func:`lanes` spreads slices that would
overlap otherwise (NVTX start/end ranges, concurrent kernels, consecutive overlap windows) over
extra tracks of the same thread.
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import lzma
import os
import queue
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeAlias

import numpy as np
import pandas as pd

from ..trace.columnar import interrupted
from ..util.atomic import atomic_file

if TYPE_CHECKING:
    import duckdb

#: a column of :meth:`EventWriter.write_events`: integers, or JSON texts (:func:`json_texts`)
Column: TypeAlias = np.ndarray | pd.Categorical

#: distinct texts up to which :func:`json_texts` makes a categorical
FEW_TEXTS = 4096

#: rows of a table of events formatted at a time (:meth:`EventWriter.write_events`): 4-10 MB
#: of text (100,000 rows took 0.1 GB more memory for the same time)
BLOCK = 25_000

#: zlib's own default: level 9 took 2x the time (7.6 of the light 10^5 replica's 15 s) for
#: a file 8 % smaller
GZIP_LEVEL = 6

#: nanoseconds as the format's microseconds (:func:`ts`), in DuckDB's SQL
_SQL_TS = ("CASE WHEN {c} < 0 THEN '-' ELSE '' END || (abs({c}) // 1000)::VARCHAR || '.' || "
           "lpad((abs({c}) % 1000)::VARCHAR, 3, '0')")


def ts(ns: int | float) -> str:
    """Nanoseconds as the format's microseconds, exact: ``5204220333`` -> ``5204220.333``."""
    n = int(ns)
    sign, n = ("-", -n) if n < 0 else ("", n)
    return f"{sign}{n // 1000}.{n % 1000:03d}"


class EventWriter:
    """``write(event)`` one event at a time; ``ts``/``dur`` given in ns as ``ts_ns``/``dur_ns``."""

    def __init__(self, out: io.TextIOBase) -> None:
        self.out, self.count = out, 0

    def write(self, event: dict[str, Any]) -> None:
        ts_ns = event.pop("ts_ns", None)
        dur_ns = event.pop("dur_ns", None)
        body = json.dumps(event, separators=(",", ":"), ensure_ascii=False, default=_plain)
        extra = ""
        if ts_ns is not None:
            extra += f',"ts":{ts(ts_ns)}'
        if dur_ns is not None:
            extra += f',"dur":{ts(max(0, dur_ns))}'
        self.out.write(("\n" if self.count == 0 else ",\n") + body[:-1] + extra + "}")
        self.count += 1

    def write_slices(self, cat: str, name: Column, pid: np.ndarray, tid: np.ndarray,
                     start_ns: np.ndarray, end_ns: np.ndarray,
                     args: Mapping[str, Column] | None = None) -> None:
        """One complete (``"X"``) event per row of a track's slices: ``name`` holds JSON texts
        (:func:`json_texts`), ``args`` the fields of each slice's ``args``."""
        self.write_events({"ph": "X", "cat": cat}, {"name": name, "pid": pid, "tid": tid},
                          start_ns, end_ns - start_ns, args)

    def write_events(self, fixed: Mapping[str, Any], columns: Mapping[str, Column],
                     ts_ns: np.ndarray, dur_ns: np.ndarray | None = None,
                     args: Mapping[str, Column] | None = None) -> None:
        """One event per row, as :meth:`write` writes it: the ``fixed`` fields, the
        ``columns`` (integers, or JSON texts: :func:`json_texts`), ``args`` (an object of
        such columns), then ``ts`` and ``dur`` (never below 0). Formatted by DuckDB a
        :data:`BLOCK` of rows at a time."""
        data: dict[str, Column] = {"t": np.asarray(ts_ns, dtype=np.int64)}
        if dur_ns is not None:
            data["d"] = np.maximum(np.asarray(dur_ns, dtype=np.int64), 0)

        def fields(named: Mapping[str, Column]) -> str:
            out = []
            for key, values in named.items():
                column = f"c{len(data)}"
                data[column] = values
                integer = pd.api.types.is_integer_dtype(values)
                out.append(f"{_literal(json.dumps(key))}:{'%d' if integer else '%s'}")
            return ",".join(out)

        head = _literal(json.dumps(dict(fixed), separators=(",", ":"), ensure_ascii=False)[:-1])
        template = head + "," + fields(columns) + (
            ',"args":{' + fields(args) + "}" if args else "") + ',"ts":%s' + (
            ',"dur":%s' if dur_ns is not None else "") + "}"
        values = [c for c in data if c.startswith("c")] + [_SQL_TS.format(c="t")] + (
            [_SQL_TS.format(c="d")] if dur_ns is not None else [])
        query = f"SELECT printf($template, {', '.join(values)}) AS line FROM block"
        con = _duckdb()
        try:
            for lo in range(0, len(data["t"]), BLOCK):
                con.register("block", pd.DataFrame({k: v[lo:lo + BLOCK] for k, v in data.items()}))
                lines = con.execute(query, {"template": template}).fetchnumpy()["line"]
                self.write_lines(lines.tolist())
        except Exception as e:
            if interrupted(e):  # DuckDB's word for Ctrl-C: an error of its own
                raise KeyboardInterrupt from None
            raise
        finally:
            con.unregister("block")

    def write_lines(self, lines: list[str]) -> None:
        """Events already formatted, one per line."""
        if lines:
            self.out.write(("\n" if self.count == 0 else ",\n") + ",\n".join(lines))
            self.count += len(lines)

    def meta(self, pid: int, tid: int | None, name: str, value: Any) -> None:
        """A metadata event: ``process_name``, ``thread_name``, ``*_sort_index``..."""
        arg = {"sort_index": value} if name.endswith("sort_index") else {"name": value}
        ev: dict[str, Any] = {"ph": "M", "name": name, "pid": pid, "args": arg}
        if tid is not None:
            ev["tid"] = tid
        self.write(ev)


def json_texts(values: pd.Series | np.ndarray | list[Any]) -> Column:
    """Each value as a JSON text (``null`` where missing), made once per distinct value: for
    the names and texts of :meth:`EventWriter.write_slices`. Categorical where the distinct
    texts are few: DuckDB formats such a column 3-4x faster than one of Python strings, but
    makes an enum of all its categories for every block (10^5 NVTX step names: 10 -> 14 s)."""
    codes, distinct = pd.factorize(pd.Series(values))
    texts = [json.dumps(str(v), ensure_ascii=False) for v in distinct] + ["null"]
    if len(texts) > FEW_TEXTS:
        out: np.ndarray = np.array(texts, dtype=object)[codes]
        return out
    return pd.Categorical.from_codes(np.where(codes < 0, len(distinct), codes),
                                     categories=pd.Index(texts, dtype=object))


def _literal(text: str) -> str:
    """``text`` as it stands in a ``printf`` format."""
    return text.replace("%", "%%")


@functools.cache
def _duckdb() -> duckdb.DuckDBPyConnection:
    import duckdb

    return duckdb.connect()


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    return str(v)


@contextmanager
def open_trace(path: str | os.PathLike[str], other: dict[str, Any]) -> Iterator[EventWriter]:
    """An :class:`EventWriter` on ``path`` (gzip or xz when it ends in ``.gz`` or ``.xz``),
    written whole or not at all (:func:`nsysscope.util.atomic.atomic_file`); ``other`` goes in
    ``otherData``, after ``"source": "nsysscope"``."""
    path = Path(path)
    with atomic_file(path) as raw:
        low = path.name.lower()
        binary = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=GZIP_LEVEL) \
            if low.endswith(".gz") else \
            lzma.LZMAFile(raw, "wb") if low.endswith(".xz") else raw  # noqa: SIM115 - closed below
        out = _Behind(binary)
        try:
            # "source" first: the head that tells nsysscope's timelines from traces
            # (nsysscope.trace.formats.TIMELINE_MARK)
            out.write('{"displayTimeUnit":"ns","otherData":'
                      + json.dumps({"source": "nsysscope", **other}, separators=(",", ":"))
                      + ',"traceEvents":[')
            writer = EventWriter(out)
            yield writer
            out.write("\n]}\n")
        finally:
            out.close()
        if binary is not raw:
            binary.close()


class _Behind(io.TextIOBase):
    """Text written here is encoded, compressed and written to ``binary`` on a thread of its
    own: zlib and lzma let go of the GIL while they compress, so the next block of events is
    formatted meanwhile (the light 10^5 replica's timeline: 10.4 -> 7.4 s). A few writes wait
    at most, so memory stays bounded. An error of the writing (a full disk) is raised by the
    next write, or by :meth:`close`."""

    def __init__(self, binary: io.BufferedIOBase | IO[bytes]) -> None:
        super().__init__()
        self._binary, self._queue = binary, queue.Queue[bytes | None](maxsize=4)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._drain, name="nsysscope-writer",
                                        daemon=True)
        self._thread.start()

    def write(self, text: str) -> int:
        self._put(text.encode("utf-8"))
        return len(text)

    def close(self) -> None:
        """Wait for what was written to be written; raise its error, if any (once: a second
        close, or the one at garbage collection, says nothing)."""
        if self.closed:
            return
        self._queue.put(None)  # taken even after an error: the thread drains to the end
        self._thread.join()
        super().close()
        if self._error is not None:
            raise self._error

    def _put(self, item: bytes | None) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(item)

    def _drain(self) -> None:
        while (data := self._queue.get()) is not None:
            if self._error is None:  # after an error, take what comes without writing it
                try:
                    self._binary.write(data)
                except BaseException as e:  # noqa: BLE001 - raised in the writing thread
                    self._error = e


class Lanes:
    """Online lane assignment for the slices of one track, given in order of start (ties:
    longest first): each goes to the first lane where it nests strictly (it ends before the
    next slice on that lane starts, or inside the slice it starts in)."""

    def __init__(self) -> None:
        self.stacks: list[list[int]] = []  # per lane: ends of the open slices, innermost last

    def add(self, start: int, end: int) -> int:
        for lane, stack in enumerate(self.stacks):
            while stack and stack[-1] <= start:
                stack.pop()
            if not stack or end <= stack[-1]:
                stack.append(end)
                return lane
        self.stacks.append([end])
        return len(self.stacks) - 1


def lanes(start: np.ndarray, end: np.ndarray, track: Lanes | None = None) -> np.ndarray:
    """:class:`Lanes` over arrays already sorted by start (ties: longest first): of a new
    track, or of ``track`` (its slices so far; left as these slices leave it, as for a track
    read a block at a time).

    Only the runs of slices that need it are walked (:func:`_to_walk`): where no slice is
    open at a start the walk begins afresh, and in a run where every slice nests in the
    slices open at its start (or none is open) every slice takes lane 0. One crossing pair
    among a stream's million kernels (clock skew: some in every H200 sample) walks that pair's
    run, not the stream."""
    track = Lanes() if track is None else track
    if len(start) == 0:
        return np.zeros(0, dtype=np.int64)
    s, e = np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
    first = int(s[0])
    for stack in track.stacks:  # what add(first) would pop: ended by then
        while stack and stack[-1] <= first:
            stack.pop()
    # a slice carried over from the last block and still open (a stack's first: its outermost)
    carried = max((stack[0] for stack in track.stacks if stack), default=None)
    walk = _to_walk(s, e, carried)
    out = np.zeros(len(s), dtype=np.int64)
    at = np.flatnonzero(walk)
    out[at] = np.fromiter((track.add(int(a), int(b)) for a, b in zip(s[at], e[at], strict=True)),
                          dtype=np.int64, count=len(at))
    if not walk[-1]:
        # the last run nests, and every earlier slice has ended by its first start: what is
        # open at the last start is a stack, innermost last
        track.stacks = [e[e > s[-1]].tolist()]
    return out


def _to_walk(s: np.ndarray, e: np.ndarray, carried: int | None) -> np.ndarray:
    """Which slices :func:`lanes` walks: every slice of a run (slices from one start at which
    nothing is open, ``carried`` the latest end of a slice open from an earlier block, to the
    next) in which a slice crosses another, and the run a carried slice is open in; all of
    them where the slices are not in :class:`Lanes`' order or one ends before it starts."""
    n = len(s)
    step, tie = np.diff(s), np.diff(e)
    if (step < 0).any() or ((step == 0) & (tie > 0)).any() or (e < s).any():
        return np.ones(n, dtype=bool)  # not in Lanes' order, or a slice ending before it starts
    reach = np.maximum.accumulate(e)
    if carried is not None:
        reach = np.maximum(reach, carried)
    run = np.cumsum(np.r_[False, reach[:-1] <= s[1:]])  # each slice's run: 0, 1, ...
    bad = np.zeros(int(run[-1]) + 1, dtype=bool)
    bad[run[_crossing(s, e)]] = True
    bad[0] |= carried is not None
    walk: np.ndarray = bad[run]
    return walk


def _crossing(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Which slices (in :class:`Lanes`' order, none ending before it starts) start inside an
    earlier one and end after it: where none of a run does, :class:`Lanes` puts every slice
    of the run in lane 0.

    By induction over the slices in order: while none crosses, the slices open at a start
    ``s`` (ending after it) nest, and the innermost is the last one that started at the
    depth below, the depth being how many slices are open. So it is enough that each slice
    ends within that one (a slice whose parent is found in an earlier run is counted as
    crossing: its run is walked, which is never wrong)."""
    n = len(s)
    i = np.arange(n)
    # slices ending at or before s[i]: those before i, and zero-length ones at s[i] from i on
    # (a zero-length slice sorts last among those starting with it)
    zero = np.r_[0, np.cumsum(e <= s)]
    group_end = np.searchsorted(s, s, side="right")
    ended_before = np.searchsorted(np.sort(e), s, side="right") - (zero[group_end] - zero[i])
    depth = i - ended_before  # slices before i still open at its start
    inner = depth > 0
    crossing = np.zeros(n, dtype=bool)
    if not inner.any():
        return crossing
    keys = np.sort(depth * n + i)
    at = np.searchsorted(keys, (depth[inner] - 1) * n + i[inner]) - 1
    parent_key = keys[np.maximum(at, 0)]
    parent = parent_key % n
    found = (at >= 0) & (parent_key // n == depth[inner] - 1)
    crossing[inner] = ~(found & (e[parent] > s[inner]) & (e[inner] <= e[parent]))
    return crossing
