"""Writing the Chrome trace event format (JSON Object Format) as a stream, for Perfetto.

Events go to the file as they are made, one per line, gzip-compressed when the name ends with
``.gz``: a trace of 10^5 launches never holds its whole JSON in memory. Times are written in
microseconds with exactly three decimals (the nanosecond, as nsys records it).

Perfetto draws the slices of one track (one ``pid``/``tid``) as a strict hierarchy: a slice
that starts inside another must end inside it. :func:`lanes` spreads slices that would
overlap otherwise (NVTX start/end ranges, concurrent kernels, consecutive overlap windows) over
extra tracks of the same thread.
"""

from __future__ import annotations

import gzip
import io
import json
import lzma
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from ..util.atomic import atomic_file


def ts(ns: int | float) -> str:
    """Nanoseconds as the format's microseconds, exact: ``5204220333`` -> ``5204220.333``."""
    n = int(ns)
    sign, n = ("-", -n) if n < 0 else ("", n)
    return f"{sign}{n // 1000}.{n % 1000:03d}"


class EventWriter:
    """``write(event)`` one event at a time; ``ts``/``dur`` given in ns as ``ts_ns``/``dur_ns``."""

    def __init__(self, out: TextIO) -> None:
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

    def meta(self, pid: int, tid: int | None, name: str, value: Any) -> None:
        """A metadata event: ``process_name``, ``thread_name``, ``*_sort_index``..."""
        arg = {"sort_index": value} if name.endswith("sort_index") else {"name": value}
        ev: dict[str, Any] = {"ph": "M", "name": name, "pid": pid, "args": arg}
        if tid is not None:
            ev["tid"] = tid
        self.write(ev)


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
        binary = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) if low.endswith(".gz") else \
            lzma.LZMAFile(raw, "wb") if low.endswith(".xz") else raw  # noqa: SIM115 - closed below
        out = io.TextIOWrapper(binary, encoding="utf-8", newline="\n")
        # "source" first: the head that tells nsysscope's timelines from traces
        # (nsysscope.trace.formats.TIMELINE_MARK)
        out.write('{"displayTimeUnit":"ns","otherData":'
                  + json.dumps({"source": "nsysscope", **other}, separators=(",", ":"))
                  + ',"traceEvents":[')
        writer = EventWriter(out)
        yield writer
        out.write("\n]}\n")
        out.flush()
        out.detach()
        if binary is not raw:
            binary.close()


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


def lanes(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """:class:`Lanes` over arrays already sorted by start (ties: longest first)."""
    lane = Lanes()
    return np.fromiter((lane.add(int(s), int(e)) for s, e in zip(start, end, strict=True)),
                       dtype=np.int64, count=len(start))
