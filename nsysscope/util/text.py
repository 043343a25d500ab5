"""Text for a terminal: how wide it is, and paragraphs wrapped to it.

The terminal reports (``report``, ``gate``) wrap every line to the width of the terminal they
are printed on: the terminal's own width on a TTY, ``$COLUMNS`` when set, else 80 (a pipe, a
file, a CI log). Renderers take the width as an argument (default :data:`DEFAULT_WIDTH`), so
the same result renders the same everywhere unless the CLI passes another width.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import textwrap

DEFAULT_WIDTH = 80
MIN_WIDTH = 40
#: a number and its unit stay on one line: ``1.04 ms``, ``5120 B``, ``+2 pp``
_NUMBER_UNIT = re.compile(r"(\d) (us|µs|ms|s|ns|B|KB|MB|GB|pp|launches|launch)\b")
_NBSP = "\u00a0"


def terminal_width() -> int:
    """The width to wrap to: the terminal's on a TTY, ``$COLUMNS`` when set, else 80."""
    cols = os.environ.get("COLUMNS", "")
    if cols.isdigit() and int(cols) > 0:
        return max(MIN_WIDTH, int(cols))
    try:
        tty = bool(sys.stdout.isatty())
    except (AttributeError, ValueError):
        tty = False
    if not tty:
        return DEFAULT_WIDTH
    return max(MIN_WIDTH, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)


def wrap(text: str, width: int | None, first: str = "", rest: str | None = None) -> list[str]:
    """``text`` wrapped to ``width`` columns, the first line after ``first``, the others after
    ``rest`` (default: as many spaces as ``first``). Words are never split, not even at
    hyphens (``--python-sampling=true`` stays whole), so a path longer than the width makes a
    long line rather than a broken one."""
    width = width or DEFAULT_WIDTH
    rest = " " * len(first) if rest is None else rest
    glued = _NUMBER_UNIT.sub(lambda m: m.group(1) + _NBSP + m.group(2), text.replace(_NBSP, " "))
    lines = textwrap.wrap(glued, width=width, initial_indent=first, subsequent_indent=rest,
                          break_long_words=False, break_on_hyphens=False)
    return [line.replace(_NBSP, " ") for line in lines] or [first.rstrip()]


def displayable(text: str) -> str:
    """``text`` as valid Unicode: a file name that is not UTF-8 (Python keeps its bytes as
    lone surrogates) shows its bad bytes as U+FFFD, so it can be written to a UTF-8 file or an
    SQLite database."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def clipped(text: str, limit: int = 120) -> str:
    """``text`` in at most about ``limit`` characters, for an error line: its first line, cut
    at a word with ``...`` where longer (a library's message can run to paragraphs, and a cut
    inside a word reads as a typo)."""
    first = text.splitlines()[0] if text else ""
    if len(first) <= limit:
        return first
    return first[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " ..."
