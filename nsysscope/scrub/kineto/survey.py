"""What a Kineto trace says about itself: its working directory, host and user names, and
(for ``slim``) which python_function events enclose the CUDA calls the analysis uses; and the
string cleaner those make."""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...trace.apis import wanted_api
from ...trace.kineto import JsonStream, enclosing_stacks, open_text
from ...trace.nsys.schema import api_base_name
from ..names import (
    HOST_PLACEHOLDER,
    USER_PLACEHOLDER,
    generic,
    host_names,
    program_word_pattern,
    word_pattern,
)
from ..paths import KEEP_PATH_PREFIXES, home_names, is_leaky_path, rewrite_path, sub_paths
from ..policy import NotAnExport, ScrubError
from ..secrets import redact_secrets

_LIBRARY = re.compile(r"/(?:site|dist)-packages/|/lib(?:64)?/(?:python|pypy)\d")
#: the file name torch.profiler.tensorboard_trace_handler gives: {host}_{pid}.{time}.pt.trace
_WORKER = re.compile(r"^(?P<host>.+)_(?P<pid>\d+)\.\d+\.pt\.trace\.json")
_PY_FILE = re.compile(r"^(/.*\.py)\(\d+\): ")


@dataclass
class Survey:
    working_dir: str | None = None
    hosts: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    # for slim: every python_function in file order, and the CUDA calls that matter
    py: list[list[float]] = field(default_factory=lambda: [[], [], []])
    calls: list[list[float]] = field(default_factory=lambda: [[], [], []])
    py_files: set[str] = field(default_factory=set)
    events: int = 0


def _gtid(e: dict[str, Any]) -> int:
    pid, tid = e.get("pid"), e.get("tid")
    try:
        return (int(pid) << 24) | (int(tid) & 0xFFFFFF)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return -1


def _times(e: dict[str, Any]) -> tuple[float, float]:
    try:
        return float(e["ts"]), float(e.get("dur") or 0.0)
    except (KeyError, TypeError, ValueError):
        return float("nan"), float("nan")


def stream_events(path: Path, on_field, on_event) -> None:  # type: ignore[no-untyped-def]
    """One pass: ``on_field(key, value)`` for top-level fields, ``on_event(e)`` per event
    (``on_field("traceEvents", None)`` where the events array starts)."""
    try:
        with open_text(path) as f:
            s = JsonStream(f, path)
            first = s.top()
            if first == "[":
                on_field("traceEvents", None)
                s.events(on_event)
            elif first == "{":
                events = False
                for key in s.fields():
                    if key == "traceEvents" and s.is_array():
                        events = True
                        on_field(key, None)
                        s.events(on_event)
                    else:
                        on_field(key, s.value())
                if not events:  # as report says of it (exit 5), not a trace written back
                    raise NotAnExport(f"{path}: JSON, but not a torch.profiler trace: no "
                                      "traceEvents array")
            else:
                raise ScrubError(f"{path}: not a torch.profiler JSON trace")
    except OSError as e:
        raise ScrubError(f"{path}: cannot read: {e.strerror or e}") from None


def survey_trace(src: Path, slim: bool) -> Survey:
    """Pass 1: the working directory, host and user names, and (slim) what to keep."""
    ctx = Survey()
    trace_names: list[str] = []
    named_hosts: set[str] = set()
    homes: Counter[str] = Counter()
    wanted: dict[str, bool] = {}

    def on_field(key: str, value: Any) -> None:
        if key == "traceName" and isinstance(value, str):
            trace_names.append(value)
        if key.lower().replace("_", "") == "hostname" and isinstance(value, str) and \
                not generic(value):
            named_hosts.add(value.strip())
        for text in strings_in(value):
            homes.update(home_names(text))

    def on_event(e: Any) -> None:
        ctx.events += 1
        if type(e) is not dict:
            return
        cat = e.get("cat")
        name = e.get("name")
        if cat == "python_function":
            if isinstance(name, str):
                m = _PY_FILE.match(name)
                if m:
                    ctx.py_files.add(m.group(1))
            if slim:
                ts, dur = _times(e)
                ctx.py[0].append(ts)
                ctx.py[1].append(ts + dur)
                ctx.py[2].append(_gtid(e))
        elif slim and cat in ("cuda_runtime", "cuda_driver", "runtime", "driver") \
                and isinstance(name, str):
            w = wanted.get(name)
            if w is None:
                w = wanted[name] = wanted_api(api_base_name(name))
            if w:
                ts, dur = _times(e)
                ctx.calls[0].append(ts)
                ctx.calls[1].append(ts + dur)
                ctx.calls[2].append(_gtid(e))
        if isinstance(name, str) and "/" in name:
            homes.update(home_names(name))
        args = e.get("args")
        if type(args) is dict and cat == "Trace":
            for text in strings_in(args):
                homes.update(home_names(text))
        elif type(args) is dict:  # a range's text argument may name a home folder
            # (``~carol/ckpts``: no absolute path, which the scrub rewrites anyway); its
            # top level only (nested values are shapes and types): a walk of every value
            # of every event made the survey 1.5x as long
            for v in args.values():
                if type(v) is str and ("/" in v or "\\" in v):
                    homes.update(home_names(v))

    stream_events(src, on_field, on_event)
    ctx.working_dir = _working_dir(ctx.py_files)
    hosts = set(named_hosts)
    for name in trace_names:
        m = _WORKER.match(os.path.basename(name))
        if m and not generic(m.group("host")):
            hosts.add(m.group("host"))
    # a fully qualified name's short name and domain too; the longest first, so that each
    # is replaced whole before a part of it
    ctx.hosts = tuple(sorted({n for h in hosts for n in host_names(h)
                              if not generic(n) and len(n) >= 2}, key=lambda n: (-len(n), n)))
    ctx.users = tuple(sorted(u for u in homes if not generic(u) and len(u) >= 2))
    return ctx


def _working_dir(files: set[str]) -> str | None:
    """The program's working directory, from the absolute ``.py`` files of its stacks."""
    own = sorted(f for f in files
                 if not _LIBRARY.search(f) and not f.startswith(KEEP_PATH_PREFIXES))
    if not own:
        return None
    common = os.path.dirname(os.path.commonpath(own)) if len(own) == 1 else os.path.commonpath(own)
    while common not in ("", "/") and (f"{common}/__init__.py" in files
                                       or f"{common}/__main__.py" in files):
        common = os.path.dirname(common)  # a package (``python -m PKG`` runs its __main__)
    return common if common.count("/") >= 1 and common != "/" else None


def strings_in(value: Any):  # type: ignore[no-untyped-def]
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings_in(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings_in(v)


def keep_mask(ctx: Survey) -> np.ndarray:
    """Which python_function events (in file order) enclose a CUDA call the analysis uses,
    or are ancestors of one that does."""
    py = [np.asarray(c, dtype=np.float64) for c in ctx.py]
    keep = np.zeros(len(py[0]), dtype=bool)
    if not len(keep) or not ctx.calls[0]:
        return keep
    # integer nanoseconds, as the reader computes them (same rounding, same midpoints)
    origin = float(np.floor(np.nanmin(py[0])))
    start = np.rint((np.nan_to_num(py[0], nan=-1e18) - origin) * 1e3).astype(np.int64)
    dur = np.maximum(np.nan_to_num(py[1] - py[0], nan=0.0), 0)
    end = start + np.rint(dur * 1e3).astype(np.int64)
    c0 = np.asarray(ctx.calls[0], dtype=np.float64)
    c1 = np.asarray(ctx.calls[1], dtype=np.float64)
    cs = np.rint((c0 - origin) * 1e3).astype(np.int64)
    ce = cs + np.rint(np.maximum(c1 - c0, 0) * 1e3).astype(np.int64)
    times = cs + (ce - cs) // 2
    gtid = np.asarray(ctx.py[2], dtype=np.int64)
    tids = np.asarray(ctx.calls[2], dtype=np.int64)
    for stack in enclosing_stacks(start, end, gtid, times, tids):
        keep[stack] = True
    return keep


class Cleaner:
    """Rewrites the strings of values (paths, host and user names). An event's name (a kernel,
    an op, a range: what the analysis reads) has a user or host name replaced only where it
    stands as a word, as written (:func:`..names.program_word_pattern`): a user named ``adam``
    must not turn ``aten::_fused_adam_`` into ``aten::_fused_user_``."""

    def __init__(self, ctx: Survey) -> None:
        self.wd = ctx.working_dir
        words = sorted([(h, HOST_PLACEHOLDER) for h in ctx.hosts] +
                       [(u, USER_PLACEHOLDER) for u in ctx.users], key=lambda w: -len(w[0]))
        self.words = {False: [(w, word_pattern(w), new) for w, new in words],
                      True: [(w, program_word_pattern(w), new) for w, new in words]}
        self.kinds: Counter[str] = Counter()
        self.rewritten = 0
        self._cache: dict[tuple[str, bool], str] = {}

    def _path(self, path: str) -> str:
        if not is_leaky_path(path):
            return path
        self.kinds["abs_path"] += 1
        return rewrite_path(path, self.wd)

    def text(self, s: str, name: bool = False) -> str:
        """``s`` scrubbed (``name``: an event's name)."""
        hit = self._cache.get((s, name))
        if hit is not None:
            return hit
        out, found = redact_secrets(s)
        for kind, _ in found:
            self.kinds[kind] += 1
        out = sub_paths(out, self._path)
        low = out.lower()  # names are matched in any case: a cheap look first
        for word, rx, new in self.words[name]:
            if word.lower() in low:
                out, n = rx.subn(new, out)
                if n:
                    self.kinds["host" if new == HOST_PLACEHOLDER else "user"] += n
                    low = out.lower()
        if out != s:
            self.rewritten += 1
        if len(self._cache) < 1 << 16:
            self._cache[s, name] = out
        return out

    def event(self, e: Any) -> Any:
        """An event scrubbed: its name as a name (:meth:`text`), the rest as any value."""
        if type(e) is not dict:
            return self.value(e)
        return {k: self.text(x, name=True) if k == "name" and isinstance(x, str)
                else self.value(x) for k, x in e.items()}

    def value(self, v: Any) -> Any:
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, dict):
            return {k: self.value(x) for k, x in v.items()}
        if isinstance(v, list):
            return [self.value(x) for x in v]
        return v
