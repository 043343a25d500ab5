"""Reading a large JSON document as a stream: its top-level keys, then its ``traceEvents``
array one element at a time (see :class:`JsonStream`)."""

from __future__ import annotations

import codecs
import decimal
import gzip
import io
import json
import lzma
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, cast

from ...errors import NotAnNsysExport, NsysscopeError, UnreadableInput, truncated_compressed
from ..files import ACCEPTS, GZIP_MAGIC, XZ_MAGIC, bomb, inflate_limit

_CHUNK = 1 << 20  # characters decoded per read
#: one JSON value (an event, a metadata field) larger than this is taken as corrupt
_MAX_VALUE = 64 << 20
#: where the white space (_SEP: and commas) from a position ends; both match the empty
#: string, so neither returns None
_Skip = Callable[[str, int], "re.Match[str]"]
_WS = cast(_Skip, re.compile(r"[ \t\r\n]*").match)
_SEP = cast(_Skip, re.compile(r"[ \t\r\n,]*").match)
_decode = json.JSONDecoder().raw_decode
#: float64 holds microseconds to the nanosecond below 2**43 us (its step is 1.95 ns above):
#: relative Kineto times (since PyTorch ~2.4: 1e11-5e12 us in the traces seen) are read as
#: floats; Unix-epoch times written with a fraction (PyTorch ~2.2-2.3, HTA's
#: ns_resolution_trace: 1712195495519689.047, where a float's step is 0.25 us) exactly
_EXACT_FROM = 2.0 ** 43
#: a time of 13 or more digits with a fraction in the events' first window: the file is read
#: with :func:`_exact_float` (each float a Python call: 1.15-1.35x the decoding time on HTA's
#: ns_resolution_trace, a shared box; so only then)
_EPOCH_FRACTION = re.compile(r'"ts"\s*:\s*-?\d{13,}\.\d')


def _exact_float(text: str) -> float | decimal.Decimal:
    """A JSON number with a fraction: a float, or where a float would lose nanoseconds, the
    exact :class:`decimal.Decimal` (:class:`.events.Collector` makes it relative first)."""
    v = float(text)
    return decimal.Decimal(text) if abs(v) >= _EXACT_FROM else v


_decode_exact = json.JSONDecoder(parse_float=_exact_float).raw_decode


def open_text(path: Path) -> BinaryIO:
    """``path`` as a binary stream, gzip or xz decompressed by its first bytes (refused,
    :func:`~nsysscope.trace.files.bomb`, once it inflates past its limit)."""
    with open(path, "rb") as f:
        magic = f.read(6)
    if magic.startswith(GZIP_MAGIC):
        return _Capped(gzip.open(path, "rb"), path)  # type: ignore[return-value]
    if magic.startswith(XZ_MAGIC):
        return _Capped(lzma.open(path, "rb"), path)  # type: ignore[return-value]
    return open(path, "rb")


class _Capped(io.BufferedIOBase):
    """A decompressing stream that raises :func:`~nsysscope.trace.files.bomb` past
    :func:`~nsysscope.trace.files.inflate_limit`: a 1 GiB JSON of a few KB was parsed to
    its end."""

    def __init__(self, f: Any, path: Path) -> None:
        self.f, self.path, self.limit, self.inflated = f, path, inflate_limit(path), 0

    def read(self, n: int | None = -1) -> bytes:
        data: bytes = self.f.read(n)
        self.inflated += len(data)
        if self.inflated > self.limit:
            raise bomb(self.path, self.inflated)
        return data

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.f.close()
        super().close()


class JsonStream:
    """One pass over a JSON document: its top-level object's keys one by one, and the
    elements of its ``traceEvents`` array one at a time (a bare top-level array is taken as
    the events). Text is decoded in windows of ``_CHUNK`` characters; every value is decoded
    by ``json``'s C scanner (``raw_decode``) once it lies whole in the window."""

    def __init__(self, f: BinaryIO, path: Path) -> None:
        self.f, self.path = f, path
        # utf-8-sig: a byte order mark (which json_kind looks past) is not the document
        self.text = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.offset = 0  # characters dropped from the front of buf
        self.count = 0
        self.started = False  # a key or an event was read: what breaks later is corruption
        self.exact = False  # whether the events' fractions were decoded exactly

    # reading
    def _more(self, at_least: int = 0) -> bool:
        if self.eof:
            return False
        want = max(_CHUNK, at_least)
        try:
            raw = self.f.read(want)
        except EOFError:  # the same fault as a truncated trace, the same exit code
            raise truncated_compressed(self.path) from None
        except (zlib.error, lzma.LZMAError, gzip.BadGzipFile) as e:
            raise UnreadableInput(f"{self.path}: corrupt compressed file "
                                  f"({str(e) or type(e).__name__})") from None
        except OSError as e:
            raise UnreadableInput(f"{self.path}: cannot read: {e.strerror or e}") from None
        chunk = self.text.decode(raw, final=not raw)
        if not raw:
            self.eof = True
        self.offset += self.pos
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0
        return bool(raw) or bool(chunk)

    def _peek(self) -> str:
        """The next character that is not white space ('' at the end)."""
        while True:
            self.pos = _WS(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def _value(self) -> Any:
        while True:
            try:
                value, end = _decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                self._after_error(e, self.pos)
                continue
            except RecursionError:
                raise self._too_deep(self.pos) from None
            # a number or literal cut by the window's end decodes too: read on and again
            if end >= len(self.buf) and not self.eof and self._more():
                continue
            self.pos = end
            return value

    def _after_error(self, e: json.JSONDecodeError, pos: int) -> None:
        """Read on when the value at ``pos`` may just be cut by the window's end; raise when
        the file ends there (truncated) or the text is not JSON (corrupt)."""
        cut = e.msg.startswith("Unterminated string") or \
            len(self.buf) - e.pos <= 16 and "\n" not in self.buf[e.pos:]
        if not cut or len(self.buf) - pos > _MAX_VALUE:
            raise self._corrupt(f"invalid JSON at character {self.offset + e.pos} "
                                f"({e.msg})") from None
        self.pos = pos
        if not self._more(len(self.buf) - pos):
            raise self._truncated() from None

    def _too_deep(self, pos: int) -> NotAnNsysExport:
        """A value nested deeper than Python's JSON decoder recurses: no profiler writes one."""
        return NotAnNsysExport(f"{self.path}: corrupt torch.profiler trace: a value at character "
                               f"{self.offset + pos} is nested too deeply to be an event")

    def _truncated(self) -> NotAnNsysExport:
        return NotAnNsysExport(
            f"{self.path}: truncated torch.profiler trace: the JSON ends after {self.count} "
            "events, in the middle of the trace; copy or export it again")

    def _expect(self, char: str) -> None:
        c = self._peek()
        if c != char:
            if not c:
                raise self._truncated()
            raise self._corrupt(f"expected '{char}' at character {self.offset + self.pos}, "
                                f"found {c!r}")
        self.pos += 1

    def _corrupt(self, what: str) -> NsysscopeError:
        """A trace whose JSON breaks at ``what``: a corrupt torch.profiler trace once a key or
        an event was read; before, a file that only starts like JSON (random bytes after a
        ``{``: it was called a corrupt torch.profiler trace), unreadable as any other."""
        if self.started:
            return NotAnNsysExport(f"{self.path}: corrupt torch.profiler trace: {what}")
        return UnreadableInput(f"{self.path}: not JSON, though it starts like it ({what}); "
                               f"{ACCEPTS}")

    # structure
    def top(self) -> str:
        """``{`` or ``[``: how the document starts (anything else is not JSON)."""
        return self._peek()

    def fields(self) -> Iterator[str]:
        """The top-level object's keys; the caller reads each value with :meth:`value`,
        :meth:`events` or :meth:`skip_value` before asking for the next key."""
        self._expect("{")
        while True:
            c = self._peek()
            if c == "}":
                self.pos += 1
                return
            if c == ",":
                self.pos += 1
                continue
            if not c:
                raise self._truncated()
            key = self._value()
            self.started = True
            if not isinstance(key, str):
                raise NotAnNsysExport(f"{self.path}: corrupt torch.profiler trace: a key that "
                                      f"is not a string at character {self.offset + self.pos}")
            self._expect(":")
            yield key

    def value(self) -> Any:
        self._peek()
        return self._value()

    def is_array(self) -> bool:
        return self._peek() == "["

    def events(self, on_event: Callable[[Any], None], exact_times: bool = False) -> int:
        """Decode the array at the current position, calling ``on_event`` with each
        element; returns their number. With ``exact_times``, where the array's first window
        holds Unix-epoch times with a fraction, numbers with a fraction are decoded exactly
        (:func:`_exact_float`: large ones as :class:`~decimal.Decimal`, which only a reader
        that expects them takes; a rewriter keeps floats)."""
        self._expect("[")
        n = 0
        if exact_times and len(self.buf) - self.pos < _CHUNK:
            self._more()
        self.exact = exact_times and _EPOCH_FRACTION.search(self.buf, self.pos) is not None
        decode, sep = (_decode_exact if self.exact else _decode), _SEP
        while True:
            buf = self.buf
            pos = sep(buf, self.pos).end()
            if pos >= len(buf):
                self.pos = pos
                if not self._more():
                    self.count = n
                    raise self._truncated()
                continue
            if buf[pos] == "]":
                self.pos = pos + 1
                self.count = n
                return n
            try:
                obj, end = decode(buf, pos)
            except json.JSONDecodeError as e:
                self.count = n
                self._after_error(e, pos)
                continue
            except RecursionError:
                raise self._too_deep(pos) from None
            if end >= len(buf) and not self.eof:  # a bare number cut by the window
                self.pos = pos
                if self._more():
                    continue
            self.pos = end
            n += 1
            self.started = True
            on_event(obj)
