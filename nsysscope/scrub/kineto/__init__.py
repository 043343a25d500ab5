"""Scrub a torch.profiler (Kineto) JSON trace: paths and host names out, the analysis kept.

What a Kineto trace gives away, and what it becomes:

``abs_path``
    Absolute paths in any string: ``traceName`` (the path the trace was written to), and
    ``python_function`` names when the profiled code ran from absolute paths
    (``/opt/venv/lib/python3.12/site-packages/torch/cuda/graphs.py(137): replay``). They
    are rewritten exactly as the nsys scrub rewrites them (:func:`..paths.rewrite_path`):
    ``<site-packages>/torch/cuda/graphs.py``, ``<stdlib>/json/encoder.py``, a path of the
    program's own relative to its working directory (``engine_under_test/sampler.py``), any
    other ``<path>/<basename>``. The working directory is derived from the data: the common
    folder of the absolute ``.py`` files that are not library files, walked up while it is a
    package (its ``__init__.py`` or ``__main__.py`` was recorded). Relative paths (what
    torch >= 2 records for everything on ``sys.path``) are kept: they name no machine.
``host``
    The host name: torch >= 2.10 writes it as ``host_name`` at the top of the file, and
    ``tensorboard_trace_handler`` (which sglang and vLLM use) names each file
    ``{hostname}_{pid}.{time}.pt.trace.json``, and that name is in ``traceName``; a fully
    qualified one's short name and domain too. Wherever it recurs in a string it becomes
    ``host``, as in the nsys scrub (:func:`..names.word_pattern`: in any case, a name of four
    letters or more also joined by ``_`` or ``-``); in an event's name (a kernel, an op, a
    range) only as a word of its own, as written.
``user``
    A ``/home/NAME/``, ``/Users/NAME/`` or ``~NAME/`` in any path: NAME becomes ``user``
    wherever it recurs, as a host name does (paths are rewritten anyway).
``secret`` / ``email`` / ``ip``
    Tokens, secret-named values and URL passwords, e-mail addresses and IP addresses, in any
    string: as the nsys scrub does (:mod:`..secrets`).
``trace_id``
    The trace's random id, like nsys's session UUID: it becomes all zeros.

Kept: every timestamp, id and number, event names (CUDA API, kernels, copies, ranges), GPU
properties (``deviceProperties``: model names, no serial numbers), process and thread names
(``python3``) once scrubbed as above.

``slim`` (only when asked) also drops the ``python_function`` events that enclose none of the
CUDA calls the analysis uses (graph launches, syncs, copies, event records and queries, stream
waits): a Python loop's ``len()``/``dict.get`` calls are ~80 % of a trace's events and say
nothing about a stall. The events that enclose such a call are kept with all their ancestors,
so the stack nsysscope attributes each stall to is unchanged.

The output is written to a temporary file next to the destination and renamed over it;
``.gz`` destinations are gzip-compressed (level 9, no name or time in the header, so the same
input gives the same bytes).
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ...util.atomic import replace, target, temp_beside
from ..policy import Leak, PathLike, ScrubError
from .leaks import find_kineto_leaks
from .survey import Cleaner, keep_mask, stream_events, survey_trace

__all__ = ["KinetoScrubResult", "find_kineto_leaks", "scrub_kineto"]

#: what a write fails with when the destination's file system is full or read-only
_WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


@dataclass(frozen=True)
class KinetoScrubResult:
    """What :func:`scrub_kineto` did."""

    src: Path
    dst: Path
    working_dir: str | None
    hosts: tuple[str, ...]
    users: tuple[str, ...]
    events_in: int
    events_out: int
    strings_rewritten: int
    kinds: dict[str, int] = field(default_factory=dict)
    #: python_function events dropped by ``slim``
    dropped: int = 0
    #: what the written file, scanned again, still holds (empty: clean), as for an export
    remaining: tuple[Leak, ...] = ()

    def counts(self) -> str:
        """What was done, for the command's one line (the export's counts said 0 leaks for a
        trace whose paths and names were rewritten)."""
        slim = f", {self.dropped} python_function events dropped" if self.dropped else ""
        return f"{self.strings_rewritten} strings rewritten{slim}"


def scrub_kineto(src: PathLike, dst: PathLike | None = None, *, slim: bool = False,
                 in_place: bool = False) -> KinetoScrubResult:
    """Write a scrubbed copy of the Kineto trace ``src`` to ``dst`` (see the module
    docstring); ``slim`` also drops the python_function events no CUDA call needs."""
    src = Path(src)
    if in_place:
        dst = src
    elif dst is None:
        raise ScrubError("scrub needs a destination, or --in-place")
    dst = target(dst)  # a symbolic link is written through, not replaced
    if not in_place and dst.exists() and dst.resolve() == src.resolve():
        raise ScrubError(f"{dst}: the destination is the source; --in-place rewrites it")
    if not dst.parent.is_dir():
        raise ScrubError(f"{dst.parent}: destination directory does not exist")
    ctx = survey_trace(src, slim)
    keep = keep_mask(ctx) if slim else None
    clean = Cleaner(ctx)
    try:
        tmp = temp_beside(dst)
    except OSError as e:
        raise ScrubError(f"{dst.parent}: cannot write the scrubbed file there "
                         f"({e.strerror})") from None
    mode = (dst if dst.exists() else src).stat().st_mode & 0o777
    os.chmod(tmp, mode | 0o200)  # the mode of the file it replaces (or of SRC), owner-writable
    counts = {"in": 0, "out": 0, "py": 0, "dropped": 0}
    try:
        with _writer(tmp, dst.name.endswith(".gz")) as out:
            state = {"first_field": True, "first_event": True, "in_events": False}

            def on_field(key: str, value: Any) -> None:
                if state["in_events"]:
                    out.write("\n]")
                    state["in_events"] = False
                out.write("{\n" if state["first_field"] else ",\n")
                state["first_field"] = False
                out.write(json.dumps(key) + ": ")
                if key == "traceEvents" and value is None:
                    out.write("[")
                    state["in_events"] = True
                elif key == "trace_id" and isinstance(value, str):  # a random per-trace id
                    out.write(json.dumps(re.sub(r"[0-9A-Fa-f]", "0", value)))
                else:
                    out.write(json.dumps(clean.value(value), ensure_ascii=False))

            def on_event(e: Any) -> None:
                counts["in"] += 1
                if keep is not None and type(e) is dict and e.get("cat") == "python_function":
                    i = counts["py"]
                    counts["py"] += 1
                    if not keep[i]:
                        counts["dropped"] += 1
                        return
                out.write("\n" if state["first_event"] else ",\n")
                state["first_event"] = False
                out.write(json.dumps(clean.event(e), ensure_ascii=False, separators=(",", ":")))
                counts["out"] += 1

            stream_events(src, on_field, on_event)
            if state["in_events"]:
                out.write("\n]")
            out.write("\n}\n" if not state["first_field"] else "{}\n")
        replace(tmp, dst)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        if e.errno not in _WRITE_ERRORS:
            raise
        # a full disk, say: the destination is left as it was
        raise ScrubError(f"{dst}: cannot write the scrubbed file ({e.strerror or e})") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return KinetoScrubResult(src=src, dst=dst, working_dir=ctx.working_dir, hosts=ctx.hosts,
                             users=ctx.users, events_in=counts["in"], events_out=counts["out"],
                             strings_rewritten=clean.rewritten, kinds=dict(clean.kinds),
                             dropped=counts["dropped"], remaining=tuple(find_kineto_leaks(dst)))


class _writer:
    """A text file, gzip-compressed (deterministic header) when ``gz``."""

    def __init__(self, path: Path, gz: bool) -> None:
        self.path, self.gz = path, gz

    def __enter__(self) -> TextIO:
        self.raw = open(self.path, "wb")  # noqa: SIM115
        self.zf: gzip.GzipFile | None = gzip.GzipFile(
            filename="", mode="wb", fileobj=self.raw, compresslevel=9, mtime=0) if self.gz else None
        self.f = _Text(self.zf if self.zf is not None else self.raw)
        return self.f  # type: ignore[return-value]

    def __exit__(self, *exc: Any) -> None:
        self.f.flush()
        if self.zf is not None:
            self.zf.close()
        self.raw.close()


class _Text:
    """Buffered UTF-8 writes to a binary stream."""

    def __init__(self, f: Any) -> None:
        self.f, self.size = f, 0
        self.parts: list[str] = []

    def write(self, s: str) -> None:
        self.parts.append(s)
        self.size += len(s)
        if self.size > 1 << 20:
            self.flush()

    def flush(self) -> None:
        if self.parts:
            self.f.write("".join(self.parts).encode("utf-8"))
            self.parts, self.size = [], 0
