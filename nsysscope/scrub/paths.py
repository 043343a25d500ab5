"""Absolute paths in the texts of a trace: how the scrub finds them (POSIX, Windows, a whole
text that is one path with spaces), whether one identifies a machine, and what it becomes;
the user names their home folders give away. The policy: :mod:`.policy`, ``abs_path``."""

from __future__ import annotations

import re
from collections.abc import Callable

#: bytes of a text that are not UTF-8, as the scrub reads them (lone surrogates,
#: :func:`.cells.decode_text`): part of a name, so a path or user name does not stop at them
NOT_UTF8 = r"\udc80-\udcff"
#: where an absolute path may start: a word's start (not after a letter, digit, '.', '-',
#: '/', '~' or '>', so 'kworker/3:1', 'steps/s' and a URL's host and path are not paths), after
#: ':' (``ckpt:/data/x``), after ``file://`` (``file:///home/bob/x.pt``, whose third '/'
#: follows a '/'), a one-letter option (``-I/opt/x``) or a redirection (``2>/tmp/err.log``;
#: not after a placeholder's ``>``: ``<path>/x``). Its parts may hold any letter
#: (``/home/josé/model.pt``: an ASCII-only pattern stopped at the 'é' and left the rest)
_PATH_START = (rf"(?:(?<=file://)|(?<![\w.\-/~>\\{NOT_UTF8}])|(?<=\s-[A-Za-z])|(?<=^-[A-Za-z])|"
               r"(?<=[^A-Za-z\-]>)|(?<=^>))")
_PATH_PART = rf"[\w.+@%~\-{NOT_UTF8}]"
PATH_PATTERN = re.compile(rf"{_PATH_START}/{_PATH_PART}+(?:/{_PATH_PART}*)*|"
                          # a network share, //server/share/x (not a URL's //host)
                          rf"(?<![\w.\-/~>\\:{NOT_UTF8}])//{_PATH_PART}+(?:/{_PATH_PART}*)+")
#: a Windows path (nsys's GUI runs on Windows too, and an export made there names its
#: report so): a drive (``C:\``) or a share (``\\server\share``), then parts that may
#: hold spaces (``Program Files``); only the last stops at a space
WINDOWS_PATH = re.compile(r'(?<![\w\\])(?:[A-Za-z]:|\\\\[\w.$\-]+)\\'
                          r'(?:[^\\/:*?"<>|\x00-\x1f]+\\)*[^\\/:*?"<>|\s\x00-\x1f]*')
#: a Windows path with its backslashes escaped, as a JSON or Python string shows it (an NVTX
#: JSON payload, a logged ``repr``: ``C:\\Users\\dana\\x.py``), which :data:`WINDOWS_PATH`
#: ends at the drive: the same parts, each separator two backslashes
ESCAPED_WINDOWS_PATH = re.compile(r'(?<![\w\\])(?:[A-Za-z]:|\\\\\\\\[\w.$\-]+)\\\\'
                                  r'(?:[^\\/:*?"<>|\x00-\x1f]+\\\\)*'
                                  r'[^\\/:*?"<>|\s\x00-\x1f]*')
#: a text that is one absolute path holding spaces, whole (``/home/bob/My Models/x.pt``: an
#: argument, a working directory, a source file), which :data:`PATH_PATTERN` would end at the
#: first space: three parts or more, the first without a space; not a command line
#: (``/usr/bin/python3 -m x``, ``cp /a /b``) nor a range name (``/step 5/10``)
SPACED_PATH = re.compile(r"(?:file://)?(/[^\x00-\x1f/\"' ]+(?:/[^\x00-\x1f/\"']*){2,})")
KEEP_PATH_PREFIXES = ("/dev/", "/proc/", "/sys/", "/dvs/p4/")
SITE_PATH = re.compile(r"/(?:site|dist)-packages/(.*)$")
STDLIB_PATH = re.compile(r"/lib(?:64)?/(?:python|pypy)\d+(?:\.\d+)?t?/(.*)$")
#: ``~NAME/``: NAME's home
TILDE_HOME = re.compile(r"(?<![\w~/])~([A-Za-z_][\w.\-]*)/")
HOME_NAME = re.compile(rf"{_PATH_START}/(?:home|Users)/([\w.\-{NOT_UTF8}]+)|"
                       + TILDE_HOME.pattern)
WINDOWS_HOME = re.compile(r'(?<![\w\\])(?:[A-Za-z]:)?\\Users\\'
                          r'([^\\/:*?"<>|\x00-\x1f]+(?=\\)|[^\\/:*?"<>|\s\x00-\x1f]+)')


def sub_paths(text: str, replace: Callable[[str], str]) -> str:
    """``text`` with each absolute path in it replaced by ``replace(path)``: a text that is one
    path with spaces whole (:data:`SPACED_PATH`), else each Windows path, then each POSIX path
    (a space ends those: ``/data/My Models/x.pt`` inside a longer text loses ``/data/My``
    only)."""
    if " " in text and (m := SPACED_PATH.fullmatch(text)) and " -" not in text and \
            " /" not in text:
        return text[:m.start(1)] + replace(m.group(1))
    if "\\\\" in text:  # escaped first: the plain pattern takes the drive alone
        text = ESCAPED_WINDOWS_PATH.sub(  # escaped again: a path kept must stay escaped
            lambda m: replace(_unescaped(m.group(0))).replace("\\", "\\\\"), text)
    if "\\" in text:
        text = WINDOWS_PATH.sub(lambda m: replace(m.group(0)), text)
    if "/" in text:
        text = PATH_PATTERN.sub(lambda m: replace(m.group(0)), text)
    return text


def find_paths(text: str) -> list[str]:
    """The absolute paths in ``text``, as :func:`sub_paths` finds them."""
    found: list[str] = []

    def note(path: str) -> str:
        found.append(path)
        return "<path>"  # as the scrub writes it: nothing after it starts another path

    sub_paths(text, note)
    return found


def home_names(text: str) -> list[str]:
    """The user names of the home folders in ``text`` (``/home/NAME``, ``/Users/NAME``,
    ``C:\\Users\\NAME``)."""
    posix = [a or b for a, b in HOME_NAME.findall(text)] if "/" in text else []
    windows = WINDOWS_HOME.findall(_unescaped(text)) if "\\" in text else []
    return posix + windows


def _unescaped(text: str) -> str:
    """``text`` with each escaped backslash (two) made one (:data:`ESCAPED_WINDOWS_PATH`)."""
    return text.replace("\\\\", "\\")


def _posix(path: str) -> str:
    """A Windows path in POSIX form, for the rules below (``C:\\a\\b`` -> ``/a/b``)."""
    if path.startswith("/"):
        return path
    rest = re.sub(r"^(?:[A-Za-z]:|\\\\)", "", path).replace("\\", "/")
    return rest if rest.startswith("/") else "/" + rest


def rewrite_path(path: str, working_dir: str | None) -> str:
    """The scrubbed form of one absolute ``path`` (the rules: :mod:`.policy`, ``abs_path``)."""
    path = _posix(path)
    if path.startswith(KEEP_PATH_PREFIXES):
        return path
    if working_dir:
        if path.rstrip("/") == working_dir:
            return "."
        if path.startswith(working_dir + "/"):
            rest = path[len(working_dir) + 1:]
            if not SITE_PATH.search("/" + rest):
                return rest
    if m := SITE_PATH.search(path):
        return "<site-packages>/" + m.group(1)
    if m := STDLIB_PATH.search(path):
        return "<stdlib>/" + m.group(1)
    base = path.rstrip("/").rsplit("/", 1)[-1]
    return f"<path>/{base}" if base else "<path>"


def is_leaky_path(path: str) -> bool:
    """Two components or more (``/opt/x``), or ``/root``; not ``/dev``, ``/proc``, ``/sys``,
    ``/dvs/p4``."""
    path = _posix(path)
    if path.startswith(KEEP_PATH_PREFIXES):
        return False
    parts = [p for p in path.split("/") if p]
    return len(parts) >= 2 or parts == ["root"]


def redact_path(path: str) -> str:
    parts = [p for p in _posix(path).split("/") if p]
    if len(parts) <= 1:
        return "/" + (parts[0] if parts else "")
    if len(parts) == 2 and parts[0] not in ("home", "Users"):
        return f"/{parts[0]}/…"
    return f"/{parts[0]}/…/{parts[-1]}"
