"""The user cache folder: decompressed ``.xz``/``.gz`` traces and ``.nsys-rep`` exports that
could not be written beside their report.

Where: ``$NSYSSCOPE_CACHE``, else ``$XDG_CACHE_HOME/nsysscope``, else ``~/.cache/nsysscope``.
How big: at most ``$NSYSSCOPE_CACHE_MAX`` (``500M``, ``2G``, a number of bytes; ``0`` or
``none``: no limit), default :data:`DEFAULT_MAX_BYTES`. After each new entry the least
recently used entries are removed until the folder fits; an entry used in the last
:data:`IN_USE_S` seconds is never removed (another run, the gate's other side or a batch
worker, may be about to open it again), so the folder can exceed the cap while several
traces are in use. Temporary files of runs that died (untouched as long) go too. A file's
last use is its access time (set on every cache hit) or, when later, its
modification time. ``nsysscope cache info`` shows the folder, ``nsysscope cache clear``
empties it, and ``--no-cache`` (or :func:`disable_cache`) sends one run's files to a temporary
folder removed when it exits.

Exports written beside a report (``NAME.nsysscope-cache.sqlite``) are the report's, not the
cache folder's: they are neither counted nor evicted. Nor is any file of the folder that the
cache did not name (``NAME-<16 hex digits>.nsysscope-cache.sqlite``): a folder the user points
``$NSYSSCOPE_CACHE`` at may hold their own traces, named as they like (a capture named by a
16-digit hash, ``run-<hash>.sqlite``, was once taken for an entry and removed).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import hmac
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import UnreadableInput

#: the default size cap of the cache folder
DEFAULT_MAX_BYTES = 2 * 1024**3
_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "m": 1024**2, "mb": 1024**2, "g": 1024**3,
          "gb": 1024**3, "t": 1024**4, "tb": 1024**4}

_temporary: Path | None = None

#: an entry used this recently may be in use by another run: eviction keeps it; a temporary
#: file untouched this long is a dead run's (a live one writes to it all the time)
IN_USE_S = 600

#: what the name of every export nsysscope writes ends with, in the cache or beside a report
CACHE_SUFFIX = ".nsysscope-cache.sqlite"
#: the names the cache gives its files: the trace's stem, a fingerprint of the source, and
#: :data:`CACHE_SUFFIX`
ENTRY_NAME = re.compile(r".+-[0-9a-f]{16}" + re.escape(CACHE_SUFFIX))
#: the names nsysscope gave its cache files before (``NAME-<16 hex digits>.sqlite``): entries
#: in the default folder, which is nsysscope's own, but never in one ``$NSYSSCOPE_CACHE``
#: names (a user's folder, where such a name may be the user's own capture)
LEGACY_ENTRY_NAME = re.compile(r".+-[0-9a-f]{16}\.sqlite")


def cache_dir() -> Path:
    """``$NSYSSCOPE_CACHE``, else ``$XDG_CACHE_HOME/nsysscope``, else ``~/.cache/nsysscope``;
    this run's temporary folder after :func:`disable_cache`."""
    if _temporary is not None:
        return _temporary
    if os.environ.get("NSYSSCOPE_CACHE"):
        return Path(os.environ["NSYSSCOPE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "nsysscope"


def cache_disabled() -> bool:
    return _temporary is not None


def disable_cache() -> Path:
    """Send this process's decompressed and exported files to a fresh temporary folder,
    removed at exit (``--no-cache``). Existing cache entries are not read either."""
    global _temporary
    if _temporary is None:
        _temporary = Path(tempfile.mkdtemp(prefix="nsysscope-nocache-"))
        atexit.register(shutil.rmtree, _temporary, ignore_errors=True)
    return _temporary


def max_bytes() -> int | None:
    """The cache folder's size cap in bytes (None: no cap), from ``$NSYSSCOPE_CACHE_MAX``."""
    raw = os.environ.get("NSYSSCOPE_CACHE_MAX", "").strip().lower()
    if not raw:
        return DEFAULT_MAX_BYTES
    if raw in ("0", "none", "off", "unlimited"):
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([a-z]*)", raw)
    if not m or m.group(2) not in _UNITS:
        raise UnreadableInput(f"NSYSSCOPE_CACHE_MAX={raw!r}: give a size such as 500M or 2G "
                              "(0: no limit)")
    cap = float(m.group(1)) * _UNITS[m.group(2)]
    return None if cap >= 2**63 else int(cap)  # more than any disk holds: no cap


@dataclass(frozen=True)
class CacheEntry:
    path: Path
    size: int
    last_used: float  # seconds since the epoch


def entries(folder: Path | None = None) -> list[CacheEntry]:
    """The cache's files (named as it names them: :data:`ENTRY_NAME`, and
    :data:`LEGACY_ENTRY_NAME` in the default folder), least recently used first (temporary
    files of runs in progress are left out)."""
    folder = folder or cache_dir()
    out = []
    try:
        names = list(os.scandir(folder))
    except OSError:
        return []
    for e in names:
        if e.name.startswith(".") or not _is_entry(e.name, folder):
            continue
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if e.is_file(follow_symlinks=False):
            out.append(CacheEntry(Path(e.path), st.st_size, max(st.st_atime, st.st_mtime)))
    return sorted(out, key=lambda c: (c.last_used, c.path.name))


def entry_mac(made_from: bytes) -> bytes:
    """A keyed hash of ``made_from`` (what a cache entry was made from: its source's
    fingerprint), with this user's own key: a stamp only this user's runs can write, so an
    entry of a cache shared, copied or restored from elsewhere (named as the trace's, holding
    another trace, one that stalls less, say) is not taken for the trace's own."""
    return hmac.new(_user_key(), made_from, hashlib.sha256).digest()


@functools.lru_cache(maxsize=1)
def _user_key() -> bytes:
    """32 random bytes kept in ``$XDG_CONFIG_HOME/nsysscope/cache.key`` (else
    ``~/.config/...``), readable by the user alone; made on first use. Where it can be
    neither read nor made (a read-only home), this process's own: its entries are then
    trusted by it alone, and made again by the next run."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    path = Path(base) / "nsysscope" / "cache.key"
    with contextlib.suppress(OSError):
        data = path.read_bytes()
        if len(data) == 32:
            return data
    key = os.urandom(32)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key)
    except FileExistsError:  # another run made it first: its key
        with contextlib.suppress(OSError):
            data = path.read_bytes()
            if len(data) == 32:
                return data
    except OSError:
        pass
    return key


def touch(path: Path) -> None:
    """Mark a cache entry as just used: its access time is set to now, its modification time
    (when its content was written, which freshness checks compare) is kept."""
    with contextlib.suppress(OSError):
        os.utime(path, ns=(time.time_ns(), path.stat().st_mtime_ns))


def evict(keep: Path | None = None, limit: int | None = None) -> list[CacheEntry]:
    """Remove least recently used entries until the folder fits the cap; never ``keep`` nor
    an entry used in the last :data:`IN_USE_S` seconds. Returns what was removed."""
    if cache_disabled():
        return []
    _remove_dead_temporaries(cache_dir())
    _remove_dead_links(cache_dir())
    cap = max_bytes() if limit is None else limit
    if cap is None:
        return []
    items = entries()
    total = sum(c.size for c in items)
    removed = []
    recent = time.time() - IN_USE_S
    for c in items:
        if total <= cap or c.last_used > recent:  # the rest are newer still
            break
        if keep is not None and c.path == keep:
            continue
        try:
            c.path.unlink()
        except OSError:
            continue
        total -= c.size
        removed.append(c)
    return removed


def clear() -> tuple[int, int]:
    """Remove every entry of the cache folder (and stale temporary files of runs that
    died); returns (files, bytes) removed."""
    folder = cache_dir()
    n = size = 0
    for c in entries(folder):
        try:
            c.path.unlink()
        except OSError:
            continue
        n, size = n + 1, size + c.size
    _remove_dead_temporaries(folder)
    _remove_dead_links(folder)
    return n, size


def held(entry: Path) -> Path:
    """The name this process reads the cache entry ``entry`` by while it runs: a hard link
    ``.PID.NAME`` beside it, removed when the process exits (or, where it died, by the next
    run that finds its process gone). ``cache clear``, or an eviction, while a report reads
    the entry then removes the entry's name, not the file the report reads: a clear in the
    first seconds of a report failed it with "cannot open as SQLite", blaming the trace.
    Where no link can be made (a file system without them), ``entry`` itself."""
    link = entry.with_name(f".{os.getpid()}.{entry.name}")
    try:
        if link.exists() and not os.path.samefile(link, entry):
            link.unlink()  # the entry was made again since: the new one
        if not link.exists():
            os.link(entry, link)
    except OSError:
        return entry
    if not _HELD:
        atexit.register(_let_go)
    _HELD[link] = entry
    return link


#: this process's links (:func:`held`) and their entries
_HELD: dict[Path, Path] = {}


def entry_of(path: Path) -> Path:
    """The cache entry ``path`` (a name :func:`held` gave, or the entry itself) stands for."""
    return _HELD.get(path, path)


def let_go(link: Path) -> None:
    """Remove this process's link ``link`` (:func:`held`)."""
    if _HELD.pop(link, None) is not None:
        link.unlink(missing_ok=True)


def _let_go() -> None:
    for link in list(_HELD):
        with contextlib.suppress(OSError):
            let_go(link)


_LINK = re.compile(r"\.(\d+)\.(.+)")


def _remove_dead_links(folder: Path) -> None:
    """The links (:func:`held`) of runs that ended without removing theirs (killed; a
    worker process leaves without its exit handlers)."""
    for link in folder.glob(".*" + CACHE_SUFFIX) if folder.is_dir() else ():
        m = _LINK.fullmatch(link.name)
        if m is None or not _is_entry(m.group(2), folder):
            continue
        try:
            os.kill(int(m.group(1)), 0)
        except ProcessLookupError:
            link.unlink(missing_ok=True)
        except (OSError, ValueError, OverflowError):  # alive, another user's: left
            continue


def _remove_dead_temporaries(folder: Path) -> None:
    """Temporary files (``.NAME.XXXXXX.tmp``) of runs that died writing an entry: untouched
    for :data:`IN_USE_S` seconds (a run in progress keeps writing its own)."""
    dead = time.time() - IN_USE_S
    for tmp in folder.glob(".*.tmp") if folder.is_dir() else ():
        if not _is_entry(tmp.name[1:].rsplit(".", 2)[0], folder):  # .NAME.XXXXXX.tmp
            continue
        try:
            if tmp.stat().st_mtime < dead:
                tmp.unlink()
        except OSError:
            pass


def _is_entry(name: str, folder: Path) -> bool:
    """Whether a file called ``name`` in ``folder`` is the cache's."""
    if ENTRY_NAME.fullmatch(name):
        return True
    own = not os.environ.get("NSYSSCOPE_CACHE") and not cache_disabled()
    return own and folder == cache_dir() and bool(LEGACY_ENTRY_NAME.fullmatch(name))


def human(n: float) -> str:
    """``210.3 MB``: a byte count for people (powers of 1024, as the cap is given)."""
    for unit in ("B", "KB", "MB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"
