"""Turn whatever the user points at into a readable SQLite export, without touching it.

``.sqlite`` is used as is. ``.sqlite.xz`` / ``.sqlite.gz`` are decompressed once into the user
cache folder. ``.nsys-rep`` is exported with ``nsys export --type sqlite`` (nsys from ``$NSYS``
or ``PATH``) next to the report when that folder is writable, else into the user cache folder,
and reused while it is newer than the report. Every cache file is written to a temporary name
and renamed into place, so concurrent runs never see a torn file.
"""

from __future__ import annotations

import gzip
import hashlib
import lzma
import os
import re
import shutil
import subprocess
import tempfile
import zlib
from pathlib import Path

from ..errors import NsysUnavailable, UnreadableInput

SQLITE_MAGIC = b"SQLite format 3\x00"
CACHE_SUFFIX = ".nsysscope-cache.sqlite"


def cache_dir() -> Path:
    """``$NSYSSCOPE_CACHE``, else ``$XDG_CACHE_HOME/nsysscope``, else ``~/.cache/nsysscope``."""
    if os.environ.get("NSYSSCOPE_CACHE"):
        return Path(os.environ["NSYSSCOPE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "nsysscope"


def resolve(path: str | os.PathLike, nsys: str | None = None) -> Path:
    """A path to an SQLite export holding the trace ``path`` refers to."""
    p = Path(path)
    _check_readable(p)
    name = p.name.lower()
    if name.endswith((".xz", ".gz")):
        return _decompressed(p)
    if name.endswith(".nsys-rep"):
        return _exported(p, nsys)
    with p.open("rb") as f:
        head = f.read(len(SQLITE_MAGIC))
    if head != SQLITE_MAGIC:
        raise UnreadableInput(f"{p}: not an SQLite file (nsysscope reads .sqlite, .sqlite.xz, "
                              ".sqlite.gz and .nsys-rep)")
    return p


def _check_readable(p: Path) -> None:
    if not p.exists():
        raise UnreadableInput(f"{p}: no such file")
    if p.is_dir():
        raise UnreadableInput(f"{p}: is a directory, not a trace file")
    if not os.access(p, os.R_OK):
        raise UnreadableInput(f"{p}: permission denied")
    if p.stat().st_size == 0:
        raise UnreadableInput(f"{p}: empty file")


def _fingerprint(p: Path) -> str:
    st = p.stat()
    key = f"{p.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()
    return hashlib.sha256(key).hexdigest()[:16]


def _atomic_target(final: Path) -> Path:
    """A fresh temporary path beside ``final``: rename it onto ``final`` when complete."""
    fd, tmp = tempfile.mkstemp(prefix=final.name + ".", suffix=".tmp", dir=final.parent)
    os.close(fd)
    return Path(tmp)


def _decompressed(p: Path) -> Path:
    stem = re.sub(r"\.(xz|gz)$", "", p.name, flags=re.I)
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"{Path(stem).stem}-{_fingerprint(p)}.sqlite"
    if final.exists():
        return final
    opener = lzma.open if p.name.lower().endswith(".xz") else gzip.open
    tmp = _atomic_target(final)
    try:
        with opener(p, "rb") as src, tmp.open("wb") as dst:
            shutil.copyfileobj(src, dst, length=1 << 22)
        with tmp.open("rb") as f:
            if f.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                raise UnreadableInput(f"{p}: decompresses, but not to an SQLite file")
        os.replace(tmp, final)
    except (lzma.LZMAError, EOFError, OSError, zlib.error, gzip.BadGzipFile) as e:
        raise UnreadableInput(f"{p}: corrupt or truncated compressed file ({e})") from None
    finally:
        tmp.unlink(missing_ok=True)
    return final


# -- .nsys-rep -------------------------------------------------------------------------------

def find_nsys(explicit: str | None = None) -> str:
    """The nsys executable: the argument, ``$NSYS``, or ``nsys`` on PATH."""
    candidate = explicit or os.environ.get("NSYS") or shutil.which("nsys")
    if candidate and (shutil.which(candidate) or Path(candidate).is_file()):
        return candidate
    raise NsysUnavailable(
        "reading a .nsys-rep needs nsys, and none was found ($NSYS or PATH): install Nsight "
        "Systems (Debian: package nsight-systems, non-free), or export by hand with "
        "'nsys export --type sqlite -o TRACE.sqlite TRACE.nsys-rep' and pass the .sqlite")


def _export_target(report: Path) -> Path:
    beside = report.with_name(report.name[: -len(".nsys-rep")] + CACHE_SUFFIX)
    if os.access(report.parent, os.W_OK):
        return beside
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{report.name[: -len('.nsys-rep')]}-{_fingerprint(report)}.sqlite"


def _nsys_version(nsys: str) -> str:
    try:
        out = subprocess.run([nsys, "--version"], capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise NsysUnavailable(f"cannot run nsys at {nsys}: {e}") from None
    m = re.search(r"(\d{4}\.\d+(?:\.\d+)*)", out.stdout + out.stderr)
    return m.group(1) if m else "unknown"


def report_version(report: Path) -> str | None:
    """The nsys version that wrote a ``.nsys-rep``, when its header names one."""
    with report.open("rb") as f:
        head = f.read(1 << 16)
    m = re.search(rb"(20\d\d\.\d+\.\d+(?:\.\d+)?)", head)
    return m.group(1).decode() if m else None


def _exported(report: Path, nsys: str | None) -> Path:
    target = _export_target(report)
    if target.exists() and target.stat().st_mtime_ns > report.stat().st_mtime_ns:
        return target
    exe = find_nsys(nsys)
    tmp = _atomic_target(target)
    tmp.unlink()  # nsys refuses to overwrite; it creates the file itself
    try:
        proc = subprocess.run(
            [exe, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(tmp),
             str(report)], capture_output=True, text=True)
        if proc.returncode != 0 or not tmp.exists():
            raise _export_error(report, exe, proc.stdout + proc.stderr)
        with tmp.open("rb") as f:
            if f.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                raise _export_error(report, exe, "output is not SQLite")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _export_error(report: Path, exe: str, output: str) -> Exception:
    lines = [l.strip() for l in output.splitlines() if l.strip()]
    detail = next((l for l in reversed(lines) if "error" in l.lower()), lines[-1] if lines else "")
    if re.search(r"Protobuf|newer|not supported|version", output, re.I) and \
            "Version tag is not found" not in output:
        made_by = report_version(report) or "a newer nsys"
        return NsysUnavailable(
            f"{report}: nsys {_nsys_version(exe)} cannot read this report (made by nsys "
            f"{made_by}); export it with that nsys or newer: nsys export --type sqlite {report.name}")
    return UnreadableInput(f"{report}: nsys export failed: {detail[:300]}")
