"""``.nsys-rep`` input: find nsys, export the report to SQLite once, and reuse that export while
it is the report's (or an export the user made beside it), or say in one line why not (no
nsys, an nsys too old for the report, a report it cannot read).

nsys comes from ``--nsys``, ``$NSYS`` or ``PATH``. The export is written beside the report as
``NAME.nsysscope-cache.sqlite`` when that folder can be written, else into the user cache
folder, and carries the report's modification time, size and fingerprint (a table of its
own, :data:`STAMP_TABLE`): a report replaced by another capture (even an older file, as ``cp
-p`` or ``rsync -a`` leave it, or one given the same time with ``touch -r``) is exported
again. An export the user made already, ``NAME.sqlite`` beside ``NAME.nsys-rep`` (what ``nsys
export`` and ``nsys stats`` write), is read instead when it is newer than the report, with a
note saying so.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

from ...errors import NsysUnavailable, UnreadableInput
from ...util.atomic import temp_beside
from ...util.progress import note
from ..cache import CACHE_SUFFIX, cache_dir, cache_disabled, entry_mac, evict, touch
from ..files import (
    SQLITE_MAGIC,
    cache_entry,
    cache_folder,
    cache_temp,
    content_fingerprint,
    file_ends,
    sqlite_uri,
    stem,
)
from .schema import is_whole, truncation


def _no_nsys(report: Path | None) -> str:
    """What to do without a working nsys: the export command, for ``report`` when known (a
    command to paste, not a template)."""
    src, dst = (shlex.quote(str(report)), shlex.quote(str(report.with_name(
        stem(report) + ".sqlite")))) if report else ("TRACE.nsys-rep", "TRACE.sqlite")
    return ("install Nsight Systems (https://developer.nvidia.com/nsight-systems; Debian: "
            "package nsight-systems in non-free), or export it where nsys is and pass the "
            f".sqlite: nsys export --type sqlite -o {dst} {src}")


def find_nsys(explicit: str | None = None, report: Path | None = None) -> str:
    """The nsys executable: the argument, ``$NSYS``, or ``nsys`` on PATH."""
    try:
        return _find_nsys(explicit, report)
    except NsysUnavailable as e:
        if report is None:
            raise
        raise NsysUnavailable(f"{report}: {e}") from None


def _find_nsys(explicit: str | None, report: Path | None) -> str:
    if explicit or os.environ.get("NSYS"):
        candidate = explicit or os.environ["NSYS"]
        where = "--nsys" if explicit else "$NSYS"
        found = shutil.which(candidate)
        if found:
            return found
        if Path(candidate).is_file():
            raise NsysUnavailable(f"{where}={candidate} is not executable; {_no_nsys(report)}")
        if Path(candidate).is_dir():
            raise NsysUnavailable(f"{where}={candidate} is a folder; name the nsys program in "
                                  f"it (its bin/nsys), or {_no_nsys(report)}")
        raise NsysUnavailable(f"{where}={candidate}: no such program; {_no_nsys(report)}")
    found = shutil.which("nsys")
    if found:
        return found
    raise NsysUnavailable(f"reading a .nsys-rep needs nsys, and none was found (--nsys, "
                          f"$NSYS or PATH): {_no_nsys(report)}")


def _fresh(cache: Path, report: Path) -> bool:
    """Whether ``cache`` was written after ``report`` (a file the user made)."""
    try:
        return cache.is_file() and cache.stat().st_mtime_ns >= report.stat().st_mtime_ns
    except OSError:
        return False


def _exported_from(export: Path, report: Path, cached: bool = False) -> bool:
    """Whether ``export`` is nsysscope's export of ``report`` as it is now: it carries the
    report's modification time (:func:`exported` sets it) and holds the report's size and
    fingerprint (:func:`stamp`). Newer-than was not enough: a report replaced by another
    capture with an older time kept the first one's export; nor was the same time: one given
    it (``cp -p`` of another report, ``touch -r``) was analysed as the first. An export of an
    nsysscope that stamped none is made again. ``cached``: an export in the cache folder,
    whose stamp is keyed (:func:`made_from`)."""
    try:
        if not (export.is_file() and
                export.stat().st_mtime_ns == report.stat().st_mtime_ns):
            return False
        return stamp_of(export) == made_from(report, cached)
    except OSError:
        return False


#: the table nsysscope adds to its export of a report: the report's size and fingerprint
STAMP_TABLE = "NSYSSCOPE_EXPORTED_FROM"

def made_from(source: Path, cached: bool) -> tuple[int, bytes]:
    """What a file made from ``source`` is stamped with: its size and fingerprint
    (:func:`~nsysscope.trace.files.content_fingerprint`); in the cache folder the
    fingerprint keyed with this user's key (:func:`~nsysscope.trace.cache.entry_mac`), so
    that an entry of a cache shared or restored from elsewhere is not taken for the trace's.
    Raises OSError."""
    size, digest = content_fingerprint(source)
    return size, entry_mac(digest) if cached else digest


def stamp(export: Path, made_from: tuple[int, bytes]) -> None:
    """Write the size and fingerprint of the report ``export`` was made from into it, a
    table of its own (:data:`STAMP_TABLE`), before it is renamed into place: nsysscope's own
    file, never an input. Raises sqlite3.Error."""
    conn = sqlite3.connect(sqlite_uri(export, "mode=rw"), uri=True)
    try:
        conn.execute("PRAGMA journal_mode = OFF")  # no journal beside it: a temporary file,
        # thrown away if this fails
        conn.execute(f"CREATE TABLE {STAMP_TABLE} (size INTEGER NOT NULL, "
                     "sha256 BLOB NOT NULL)")
        conn.execute(f"INSERT INTO {STAMP_TABLE} VALUES (?, ?)", made_from)
        conn.commit()
    finally:
        conn.close()


def stamp_of(export: Path) -> tuple[int, bytes] | None:
    """The report size and fingerprint :func:`stamp` wrote into ``export``, or None (an
    export of an older nsysscope, or a file SQLite cannot read)."""
    try:
        conn = sqlite3.connect(sqlite_uri(export, "mode=ro&immutable=1"), uri=True)
    except sqlite3.Error:
        return None
    try:
        row = conn.execute(f"SELECT size, sha256 FROM {STAMP_TABLE}").fetchone()
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    return (row[0], row[1]) if row else None


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
        _size, head, tail = file_ends(report)
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
    own = report.with_name(stem(report) + ".sqlite")
    if not _fresh(own, report):
        return None
    try:
        with own.open("rb") as f:
            if f.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                return None
    except OSError:
        return None
    return own


def exported(report: Path, nsys: str | None) -> Path:
    name = stem(report)
    own = _users_export(report)
    if own is not None:
        note(f"reading {own.name}, the export beside {report.name} (newer than the report)")
        return own
    beside = report.with_name(name + CACHE_SUFFIX)
    cached = cache_entry(report)
    if not cache_disabled():
        if _exported_from(beside, report) and is_whole(beside):
            return beside
        if _exported_from(cached, report, cached=True) and is_whole(cached):
            touch(cached)
            return cached
    try:
        return _export(report, find_nsys(nsys, report), beside, cached)
    except NsysUnavailable as e:
        unstamped = None if cache_disabled() else _unstamped_export(report, beside, cached)
        if unstamped is not None:
            note(f"reading {unstamped.name}, the export an earlier nsysscope made of "
                 f"{report.name}: it has the report's time but no fingerprint to check it "
                 "by, and no nsys here can export the report again")
            return unstamped
        older = report.with_name(name + ".sqlite")
        if older.is_file():
            raise NsysUnavailable(f"{e} ({older.name} beside it is older than the report, so "
                                  "it was not used; pass it directly if it is this "
                                  "capture's export)") from None
        raise


def _unstamped_export(report: Path, *exports: Path) -> Path | None:
    """The first of ``exports`` that an nsysscope before :data:`STAMP_TABLE` made of
    ``report``: whole, with the report's modification time and no stamp. Where nsys can run
    such an export is made again (the time alone took a ``cp -p`` of another capture for
    this one); where it cannot, it is read, with a note, rather than refusing a report that
    was read before."""
    for export in exports:
        try:
            same_time = export.stat().st_mtime_ns == report.stat().st_mtime_ns
        except OSError:
            continue
        if same_time and stamp_of(export) is None and is_whole(export):
            return export
    return None


def _export(report: Path, exe: str, beside: Path, cached: Path) -> Path:
    """Export ``report`` with ``exe`` to ``beside``, or to ``cached`` in the user cache folder
    where that folder cannot be written, stamped as :func:`_exported_from` recognises it.
    Raises NsysUnavailable (nsys cannot run or read this report) or UnreadableInput."""
    try:
        if cache_disabled():
            raise OSError("--no-cache")
        target, tmp = beside, temp_beside(beside, 0o600)  # the report's data, as the cache's
    except OSError:  # a read-only folder (or one we may not write): the user cache folder
        target = cache_folder() / cached.name
        tmp = cache_temp(target)
    tmp.unlink()  # nsys creates the file itself
    try:
        # taken before nsys reads the report: one replaced meanwhile does not match its
        # export, and is exported again by the next run
        made, source = report.stat().st_mtime_ns, made_from(report, target != beside)
        try:
            proc = subprocess.run(
                [exe, "export", "--type", "sqlite", "--force-overwrite", "true",
                 *_json_flags(exe), "-o", str(tmp), str(report)],
                capture_output=True, text=True, stdin=subprocess.DEVNULL)
        except OSError as e:
            raise NsysUnavailable(
                f"cannot run nsys at {exe}: {e.strerror or e}; {_no_nsys(report)}") from None
        if proc.returncode != 0 or not tmp.is_file():
            raise _export_error(report, exe, proc.stdout + proc.stderr)
        with tmp.open("rb") as f:
            if f.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                raise _export_error(report, exe, "the exported file is not SQLite")
        cut = truncation(tmp)
        if cut:  # never kept to be reused: the next run exports again
            raise _export_error(report, exe, f"the exported file is truncated ({cut})")
        try:
            stamp(tmp, source)
        except sqlite3.Error as e:
            raise _export_error(report, exe, f"the exported file cannot be stamped ({e})") \
                from None
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
            f"nsys version, and its export wrote no SQLite file); {_no_nsys(report)}")
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
