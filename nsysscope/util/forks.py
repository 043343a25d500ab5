"""One function over a few items at once, in processes forked from this one.

A child made by ``fork`` starts with this process's memory as it is (copy-on-write): the
inputs of the work, a trace of millions of rows, are not copied or pickled, only each
child's result comes back through a pipe. The first item is worked on here meanwhile, so
``n`` items keep ``n`` CPUs busy.

Where the OS cannot fork (Windows; macOS, where forking a process that has loaded system
frameworks is unsafe), the items are worked on here, one after the other.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def can_fork() -> bool:
    return hasattr(os, "fork") and sys.platform.startswith("linux")


def map_forked(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``[fn(x) for x in items]``, each item but the first in a child process. An exception
    of ``fn`` in a child is raised here (the first item's first); a child that dies without
    a result (killed, out of memory) is a :class:`ChildDied`. On any error, or Ctrl-C, every
    child still running is killed."""
    if len(items) < 2 or not can_fork():
        return [fn(x) for x in items]
    children: list[tuple[int, int]] = []  # pid and the read end of its pipe
    running: set[int] = set()  # the children not reaped yet
    try:
        for item in items[1:]:
            pid, fd = _fork(fn, item)
            children.append((pid, fd))
            running.add(pid)
        results = [fn(items[0])]
        for pid, fd in children:
            payload = _drain(fd)
            _, status = os.waitpid(pid, 0)
            running.discard(pid)
            results.append(_result(payload, status))
        return results
    finally:
        for pid in running:  # an error or Ctrl-C came first: stop the rest
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        for _, fd in children:
            os.close(fd)


class ChildDied(RuntimeError):
    """A worker process ended without sending its result."""


def _fork(fn: Callable[[T], R], item: T) -> tuple[int, int]:
    """A child working on ``item``: its pid and the pipe its result comes through."""
    read, write = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write)
        return pid, read
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
    with os.fdopen(write, "wb") as out:
        out.write(payload)
    # no clean-up of the parent's (atexit, temporary files, buffered output): it is the
    # parent's own
    os._exit(0)


def _drain(fd: int) -> bytes:
    """Everything a child writes to its pipe, up to its end."""
    parts = []
    while chunk := os.read(fd, 1 << 20):
        parts.append(chunk)
    return b"".join(parts)


def _result(payload: bytes, status: int) -> R:  # type: ignore[type-var]
    """What a child sent (raised, if it is an error); ``status``: how it ended."""
    if not payload:
        raise ChildDied(f"a worker process ended without a result ({_how(status)})")
    ok, value = pickle.loads(payload)
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


def _how(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return f"killed by signal {sig}" + (", out of memory?" if sig == signal.SIGKILL else "")
    return f"exit status {os.waitstatus_to_exitcode(status)}"
