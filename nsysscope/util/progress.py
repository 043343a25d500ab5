"""A tiny progress line on stderr for long exports and loads.

It draws only when stderr is a terminal (never into logs, pipes or CI output), only once the
work has taken longer than ``delay`` seconds (short loads print nothing), and erases itself
when done. ``NSYSSCOPE_PROGRESS=0`` turns it off, ``=1`` forces it on. A background thread
redraws it, so a single long call (an ``nsys export``, one big SQL query) still shows time
passing::

    with progress("exporting trace.nsys-rep") as p:      # a spinner with elapsed time
        run_export()
    with progress("reading trace.sqlite", total=5) as p:  # a bar: p.advance() per step
        for step in steps:
            p.advance(label=step.name)
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, TextIO

from .text import printable

_FRAMES = "|/-\\"


def enabled(stream: TextIO | None = None) -> bool:
    """Whether a progress line would be drawn on ``stream`` (default: stderr)."""
    flag = os.environ.get("NSYSSCOPE_PROGRESS", "").strip().lower()
    if flag in ("0", "false", "no", "off"):
        return False
    if flag in ("1", "true", "yes", "on"):
        return True
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Progress:
    """One progress line. Use as a context manager; ``advance`` and ``label`` are cheap and
    thread-safe, and do nothing when the line is off."""

    def __init__(self, label: str, total: int | None = None, stream: TextIO | None = None,
                 delay: float = 1.0, interval: float = 0.2, on: bool | None = None) -> None:
        self.label, self.total, self.done = label, total, 0
        self.stream = stream if stream is not None else sys.stderr
        self.delay, self.interval = delay, interval
        self.on = enabled(self.stream) if on is None else on
        self._t0 = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = 0  # width of what is on screen

    def __enter__(self) -> Progress:
        if self.on:
            self._thread = threading.Thread(target=self._run, name="nsysscope-progress",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def advance(self, n: int = 1, label: str | None = None) -> None:
        with self._lock:
            self.done += n
            if label is not None:
                self.label = label

    def close(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        with self._lock:
            if self._drawn:
                self._write("\r" + " " * self._drawn + "\r")
                self._drawn = 0

    def line(self, frame: int = 0) -> str:
        """The text drawn now (without the carriage return)."""
        elapsed = time.monotonic() - self._t0
        if self.total:
            frac = min(1.0, self.done / self.total)
            bar = "#" * int(frac * 20)
            head = f"[{bar:<20}] {self.done}/{self.total}"
        else:
            head = _FRAMES[frame % len(_FRAMES)]
        return f"nsysscope: {head} {printable(self.label)} ({elapsed:.0f} s)"

    def _run(self) -> None:
        if self._stop.wait(self.delay):
            return
        frame = 0
        while True:
            with self._lock:
                text = self.line(frame)
                width = _width()
                text = text[: width - 1] if width > 1 else text
                pad = max(0, self._drawn - len(text))
                self._write("\r" + text + " " * pad)
                self._drawn = len(text)
            frame += 1
            if self._stop.wait(self.interval):
                return

    def _write(self, s: str) -> None:
        try:
            self.stream.write(s)
            self.stream.flush()
        except (OSError, ValueError):  # closed or broken stderr: stop drawing, never fail
            self.on = False
            self._stop.set()


def _width() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 80


def progress(label: str, total: int | None = None, **kwargs: Any) -> Progress:
    """A :class:`Progress` line: a bar when ``total`` is known, else a spinner."""
    return Progress(label, total=total, **kwargs)


def note(message: str, stream: TextIO | None = None) -> None:
    """One ``nsysscope: note: ...`` line on stderr: something the user should know that is not
    an error (which file was read instead of the one named); printable, as it may name a
    file."""
    stream = stream if stream is not None else sys.stderr
    try:
        stream.write(f"nsysscope: note: {printable(message)}\n")
        stream.flush()
    except (OSError, ValueError):
        pass
