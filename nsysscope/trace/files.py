"""What every input file is checked and named by: the first bytes of each kind of trace, the
accepted kinds in words, and the names and temporary files of what nsysscope derives from an
input (a decompressed copy, an export), shared by :mod:`.sources` and :mod:`.nsys_rep`."""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path
from urllib.parse import quote

from ..errors import UnreadableInput
from ..util.atomic import temp_beside
from .cache import CACHE_SUFFIX, cache_dir

SQLITE_MAGIC = b"SQLite format 3\x00"

XZ_MAGIC = b"\xfd7zXZ\x00"

GZIP_MAGIC = b"\x1f\x8b"

REPORT_MAGIC = b"NVIDIA Tegra Profiler Report"  # the first bytes of every .nsys-rep / .qdrep

REPORT_SUFFIXES = (".nsys-rep", ".qdrep")

ACCEPTS = ("nsysscope reads .sqlite, .sqlite.xz, .sqlite.gz, .nsys-rep and torch.profiler "
            "JSON traces")

#: the most a compressed trace may inflate, past :data:`INFLATE_FREE` bytes: the sample
#: exports' xz copies inflate 6.9x to 15.3x (every sample trace, two GPU sessions), the
#: torch.profiler captures' gzip 11.6x to 26.6x; a 156 KB file that inflates to 1 GiB
#: (6,700x) is a decompression bomb, not a trace, and is refused before it fills a disk
MAX_INFLATE = 200
#: what any compressed input may inflate to, whatever its ratio (small files)
INFLATE_FREE = 64 << 20


def inflate_limit(p: Path) -> int:
    """The most bytes the compressed file ``p`` may inflate to."""
    return max(INFLATE_FREE, MAX_INFLATE * p.stat().st_size)


def bomb(p: Path, inflated: int) -> UnreadableInput:
    """The error for ``p``, which inflated past :func:`inflate_limit` (``inflated`` bytes)."""
    return UnreadableInput(
        f"{p}: inflates to more than {MAX_INFLATE} times its size (past {inflated >> 20} MB "
        f"from {p.stat().st_size >> 10} KB): not a trace a profiler wrote, refused (a "
        "decompression bomb?); if it is one, decompress it yourself")


def read_head(p: Path, n: int = 64) -> bytes:
    """The first bytes of ``p``, after checking it is a readable, non-empty regular file.

    Readability is checked by opening the file: ``os.access`` says yes to root, and to anyone
    on file systems that decide at open time (NFS with root squash, FUSE, ACLs)."""
    try:
        st = p.stat()
    except FileNotFoundError:
        raise UnreadableInput(f"{p}: no such file") from None
    except PermissionError:
        raise UnreadableInput(f"{p}: permission denied (cannot reach the file)") from None
    except OSError as e:
        raise UnreadableInput(f"{p}: cannot read: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UnreadableInput(f"{p}: is a directory, not a trace file")
    if not stat.S_ISREG(st.st_mode):
        raise UnreadableInput(f"{p}: not a regular file ({ACCEPTS})")
    try:
        with p.open("rb") as f:
            head = f.read(n)
    except PermissionError:
        raise UnreadableInput(f"{p}: permission denied") from None
    except OSError as e:
        raise UnreadableInput(f"{p}: cannot read: {e.strerror or e}") from None
    if not head:
        raise UnreadableInput(f"{p}: empty file")
    return head

#: how much of each end of a file is read for its fingerprint (and a report's version)
END_BYTES = 1 << 16


def file_ends(p: Path) -> tuple[int, bytes, bytes]:
    """``p``'s size, first and last 64 KiB (overlapping in a smaller file). Raises OSError."""
    with p.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(END_BYTES)
        f.seek(max(0, size - END_BYTES))
        return size, head, f.read()


def content_fingerprint(p: Path) -> tuple[int, bytes]:
    """``p``'s size and the SHA-256 of its size, first and last 64 KiB: another capture
    differs there (a report's header and trailer; a compressed file's first block and its
    index), and two reads cost well under a millisecond where hashing the whole file would
    cost seconds. Raises OSError."""
    size, head, tail = file_ends(p)
    return size, hashlib.sha256(f"{size}|".encode() + head + tail).digest()


def fingerprint(p: Path) -> str:
    """What names ``p``'s entry in the cache: its path, size, modification time and
    :func:`content_fingerprint`. The time alone took another file copied over ``p`` with
    ``cp -p`` or ``touch -r`` for the first, and reused its decompressed copy."""
    st = p.stat()
    # the path's own bytes (a name that is not UTF-8 is held in surrogates)
    key = os.fsencode(p.resolve()) + f"|{st.st_size}|{st.st_mtime_ns}|".encode() + \
        content_fingerprint(p)[1]
    return hashlib.sha256(key).hexdigest()[:16]


def cache_entry(p: Path) -> Path:
    """Where the cache keeps the export or decompressed copy of ``p`` (:mod:`.cache`)."""
    return cache_dir() / f"{stem(p)}-{fingerprint(p)}{CACHE_SUFFIX}"

def stem(p: Path) -> str:
    """``trace.sqlite.xz`` -> ``trace``; ``run.nsys-rep`` -> ``run``."""
    name = re.sub(r"\.(xz|gz)$", "", p.name, flags=re.I)
    for suffix in (".sqlite", ".db") + REPORT_SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)] or name
    return name

def cache_folder() -> Path:
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UnreadableInput(f"cannot create the cache folder {folder}: {e.strerror or e} "
                              "(set NSYSSCOPE_CACHE to a writable folder)") from None
    return folder


def cache_temp(final: Path) -> Path:
    try:
        return temp_beside(final, 0o600)  # a trace's data: its owner's alone
    except OSError as e:
        raise UnreadableInput(f"cannot write to the cache folder {final.parent}: "
                              f"{e.strerror or e} (set NSYSSCOPE_CACHE to a writable "
                              "folder)") from None


def sqlite_uri(path: str | os.PathLike[str], query: str) -> str:
    """A ``file:`` URI for SQLite to open ``path`` with ``query`` (``mode=ro``...). The path's
    bytes are percent-encoded: ``?``, ``#`` and ``%`` in a file name would otherwise end or
    change the URI, and a name that is not UTF-8 could not be passed as text at all."""
    return f"file:{quote(os.fsencode(Path(path).resolve().as_posix()))}?{query}"
