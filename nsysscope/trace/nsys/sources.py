"""Turn whatever the user points at into a readable SQLite export, without touching it.

The file's first bytes decide what it is, its name only when they cannot:

* SQLite (``.sqlite``) is used as is.
* xz or gzip (``.sqlite.xz`` / ``.sqlite.gz``) is decompressed once into the user cache folder.
* An Nsight Systems report (``.nsys-rep``, or the older ``.qdrep``) is exported with ``nsys
  export --type sqlite`` next to the report when that folder can be written, else into the
  user cache folder, and reused while it is the export of the report as it is now; an export
  the user made beside it is read instead when newer than the report (:mod:`.nsys_rep`).

The user cache folder has a size cap with least-recently-used eviction (:mod:`.cache`).

Every cache file is written to a temporary name in its final folder and renamed into place, so
concurrent runs never see a torn file: each run either finds a complete file or writes its own.
The input itself is only ever opened for reading.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import lzma
import os
import sqlite3
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, TypeVar

from ...errors import DamagedExport, UnreadableInput, truncated_compressed
from ...util.progress import note
from ..cache import (
    CACHE_SUFFIX,
    cache_dir,
    cache_disabled,
    entry_of,
    evict,
    held,
    let_go,
    touch,
)
from ..files import (
    ACCEPTS,
    GZIP_MAGIC,
    REPORT_MAGIC,
    REPORT_SUFFIXES,
    SQLITE_MAGIC,
    XZ_MAGIC,
    bomb,
    cache_entry,
    cache_folder,
    cache_temp,
    content_fingerprint,
    inflate_limit,
    read_head,
)
from .nsys_rep import exported, made_from, stamp, stamp_of
from .schema import is_whole


def resolve(path: str | os.PathLike[str], nsys: str | None = None) -> Path:
    """A path to an SQLite export holding the trace ``path`` refers to. Asked again for the
    same unchanged file in one process (a look at its size, then the read: see
    :func:`.windows.in_windows`), the same export, without exporting, decompressing or
    saying anything again."""
    p = Path(path)
    head = read_head(p)
    try:
        st, (_size, content) = p.stat(), content_fingerprint(p)
    except OSError as e:  # read_head could: the file changed since
        raise UnreadableInput(f"{p}: cannot read: {e.strerror or e}") from None
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns, content, nsys, str(cache_dir()),
           cache_disabled())
    known = _RESOLVED.get(key)
    if known is not None and known.exists():
        return known
    db = _resolve(p, head, nsys)
    if db.parent == cache_dir() and db.name.endswith(CACHE_SUFFIX) and not cache_disabled():
        db = held(db)  # read by a name of this run's: a cache clear meanwhile is harmless
    _RESOLVED[key] = db
    return db


#: what :func:`resolve` found for a file, by path, size, modification time, content (a file
#: copied over another keeping its time is another file), nsys and cache
_RESOLVED: dict[tuple[str, int, int, bytes, str | None, str, bool], Path] = {}

T = TypeVar("T")


def read_resolved(path: str | os.PathLike[str], nsys: str | None,
                  read: Callable[[Path], T]) -> T:
    """``read(db)`` of the export :func:`resolve` finds for ``path``. When ``read`` finds it
    damaged (:class:`~nsysscope.errors.DamagedExport`) and it is the copy nsysscope
    decompressed from ``path``, the copy is made again, once, and read again: a copy is reused
    while its source is unchanged, so one damaged on disk after it was written (zeroed pages,
    a bad sector) would be blamed on the trace by every run until ``nsysscope cache clear``.
    A fresh copy that is damaged too is the trace's. A report's export is not deleted: making
    it again needs nsys, which may be missing here."""
    db = resolve(path, nsys=nsys)
    try:
        return read(db)
    except DamagedExport:
        p = Path(path)
        if not (db.name.endswith(CACHE_SUFFIX) and db.resolve() != p.resolve() and
                read_head(p).startswith((XZ_MAGIC, GZIP_MAGIC))):
            raise
        if entry_of(db) in _MADE:  # decompressed by this run: the damage is the trace's; the copy
            _forget(db)  # is not kept (a 1 GiB bomb was made twice, then cached)
            raise
    note(f"the cached copy of {Path(path).name} ({entry_of(db)}) was damaged: making it "
         "again")
    _forget(db)
    db = resolve(path, nsys=nsys)
    try:
        return read(db)
    except DamagedExport:
        _forget(db)
        raise


def _forget(db: Path) -> None:
    """Remove the decompressed copy ``db`` (or this run's name of it) and what this process
    knows of it."""
    for key in [k for k, v in _RESOLVED.items() if v == db]:
        del _RESOLVED[key]
    entry = entry_of(db)
    let_go(db)
    _MADE.discard(entry)
    entry.unlink(missing_ok=True)


#: the copies this process decompressed (a damaged one is the trace's, not the cache's)
_MADE: set[Path] = set()


def _resolve(p: Path, head: bytes, nsys: str | None) -> Path:
    name = p.name.lower()
    if head.startswith(SQLITE_MAGIC):
        return p
    if head.startswith(XZ_MAGIC):
        return _decompressed(p, lambda f: lzma.open(f, "rb"))
    if head.startswith(GZIP_MAGIC):
        return _decompressed(p, lambda f: gzip.open(f, "rb"))
    if name.endswith((".xz", ".gz")):
        kind = "xz" if name.endswith(".xz") else "gzip"
        raise UnreadableInput(f"{p}: corrupt compressed file (named .{name.rsplit('.', 1)[1]}, "
                              f"but it does not start like {kind} data)")
    if head.startswith(REPORT_MAGIC) or name.endswith(REPORT_SUFFIXES):
        return exported(p, nsys)
    if name.endswith(".qdstrm"):
        raise UnreadableInput(
            f"{p}: a .qdstrm is a raw capture nsys never turned into a report; convert it with "
            "'QdstrmImporter -i FILE.qdstrm' (in nsys's host-linux-x64 folder) and pass the "
            ".nsys-rep")
    raise UnreadableInput(f"{p}: not an SQLite file ({ACCEPTS})")


def _decompressed(p: Path, opener: Callable[[Path], io.BufferedIOBase]) -> Path:
    cache_folder()  # made, if it is not there
    final = cache_entry(p)
    source = made_from(p, cached=True)
    if final.is_file():
        if is_whole(final) and stamp_of(final) == source:
            touch(final)
            return final
        why = "damaged" if not is_whole(final) else "not made from it here (a cache " \
            "copied from elsewhere, or by an older nsysscope)"
        note(f"the cached copy of {p.name} ({final}) was {why}: decompressing it again")
    tmp = cache_temp(final)
    try:
        with opener(p) as src, tmp.open("wb") as dst:
            _copy_decompressed(p, src, dst)
        with contextlib.suppress(sqlite3.Error):  # a damaged copy: its read says so
            stamp(tmp, source)
        os.replace(tmp, final)
        _MADE.add(final)
    except OSError as e:  # reading p, or writing the cache (a full disk)
        raise UnreadableInput(f"{p}: cannot decompress into {final.parent}: {e.strerror or e} "
                              "(set NSYSSCOPE_CACHE to a writable folder with room)") from None
    finally:
        tmp.unlink(missing_ok=True)
    evict(keep=final)
    return final


def _copy_decompressed(p: Path, src: io.BufferedIOBase, dst: IO[bytes]) -> None:
    first = True
    limit = inflate_limit(p)
    written = 0
    while True:
        try:
            chunk = src.read(1 << 22)
        except EOFError:  # the same fault as a truncated export, the same exit code
            raise truncated_compressed(p) from None
        except (lzma.LZMAError, zlib.error, gzip.BadGzipFile) as e:
            raise UnreadableInput(f"{p}: corrupt compressed file "
                                  f"({str(e) or type(e).__name__})") from None
        if first and not chunk.startswith(SQLITE_MAGIC):
            raise UnreadableInput(f"{p}: decompresses, but not to an SQLite file ({ACCEPTS})")
        first = False
        if not chunk:
            return
        written += len(chunk)
        if written > limit:
            raise bomb(p, written)
        dst.write(chunk)


