"""Time a command in a fresh process: wall seconds, exit code, CPU seconds, peak RSS, and the
share of the machine's CPU time the hypervisor took meanwhile (steal, :class:`Steal`).

Shared by ``bench/run`` and ``bench/nsysai.py``. Peak RSS comes from GNU time
(``/usr/bin/time -f %M``) when present: a child's ``ru_maxrss`` from ``wait4`` here would
start at this (larger) process's RSS, inherited at fork. With a timeout the command runs under
coreutils ``timeout``; GNU time then reports the largest RSS of ``timeout`` and the command
it waited for, and a command still running at the limit exits 124, or 137 if it had to be
killed (``timed_out``; an exit 137 before the limit is another kill, e.g. out of memory).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

TIME = shutil.which("time", path="/usr/bin:/bin")
TIMEOUT = shutil.which("timeout", path="/usr/bin:/bin")
MARK = "__nsysscope_rss_kb="


class Steal:
    """The share of CPU time stolen from this virtual machine since it was made: ticks in
    ``/proc/stat``'s steal column over ticks not idle (user, nice, system, irq, softirq,
    steal). On a shared box that share is how much slower a CPU-bound run went than its own
    CPU time says; None where the kernel has no such column."""

    def __init__(self) -> None:
        self._start = _ticks()

    def pct(self) -> float | None:
        now = _ticks()
        if self._start is None or now is None:
            return None
        steal, busy = (b - a for a, b in zip(self._start, now, strict=True))
        return round(100 * steal / busy, 1) if busy else None


def _ticks() -> tuple[int, int] | None:
    """(steal, not idle) ticks of all CPUs so far."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    if len(fields) < 8:
        return None
    user, nice, system, _, _, irq, softirq, steal = fields[:8]  # idle, iowait: not busy
    return steal, user + nice + system + irq + softirq + steal


def timed(cmd: list[str], out: Path | None = None, env: dict | None = None,
          cwd: Path | None = None, timeout: float | None = None) -> dict:
    """Run ``cmd`` (stdout to ``out``, or discarded); wall and CPU s, exit code, peak RSS MB,
    CPU steal % meanwhile.

    ``stderr`` keeps the last 4000 characters of the command's stderr."""
    steal = Steal()
    if timeout and TIMEOUT:
        cmd = [TIMEOUT, "--kill-after=30", str(int(timeout))] + cmd
    wrapped = [TIME, "-f", MARK + "%M"] + cmd if TIME else cmd
    t0 = time.perf_counter()
    with open(out or os.devnull, "wb") as f:
        p = subprocess.Popen(wrapped, stdout=f, stderr=subprocess.PIPE, env=env, cwd=cwd)
        tree = TreeMemory(p.pid)
        err = p.stderr.read()  # drain, so a chatty child cannot block
        _, status, usage = os.wait4(p.pid, 0)
        rc = os.waitstatus_to_exitcode(status)
        tree.stop()
    wall = time.perf_counter() - t0
    text, rss_kb = _split_rss(err.decode(errors="replace"), rc, usage.ru_maxrss)
    return dict(seconds=round(wall, 2), rc=rc, rss_mb=round(rss_kb / 1024, 1),
                tree_pss_mb=tree.peak_mb,
                cpu_s=round(usage.ru_utime + usage.ru_stime, 2), steal_pct=steal.pct(),
                timed_out=bool(timeout and TIMEOUT and rc in (124, 137) and wall >= timeout),
                stderr=text[-4000:])


class TreeMemory:
    """The largest memory a command and every process it started held together, sampled
    every :data:`EVERY` s: the sum of their proportional set sizes (``Pss`` in
    ``/proc/PID/smaps_rollup``: a page shared by N processes, as a forked child shares its
    parent's, counts 1/N to each). GNU time's peak RSS is one process's, and ``report``
    analyses a long trace's windows in processes of its own. None where /proc has no such
    file."""

    EVERY = 0.2

    def __init__(self, root: int) -> None:
        self.root, self._peak_kb, self._done = root, None, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @property
    def peak_mb(self) -> float | None:
        return None if self._peak_kb is None else round(self._peak_kb / 1024, 1)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._done.wait(self.EVERY):
            total = _tree_pss_kb(self.root)
            if total is not None and (self._peak_kb is None or total > self._peak_kb):
                self._peak_kb = total


def _tree_pss_kb(root: int) -> int | None:
    """The summed Pss (KB) of ``root`` and its descendants, or None if /proc cannot say."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    total, todo, found = 0, [root], False
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        found = True
                        break
        except OSError:
            continue
    return total if found else None


def _split_rss(text: str, rc: int, fallback_kb: int) -> tuple[str, int]:
    """The command's own stderr and GNU time's peak RSS (KB), taken off the end of it."""
    if not (TIME and MARK in text):
        return text, fallback_kb
    head, _, tail = text.rpartition(MARK)
    lines = head.rstrip("\n").split("\n")
    if rc != 0 and lines[-1].startswith("Command ") and lines[-1].endswith(f"status {rc}"):
        head = "\n".join(lines[:-1])  # GNU time's own "Command exited with ... status N"
    return head, int(tail.split()[0])


def best(runs: list[dict]) -> dict:
    """The fastest run, with the largest peak RSS (and process tree's memory) of all and every
    run's seconds."""
    b = min(runs, key=lambda r: r["seconds"])
    trees = [r["tree_pss_mb"] for r in runs if r.get("tree_pss_mb") is not None]
    return dict(b, rss_mb=max(r["rss_mb"] for r in runs), runs=[r["seconds"] for r in runs],
                tree_pss_mb=max(trees) if trees else None)


def stdout_fields(path: Path) -> dict:
    """``key=value`` pairs of a command's stdout (what floor.py and scan.py print)."""
    return dict(kv.split("=", 1) for kv in path.read_text().split() if "=" in kv)
