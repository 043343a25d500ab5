"""Turn whatever the user points at into a readable SQLite export, without touching it.

The file's first bytes decide what it is, its name only when they cannot:

* SQLite (``.sqlite``) is used as is.
* xz or gzip (``.sqlite.xz`` / ``.sqlite.gz``) is decompressed once into the user cache folder.
* An Nsight Systems report (``.nsys-rep``, or the older ``.qdrep``) is exported with
  ``nsys export --type sqlite`` (nsys from ``--nsys``, ``$NSYS`` or ``PATH``) next to the
  report when that folder can be written, else into the user cache folder, and reused while it
  is the export of the report as it is now: nsysscope sets its modification time to the
  report's, so a report replaced by another capture (even an older file, as ``cp -p`` or
  ``rsync -a`` leave it) is exported again. An export the user made already, ``NAME.sqlite`` beside
  ``NAME.nsys-rep`` (what ``nsys export`` and ``nsys stats`` write), is read instead when it is
  newer than the report, with a note saying so.

The user cache folder has a size cap with least-recently-used eviction (:mod:`.cache`).

Every cache file is written to a temporary name in its final folder and renamed into place, so
concurrent runs never see a torn file: each run either finds a complete file or writes its own.
The input itself is only ever opened for reading.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import lzma
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
import zlib
from pathlib import Path

from ..errors import NsysUnavailable, UnreadableInput
from ..util.progress import note
from .cache import cache_dir, cache_disabled, evict, touch
from .schema import truncation

SQLITE_MAGIC = b"SQLite format 3\x00"
XZ_MAGIC = b"\xfd7zXZ\x00"
GZIP_MAGIC = b"\x1f\x8b"
REPORT_MAGIC = b"NVIDIA Tegra Profiler Report"  # the first bytes of every .nsys-rep / .qdrep
CACHE_SUFFIX = ".nsysscope-cache.sqlite"
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")

_ACCEPTS = ("nsysscope reads .sqlite, .sqlite.xz, .sqlite.gz, .nsys-rep and torch.profiler "
            "JSON traces")


def resolve(path: str | os.PathLike, nsys: str | None = None) -> Path:
    """A path to an SQLite export holding the trace ``path`` refers to. Asked again for the
    same unchanged file in one process (a look at its size, then the read: see
    :func:`.windows.in_windows`), the same export, without exporting, decompressing or
    saying anything again."""
    p = Path(path)
    head = _read_head(p)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns, nsys, str(cache_dir()),
           cache_disabled())
    known = _RESOLVED.get(key)
    if known is not None and known.exists():
        return known
    _RESOLVED[key] = db = _resolve(p, head, nsys)
    return db


#: what :func:`resolve` found for a file, by path, size, modification time, nsys and cache
_RESOLVED: dict[tuple[str, int, int, str | None, str, bool], Path] = {}


def _resolve(p: Path, head: bytes, nsys: str | None) -> Path:
    name = p.name.lower()
    if head.startswith(SQLITE_MAGIC):
        return p
    if head.startswith(XZ_MAGIC):
        return _decompressed(p, lzma.open)
    if head.startswith(GZIP_MAGIC):
        return _decompressed(p, gzip.open)
    if name.endswith((".xz", ".gz")):
        kind = "xz" if name.endswith(".xz") else "gzip"
        raise UnreadableInput(f"{p}: corrupt compressed file (named .{name.rsplit('.', 1)[1]}, "
                              f"but it does not start like {kind} data)")
    if head.startswith(REPORT_MAGIC) or name.endswith(REPORT_SUFFIXES):
        return _exported(p, nsys)
    if name.endswith(".qdstrm"):
        raise UnreadableInput(
            f"{p}: a .qdstrm is a raw capture nsys never turned into a report; convert it with "
            "'QdstrmImporter -i FILE.qdstrm' (in nsys's host-linux-x64 folder) and pass the "
            ".nsys-rep")
    raise UnreadableInput(f"{p}: not an SQLite file ({_ACCEPTS})")


def _read_head(p: Path, n: int = 64) -> bytes:
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
        raise UnreadableInput(f"{p}: not a regular file ({_ACCEPTS})")
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


def _fingerprint(p: Path) -> str:
    st = p.stat()
    key = f"{p.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()
    return hashlib.sha256(key).hexdigest()[:16]


def _stem(p: Path) -> str:
    """``trace.sqlite.xz`` -> ``trace``; ``run.nsys-rep`` -> ``run``."""
    name = re.sub(r"\.(xz|gz)$", "", p.name, flags=re.I)
    for suffix in (".sqlite", ".db") + REPORT_SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)] or name
    return name


def _cache_folder() -> Path:
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UnreadableInput(f"cannot create the cache folder {folder}: {e.strerror or e} "
                              "(set NSYSSCOPE_CACHE to a writable folder)") from None
    return folder


def _temp_beside(final: Path) -> Path:
    """A fresh, empty temporary file in ``final``'s folder: rename it onto ``final`` when
    complete. Raises OSError when the folder cannot be written."""
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    os.close(fd)
    return Path(tmp)


def _cache_temp(final: Path) -> Path:
    try:
        return _temp_beside(final)
    except OSError as e:
        raise UnreadableInput(f"cannot write to the cache folder {final.parent}: "
                              f"{e.strerror or e} (set NSYSSCOPE_CACHE to a writable "
                              "folder)") from None


def _decompressed(p: Path, opener) -> Path:
    final = _cache_folder() / f"{_stem(p)}-{_fingerprint(p)}.sqlite"
    if final.is_file():
        touch(final)
        return final
    tmp = _cache_temp(final)
    try:
        with opener(p, "rb") as src, tmp.open("wb") as dst:
            _copy_decompressed(p, src, dst)
        os.replace(tmp, final)
    except OSError as e:  # reading p, or writing the cache (a full disk)
        raise UnreadableInput(f"{p}: cannot decompress into {final.parent}: {e.strerror or e} "
                              "(set NSYSSCOPE_CACHE to a writable folder with room)") from None
    finally:
        tmp.unlink(missing_ok=True)
    evict(keep=final)
    return final


def _copy_decompressed(p: Path, src, dst) -> None:
    first = True
    while True:
        try:
            chunk = src.read(1 << 22)
        except (lzma.LZMAError, EOFError, zlib.error, gzip.BadGzipFile) as e:
            raise UnreadableInput(f"{p}: corrupt or truncated compressed file "
                                  f"({str(e) or type(e).__name__})") from None
        if first and not chunk.startswith(SQLITE_MAGIC):
            raise UnreadableInput(f"{p}: decompresses, but not to an SQLite file ({_ACCEPTS})")
        first = False
        if not chunk:
            return
        dst.write(chunk)


# -- .nsys-rep -------------------------------------------------------------------------------

_NO_NSYS = ("install Nsight Systems (https://developer.nvidia.com/nsight-systems; Debian: "
            "package nsight-systems in non-free), or export by hand with 'nsys export --type "
            "sqlite -o TRACE.sqlite TRACE.nsys-rep' and pass the .sqlite")


def find_nsys(explicit: str | None = None, report: Path | None = None) -> str:
    """The nsys executable: the argument, ``$NSYS``, or ``nsys`` on PATH."""
    try:
        return _find_nsys(explicit)
    except NsysUnavailable as e:
        if report is None:
            raise
        raise NsysUnavailable(f"{report}: {e}") from None


def _find_nsys(explicit: str | None) -> str:
    if explicit or os.environ.get("NSYS"):
        candidate = explicit or os.environ["NSYS"]
        where = "--nsys" if explicit else "$NSYS"
        found = shutil.which(candidate)
        if found:
            return found
        if Path(candidate).is_file():
            raise NsysUnavailable(f"{where}={candidate} is not executable; {_NO_NSYS}")
        raise NsysUnavailable(f"{where}={candidate}: no such program; {_NO_NSYS}")
    found = shutil.which("nsys")
    if found:
        return found
    raise NsysUnavailable(f"reading a .nsys-rep needs nsys, and none was found (--nsys, "
                          f"$NSYS or PATH): {_NO_NSYS}")


def _fresh(cache: Path, report: Path) -> bool:
    """Whether ``cache`` was written after ``report`` (a file the user made)."""
    try:
        return cache.is_file() and cache.stat().st_mtime_ns >= report.stat().st_mtime_ns
    except OSError:
        return False


def _exported_from(export: Path, report: Path) -> bool:
    """Whether ``export`` is nsysscope's export of ``report`` as it is now: it carries the
    report's modification time (:func:`_exported` sets it). Newer-than was not enough: a
    report replaced by another capture with an older time kept the first one's export."""
    try:
        return export.is_file() and export.stat().st_mtime_ns == report.stat().st_mtime_ns
    except OSError:
        return False


def _nsys_version(nsys: str) -> str:
    try:
        out = subprocess.run([nsys, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    m = re.search(r"(\d{4}\.\d+(?:\.\d+)*)", out.stdout + out.stderr)
    return m.group(1) if m else "unknown"


_VERSION_IN_REPORT = (
    # the header of nsys <= 2024: "NVIDIA Tegra Profiler Report 2023@4@4@54-2344336..."
    re.compile(rb"Profiler Report (20\d\d)@(\d+)@(\d+)(?:@(\d+))?"),
    # the trailer of newer reports: a length-prefixed "2025.3.1.0" (four parts)
    re.compile(rb"[\x08-\x20](20\d\d)\.(\d+)\.(\d+)\.(\d+)(?![\d.])"),
    # anything that looks like an nsys version, e.g. in its install path
    re.compile(rb"(20\d\d)\.(\d+)\.(\d+)(?:\.(\d+))?"),
)


def report_version(report: Path) -> str | None:
    """The nsys version that wrote a ``.nsys-rep``, when the report names it."""
    try:
        size = report.stat().st_size
        with report.open("rb") as f:
            head = f.read(1 << 16)
            f.seek(max(0, size - (1 << 16)))
            tail = f.read()
    except OSError:
        return None
    for pattern in _VERSION_IN_REPORT:
        for blob in (head, tail):
            m = pattern.search(blob)
            if m:
                parts = [g.decode() for g in m.groups() if g is not None]
                return ".".join(parts[:3])
    return None


def _version_tuple(v: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v or "")[:3])


def _users_export(report: Path) -> Path | None:
    """``NAME.sqlite`` beside ``NAME.nsys-rep``, when it is an SQLite file newer than the
    report (an export the user or ``nsys stats`` made)."""
    own = report.with_name(_stem(report) + ".sqlite")
    if not _fresh(own, report):
        return None
    try:
        with own.open("rb") as f:
            if f.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                return None
    except OSError:
        return None
    return own


def _exported(report: Path, nsys: str | None) -> Path:
    stem = _stem(report)
    own = _users_export(report)
    if own is not None:
        note(f"reading {own.name}, the export beside {report.name} (newer than the report)")
        return own
    beside = report.with_name(stem + CACHE_SUFFIX)
    cached = cache_dir() / f"{stem}-{_fingerprint(report)}.sqlite"
    if not cache_disabled():
        if _exported_from(beside, report):
            return beside
        if _exported_from(cached, report):
            touch(cached)
            return cached
    try:
        exe = find_nsys(nsys, report)
    except NsysUnavailable as e:
        older = report.with_name(stem + ".sqlite")
        if older.is_file():
            raise NsysUnavailable(f"{e} ({older.name} beside it is older than the report, so "
                                  "it was not used; pass it directly if it is this "
                                  "capture's export)") from None
        raise
    try:
        if cache_disabled():
            raise OSError("--no-cache")
        target, tmp = beside, _temp_beside(beside)
    except OSError:  # a read-only folder (or one we may not write): the user cache folder
        target = _cache_folder() / cached.name
        tmp = _cache_temp(target)
    tmp.unlink()  # nsys creates the file itself
    try:
        try:
            proc = subprocess.run(
                [exe, "export", "--type", "sqlite", "--force-overwrite", "true",
                 *_json_flags(exe), "-o", str(tmp), str(report)],
                capture_output=True, text=True, stdin=subprocess.DEVNULL)
        except OSError as e:
            raise NsysUnavailable(
                f"cannot run nsys at {exe}: {e.strerror or e}; {_NO_NSYS}") from None
        if proc.returncode != 0 or not tmp.is_file():
            raise _export_error(report, exe, proc.stdout + proc.stderr)
        with tmp.open("rb") as f:
            if f.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                raise _export_error(report, exe, "the exported file is not SQLite")
        cut = truncation(tmp)
        if cut:  # never kept to be reused: the next run exports again
            raise _export_error(report, exe, f"the exported file is truncated ({cut})")
        made = report.stat().st_mtime_ns
        os.utime(tmp, ns=(time.time_ns(), made))  # what _exported_from recognises
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    if target.parent == cache_dir():
        evict(keep=target)
    return target


@functools.lru_cache(maxsize=8)
def _json_flags(exe: str) -> tuple[str, ...]:
    """``--include-json true`` where this nsys has it (2024+): it keeps the Python-sampling
    stacks, which are NVTX JSON payloads, in the export."""
    try:
        help_text = subprocess.run([exe, "export", "--help"], capture_output=True, text=True,
                                   stdin=subprocess.DEVNULL, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return ("--include-json", "true") if "include-json" in help_text else ()


def _export_error(report: Path, exe: str, output: str) -> Exception:
    lines = [line.strip() for line in re.split(r"[\r\n]+", output) if line.strip()]
    lines = [line for line in lines if not line.startswith("Processing ")]  # progress bars
    detail = next((line for line in reversed(lines) if "error" in line.lower()),
                  lines[-1] if lines else "")
    have, made_by = _nsys_version(exe), report_version(report)
    if have == "unknown":
        return NsysUnavailable(
            f"{report}: {exe} does not look like nsys ('{Path(exe).name} --version' names no "
            f"nsys version, and its export wrote no SQLite file); {_NO_NSYS}")
    newer = bool(made_by) and _version_tuple(made_by) > _version_tuple(have)
    unparsable = re.search(r"protobuf|newer version|not supported|unsupported", output, re.I) \
        and "Version tag is not found" not in output
    if newer or unparsable:
        made = f"nsys {made_by}" if made_by else "a newer nsys"
        return NsysUnavailable(
            f"{report}: nsys {have} cannot read this report (made by {made}); export it with "
            f"nsys {made_by or 'of that version'} or newer: nsys export --type sqlite "
            f"{report.name}, and pass the .sqlite")
    return UnreadableInput(f"{report}: nsys export failed: {detail[:300] or 'no output'}")
