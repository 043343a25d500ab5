"""One function over a few items at once, in processes forked from this one.

A child made by ``fork`` starts with this process's memory as it is (copy-on-write): the
inputs of the work, a trace of millions of rows, are not copied or pickled, only each
child's result comes back, as a pickle in a file. The first item is worked on here
meanwhile, so ``n`` items keep ``n`` CPUs busy.

Where the OS cannot fork (Windows; macOS, where forking a process that has loaded system
frameworks is unsafe), the items are worked on here, one after the other.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import BinaryIO, TypeVar

#: a memory file system, where Linux has one, for the children's results
_SHM = "/dev/shm"

T = TypeVar("T")
R = TypeVar("R")


def can_fork() -> bool:
    return hasattr(os, "fork") and sys.platform.startswith("linux")


class ChildDied(RuntimeError):
    """A worker process ended without sending its result."""


def map_forked(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``[fn(x) for x in items]``, each item but the first in a child process. An exception
    of ``fn`` in a child is raised here (the first item's first); a child that dies without
    a result (killed, out of memory) is a :class:`ChildDied`. On any error, or Ctrl-C, every
    child still running is killed."""
    if len(items) < 2 or not can_fork():
        return [fn(x) for x in items]
    # each child's pid, the file of its result and the pipe that says the file is written
    children: list[tuple[int, BinaryIO, int]] = []
    running: set[int] = set()  # the children not reaped yet
    try:
        for item in items[1:]:
            child = _fork(fn, item)
            children.append(child)
            running.add(child[0])
        results = [fn(items[0])]
        for pid, out, written in children:
            if not os.read(written, 1):  # the child ended without writing its result
                _, status = os.waitpid(pid, 0)
                running.discard(pid)
                raise ChildDied(f"a worker process ended without a result ({_how(status)})")
            # the result is in its file: take it, and let the child end (freeing its
            # memory) while this process goes on
            out.seek(0)
            payload = out.read()
            _reap_later(pid)
            running.discard(pid)
            results.append(_result(payload))
        return results
    finally:
        for pid in running:  # an error or Ctrl-C came first: stop the rest
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        for _, out, written in children:
            out.close()
            os.close(written)


def imap_forked(fn: Callable[[T], R], items: Sequence[T], processes: int) -> Iterator[R]:
    """``fn(x)`` for each of ``items``, in order, each in a child process, ``processes`` of
    them at once: a child that ends starts the next item, so a slow item holds up no core,
    and no more than ``2 * processes`` results wait to be taken (each in its file) behind
    the next one due. This process only takes the results, as they come due, and works on
    each meanwhile (the caller's loop). Errors, a child that dies and Ctrl-C, or the caller
    leaving the loop, are as :func:`map_forked`'s: every child still running is killed."""
    if processes < 2 or len(items) < 2 or not can_fork():
        yield from (fn(x) for x in items)
        return
    started: dict[int, tuple[int, BinaryIO, int]] = {}  # item -> pid, result file, pipe
    running: dict[int, int] = {}  # pipe -> item, of the children not done yet
    done: set[int] = set()
    try:
        for due in range(len(items)):
            while due not in done:
                while len(running) < processes and len(started) < len(items) and \
                        len(started) - due < 2 * processes:
                    i = len(started)
                    started[i] = _fork(fn, items[i])
                    running[started[i][2]] = i
                for fd in _ready(list(running)):
                    i = running.pop(fd)
                    pid = started[i][0]
                    if not os.read(fd, 1):  # the child ended without writing its result
                        _, status = os.waitpid(pid, 0)
                        started[i] = (0, started[i][1], fd)
                        raise ChildDied(f"a worker process ended without a result "
                                        f"({_how(status)})")
                    _reap_later(pid)
                    done.add(i)
            pid, out, fd = started[due]
            out.seek(0)
            payload = out.read()
            out.close()
            os.close(fd)
            started[due] = (0, out, -1)
            yield _result(payload)
    finally:
        for i in running.values():  # an error, Ctrl-C or the caller left: stop the rest
            with contextlib.suppress(OSError):
                os.kill(started[i][0], signal.SIGKILL)
                os.waitpid(started[i][0], 0)
        for _, out, fd in started.values():
            if fd >= 0:
                out.close()
                os.close(fd)


def _ready(fds: list[int]) -> list[int]:
    """Those of ``fds`` (pipes) that can be read now, waiting for at least one."""
    poll = select.poll()
    for fd in fds:
        poll.register(fd, select.POLLIN | select.POLLHUP)
    return [fd for fd, _ in poll.poll()]


def _fork(fn: Callable[[T], R], item: T) -> tuple[int, BinaryIO, int]:
    """A child working on ``item``: its pid, the file its result comes in, and the read end
    of a pipe on which it says the result is written (one byte, before it exits: a process
    holding a large trace takes a tenth of a second to end). A file, not the pipe itself: a
    pipe's 64 KB made the child wait for this process, still busy with its own item, then
    pass tens of megabytes through in small pieces. The file has no name (only the two
    processes hold it) and is in memory where the OS has a memory file system."""
    out = tempfile.TemporaryFile(dir=_SHM if os.path.isdir(_SHM) else None)  # noqa: SIM115
    # (closed by map_forked, once read)
    read, write = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write)
        return pid, out, read
    # the child: Ctrl-C and SIGTERM are the parent's to handle (it kills the children)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.close(read)
    try:
        payload = pickle.dumps((True, fn(item)), protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException as e:  # noqa: BLE001 - every error goes to the parent
        try:
            payload = pickle.dumps((False, e))
        except Exception:  # noqa: BLE001 - an exception that does not pickle
            payload = pickle.dumps((False, RuntimeError(f"{type(e).__name__}: {e}")))
    with contextlib.suppress(OSError):  # no room for it: the parent says the child died
        out.write(payload)
        out.flush()
        os.write(write, b"1")
    # no clean-up of the parent's (atexit, temporary files, buffered output): it is the
    # parent's own
    os._exit(0)


def _result(payload: bytes) -> R:  # type: ignore[type-var]
    """What a child sent (raised, if it is an error)."""
    ok, value = pickle.loads(payload)
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


def _reap_later(pid: int) -> None:
    """Collect a child's exit on a thread of its own: no one waits for it to end, and none
    is left a zombie."""
    threading.Thread(target=_reap, args=(pid,), name="nsysscope-reap", daemon=True).start()


def _reap(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.waitpid(pid, 0)


def _how(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return f"killed by signal {sig}" + (", out of memory?" if sig == signal.SIGKILL else "")
    return f"exit status {os.waitstatus_to_exitcode(status)}"
