"""Work forked to child processes: results in order, errors raised here, no child left."""

from __future__ import annotations

import os
import signal
import time

import pytest

from nsysscope.util import forks

pytestmark = pytest.mark.skipif(not forks.can_fork(), reason="no fork on this OS")


def _pid_and_square(x: int) -> tuple[int, int]:
    return os.getpid(), x * x


def test_each_item_but_the_first_runs_in_a_child_of_its_own():
    got = forks.map_forked(_pid_and_square, [1, 2, 3, 4])
    assert [sq for _, sq in got] == [1, 4, 9, 16]
    pids = [p for p, _ in got]
    assert pids[0] == os.getpid() and len(set(pids)) == 4


def _fail_on_three(x: int) -> int:
    if x == 3:
        raise ValueError(f"bad item {x}")
    return x


def test_a_childs_error_is_raised_here():
    with pytest.raises(ValueError, match="bad item 3"):
        forks.map_forked(_fail_on_three, [1, 2, 3])


def _die(x: int) -> int:
    if x:
        os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's out-of-memory killer does
    return x


def test_a_child_killed_before_its_result_is_an_error_not_a_hang():
    with pytest.raises(forks.ChildDied, match="killed by signal 9"):
        forks.map_forked(_die, [0, 1])


def _sleep_or_interrupt(x: int) -> int:
    if x == 0:
        time.sleep(0.3)  # the children have started
        raise KeyboardInterrupt
    time.sleep(60)
    return x


def test_ctrl_c_here_kills_every_child():
    before = _children()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        forks.map_forked(_sleep_or_interrupt, [0, 1, 2])
    assert time.monotonic() - t0 < 10  # not the children's 60 s
    assert _children() == before  # killed and reaped: no zombie either


def _children() -> set[int]:
    """This process's child processes (from /proc)."""
    me = str(os.getpid())
    found = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == me:
                found.add(int(pid))
    return found
