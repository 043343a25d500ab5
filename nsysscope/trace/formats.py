"""What kind of JSON a file holds, from its content: a torch.profiler (Kineto) trace, an
nsysscope summary, or other JSON (plain, gzip or xz; never judged by its name)."""

from __future__ import annotations

import gzip
import lzma
import os
import zlib
from pathlib import Path

from ..errors import UnreadableInput
from .sources import GZIP_MAGIC, XZ_MAGIC, _read_head

#: decompressed bytes of a JSON file's head that :func:`json_kind` looks at
JSON_HEAD = 1 << 16
_JSON_START = (b"{", b"[")


def json_kind(path: str | os.PathLike) -> str | None:
    """What a JSON input is, from its content (plain, gzip or xz; never by name):
    ``"kineto"`` (a torch.profiler / Chrome trace: a ``traceEvents`` key, or an array of
    events, in its head), ``"summary"`` (nsysscope's own summary JSON), ``"json"`` (any
    other JSON), or None when it is not JSON at all (SQLite, a report, anything else).

    A file that cannot be read raises :class:`UnreadableInput`, as :func:`resolve` does."""
    p = Path(path)
    head = _read_head(p)
    if head.startswith((GZIP_MAGIC, XZ_MAGIC)):
        opener = gzip.open if head.startswith(GZIP_MAGIC) else lzma.open
        try:
            with opener(p, "rb") as f:
                head = f.read(JSON_HEAD)
        except (OSError, EOFError, lzma.LZMAError, zlib.error):
            return None  # resolve() says what is wrong with it
    else:
        with p.open("rb") as f:
            head = f.read(JSON_HEAD)
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text.startswith(_JSON_START):
        return None
    if b'"traceEvents"' in text or (text.startswith(b"[") and b'"ph"' in text):
        return "kineto"
    if b'"verdict"' in text and b'"trace"' in text:
        return "summary"
    return "json"


def is_kineto(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a torch.profiler (Kineto) JSON trace, by content; never raises."""
    try:
        return json_kind(path) == "kineto"
    except (UnreadableInput, OSError):
        return False
