"""Text for a terminal: how wide it is, and paragraphs wrapped to it.

Every string a trace holds is the sender's (issue 52): :func:`printable` is the one place a
name becomes safe to show (no control character, no bidirectional override reaches a terminal,
a file or an error line), and :func:`name_text` the one form a trace's name is kept in (cut to
:data:`NAME_CAP` characters, then printable).

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
from functools import lru_cache

DEFAULT_WIDTH = 80
MIN_WIDTH = 40
#: a number and its unit stay on one line: ``1.04 ms``, ``5120 B``, ``+2 pp``
_NUMBER_UNIT = re.compile(r"(\d) (us|µs|ms|s|ns|B|KB|MB|GB|pp|launches|launch)\b")
_NBSP = "\u00a0"

#: the longest name a trace's string keeps (NVTX ranges, kernels, threads, processes, GPUs,
#: Python frames, nsys's diagnostics): a longer one is cut to this many characters, the last
#: an ellipsis, when it is read, so time and memory follow the number of rows, not the length
#: of a name. What the analysis reads of a name is its start (a kernel's ``nccl`` prefix and
#: collective, an API's base name, ``step N``); the names of the sample traces that exceed it
#: are demangled C++ kernel names (nsys ``StringIds`` up to 1448 characters, Kineto kernel
#: events up to 2117: templates' arguments), whose first 255 characters name the kernel;
#: NVTX ranges, threads, processes, frames and diagnostics stay under 140 there
NAME_CAP = 256
#: what ends a cut name
CUT = "\u2026"
#: characters never shown as they are: C0 controls (ESC starts a terminal's escape
#: sequences, CR rewrites the line, NUL ends a C string), DEL and the C1 controls (0x9b is a
#: one-byte CSI, 0x9d OSC), the bidirectional overrides, embeddings and isolates that reorder
#: what a reader sees (U+202A-202E, U+2066-2069, "Trojan Source"), the direction marks
#: (U+200E, U+200F, U+061C), the line and paragraph separators (a line break to some viewers)
#: and the noncharacters U+FFFE and U+FFFF: with the C0 controls, what XML 1.0 forbids (a
#: JUnit report stays well-formed). A lone surrogate (a file name's byte that is not UTF-8)
#: is left to the writer, which cannot encode it: U+FFFD in a file (:func:`displayable`),
#: ``?`` on a terminal
_UNPRINTABLE = ("\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e"
                "\u2066-\u2069\ufffe\uffff")


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


def printable(text: str, keep: str = "", json: bool = False) -> str:
    """``text`` with every character of :data:`_UNPRINTABLE` but those in ``keep`` written as
    an escape: ``\\x1b`` (``\\u001b`` where ``json``: the form a JSON string reads back),
    ``\\u202e``. Backslashes stay as they are (a Windows path stays readable), so
    the escape is for the eye, not a reversible encoding. Fast where there is nothing to
    escape: one regex search."""
    pattern = _unprintable(keep)
    if pattern.search(text) is None:
        return text
    return pattern.sub(_escape_json if json else _escape, text)


@lru_cache(maxsize=8)
def _unprintable(keep: str) -> re.Pattern[str]:
    chars = _UNPRINTABLE
    if keep:  # a character class of what to escape, less what to keep
        return re.compile(f"(?![{re.escape(keep)}])[{chars}]")
    return re.compile(f"[{chars}]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def _escape_json(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()):04x}"


def capped(text: str, limit: int = NAME_CAP) -> str:
    """``text``, or where it is longer than ``limit`` characters its first ``limit - 1`` and
    :data:`CUT`."""
    return text if len(text) <= limit else text[:limit - 1] + CUT


def name_text(raw: object) -> str:
    """A trace's name as nsysscope keeps it: text (None: ''), cut to :data:`NAME_CAP`
    characters (:func:`capped`), then :func:`printable` (at most 6 characters for each
    escaped one)."""
    return printable(capped("" if raw is None else str(raw)))


def was_cut(name: str) -> bool:
    """Whether ``name`` (a :func:`name_text`) is a cut name: none shorter than the cap ends
    with :data:`CUT` (a name of exactly :data:`NAME_CAP` characters ending with an ellipsis of
    its own counts too, an error of one in a count)."""
    return len(name) >= NAME_CAP and name.endswith(CUT)


def clipped(text: str, limit: int = 120) -> str:
    """``text`` in at most about ``limit`` characters, for an error line: its first line, cut
    at a word with ``...`` where longer (a library's message can run to paragraphs, and a cut
    inside a word reads as a typo)."""
    first = text.splitlines()[0] if text else ""
    if len(first) <= limit:
        return first
    return first[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " ..."
