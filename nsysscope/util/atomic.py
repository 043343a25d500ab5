"""Writing an output file whole or not at all, as the shell's ``>`` would name it.

Every file nsysscope writes (reports, summaries, the gate's files, per-launch tables,
timelines, scrubbed copies) goes to a temporary file in the destination's folder and is renamed
over the destination only once complete: a full disk, a Ctrl-C or a crash leaves the old file
(or none), never half a report that a CI step would then read.

Two kinds of destination are not replaced:

* a symbolic link is written through, to the file it names (``ln -s run7.html latest.html``
  keeps pointing at the new report), as ``>`` does; replacing the link itself turned
  ``/dev/stdout`` into a regular file for the whole machine;
* a destination that exists and is not a regular file (``/dev/stdout``, ``/dev/null``, a named
  pipe) cannot be renamed over: it is written in place, as a stream.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


def target(path: str | os.PathLike[str]) -> Path:
    """The file that writing ``path`` changes: a symbolic link's target, else ``path``."""
    p = Path(path)
    return Path(os.path.realpath(p)) if p.is_symlink() else p


def is_stream(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` exists and is not a regular file (a device, a pipe), or is one of the
    system's names for an open file (``/dev/stdout``, ``/proc/self/fd/1``, a link to one),
    even when the shell sent it to a file: written in place, never replaced."""
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
    except OSError:  # missing (or unreadable: the write says why)
        return False
    return not regular or _names_an_open_file(os.path.abspath(path))


def _names_an_open_file(path: str) -> bool:
    """Whether ``path``, or a link on the way to what it names, is under ``/dev`` or
    ``/proc``."""
    for _ in range(40):  # the kernel's own limit on links followed
        if path.startswith(("/dev/", "/proc/")):
            return True
        if not os.path.islink(path):
            return False
        path = os.path.abspath(os.path.join(os.path.dirname(path), os.readlink(path)))
    return False


def temp_beside(final: Path) -> Path:
    """A fresh, empty temporary file in ``final``'s folder, hidden, with the mode a new file
    (or ``final``, when it exists) would have: rename it onto ``final`` when complete
    (:func:`replace`). Raises OSError when the folder cannot be written."""
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    try:
        os.fchmod(fd, _mode_for(final))
    finally:
        os.close(fd)
    return Path(tmp)


def replace(tmp: Path, final: Path) -> None:
    """Move the complete ``tmp`` onto ``final``, durably (the data, then the folder entry)."""
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, final)
    try:
        fd = os.open(final.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems cannot sync a folder
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """A binary file to write ``path``'s new content to; it becomes ``path`` when the block
    ends without an exception, and is removed otherwise (see the module's docstring for links
    and streams). Raises OSError when the folder cannot be written."""
    if is_stream(path):
        with open(path, "wb") as f:
            yield f
        return
    final = target(path)
    tmp = temp_beside(final)
    try:
        with open(tmp, "wb") as f:
            yield f
        replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _mode_for(final: Path) -> int:
    """``final``'s permission bits when it exists, else those of a new file under the umask."""
    try:
        return stat.S_IMODE(os.stat(final).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
