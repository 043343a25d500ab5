"""Writing an output file whole or not at all, as the shell's ``>`` would name it.

Every file nsysscope writes (reports, summaries, the gate's files, per-launch tables,
timelines, scrubbed copies, cache entries) goes to a temporary file in the destination's
folder and is renamed over the destination only once complete: a full disk, a Ctrl-C or a
crash leaves the old file (or none), never half a report that a CI step would then read.

What is not replaced:

* a symbolic link is written through, to the file it names (``ln -s run7.html latest.html``
  keeps pointing at the new report), as ``>`` does; replacing the link itself turned
  ``/dev/stdout`` into a regular file for the whole machine;
* an open file's name (``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``) is written
  through that open file, at its offset: reopening it would truncate what the shell already
  wrote there (``{ echo header; nsysscope report T -o /dev/stdout; } > log``);
* a device or a named pipe cannot be renamed over: it is written in place;
* a file in a folder nsysscope may not write, but that it may write itself, is written in
  place, as before this module.
"""

from __future__ import annotations

import errno
import glob
import os
import re
import secrets
import stat
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

#: names of an open file of this process: /dev/stdout, /dev/fd/3, /proc/self/fd/1, /proc/PID/fd/1
_FD_NAME = re.compile(r"/dev/(?:std(?:in|out|err)|fd/\d+)|/proc/(?:self|\d+)/fd/\d+")
_STD_FDS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def target(path: str | os.PathLike[str]) -> Path:
    """The file that writing ``path`` changes: a symbolic link's target (which need not exist
    yet), else ``path``. A loop of links is an OSError, as for the shell."""
    p = Path(path)
    if not p.is_symlink():
        return p
    try:
        return Path(os.path.realpath(p, strict=True))
    except FileNotFoundError:  # a link to a file still to be made
        return Path(os.path.realpath(p))


def is_stream(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is written in place: an open file's name (``/dev/stdout``...), or an
    existing device, pipe or socket."""
    return _own_fd(path) is not None or _is_special(path)


def writes_in_place(path: str | os.PathLike[str]) -> bool:
    """Whether writing ``path`` goes to an open stream of this process (``/dev/stdout``,
    ``/dev/fd/3``) or a character device (``/dev/null``, a terminal): what an output option
    may name besides a file (not a pipe, which would wait for a reader, nor a disk)."""
    if _own_fd(path) is not None:
        return True
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except OSError:
        return False


def _is_special(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` exists and is not a regular file (a device, a pipe, a socket)."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:  # missing (or unreachable: the write says why)
        return False


def _own_fd(path: str | os.PathLike[str]) -> int | None:
    """The descriptor of this process that ``path`` names (``/dev/stdout``: 1), itself or
    through links (``out -> /proc/self/fd/1``), or None."""
    name = os.path.abspath(path)
    for _ in range(40):  # the kernel's limit on links followed
        if name in _STD_FDS:
            return _STD_FDS[name]
        if _FD_NAME.fullmatch(name) and (not name.startswith("/proc/") or
                                         name.split("/")[2] in ("self", str(os.getpid()))):
            return int(name.rsplit("/", 1)[1])
        if not os.path.islink(name):
            return None
        name = os.path.abspath(os.path.join(os.path.dirname(name), os.readlink(name)))
    return None


#: a temporary file untouched this long is a dead run's (a live one writes to it all the time)
DEAD_AFTER_S = 600


def temp_beside(final: Path, mode: int = 0o666) -> Path:
    """A fresh, empty temporary file in ``final``'s folder, hidden, created with ``mode`` less
    the umask (the system applies it, as for any new file; a cache entry asks for 0o600):
    rename it onto ``final`` when complete (:func:`replace`). Raises OSError when the folder
    cannot be written. The temporaries of ``final`` that dead runs left go first."""
    _remove_dead_temporaries(final)
    for _ in range(100):
        tmp = final.with_name(f"{_hidden(final)}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        except FileExistsError:
            continue
        os.close(fd)
        return tmp
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(final.parent))


def _hidden(final: Path) -> str:
    """The start of each temporary name of ``final``: its name's own part cut short (NAME_MAX
    is 255 bytes, and the rest takes 14)."""
    return f".{final.name[:200]}"


def _remove_dead_temporaries(final: Path) -> None:
    """Remove the temporaries of ``final`` untouched for :data:`DEAD_AFTER_S`: those of runs
    killed while they wrote it (SIGKILL, a lost machine). A run's clean-up removes its own,
    but nothing removed these: a dead export of a report stayed beside it, hidden, for good."""
    dead = time.time() - DEAD_AFTER_S
    for tmp in final.parent.glob(f"{glob.escape(_hidden(final))}.{'[0-9a-f]' * 8}.tmp"):
        with suppress(OSError):  # gone already, or not ours to remove
            st = tmp.stat()  # ctime too: a writer may set the mtime back before it renames
            if max(st.st_mtime, st.st_ctime) < dead:
                tmp.unlink()


def replace(tmp: Path, final: Path, synced: bool = False) -> None:
    """Move the complete ``tmp`` onto ``final``, durably: its data (unless ``synced``), then
    the folder entry."""
    if not synced:
        _sync(tmp)
    os.replace(tmp, final)
    try:
        fd = os.open(final.parent, os.O_RDONLY)
    except OSError:  # not every platform opens a folder
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems cannot sync a folder
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """A binary file to write ``path``'s new content to; it becomes ``path`` (with the
    permissions ``path`` had) when the block ends without an exception, and is removed
    otherwise (see the module's docstring for links, open files, devices and folders that
    cannot be written). Raises OSError when ``path`` cannot be written."""
    fd = _own_fd(path)
    if fd is not None:  # through the open file, at its offset
        if fd == 1 and sys.stdout is not None:
            sys.stdout.flush()  # what was printed before comes first
        with os.fdopen(os.dup(fd), "wb") as f:
            yield f
        return
    if _is_special(path):
        with open(path, "wb") as f:
            yield f
        return
    final = target(path)
    try:
        tmp = temp_beside(final)
    except PermissionError:  # a folder it may not write, holding a file it may
        if not (final.is_file() and os.access(final, os.W_OK)):
            raise
        with open(final, "wb") as f:
            yield f
        return
    try:
        with open(tmp, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        keep = _mode_of(final)
        if keep is not None:
            os.chmod(tmp, keep)
        replace(tmp, final, synced=True)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _sync(path: Path) -> None:
    """Flush ``path``'s data to disk, opening it for writing only (a file written with mode
    0o200 cannot be opened for reading)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _mode_of(final: Path) -> int | None:
    """``final``'s permission bits when it exists, else None."""
    try:
        return stat.S_IMODE(os.stat(final).st_mode)
    except OSError:
        return None
