"""The ``nsysscope`` command: thin click commands over what :mod:`nsysscope.api` calls too
(:func:`nsysscope.analysis.analyze_file`, the gate, the batch runner, the renderers), not over
the facade itself: it keeps results for a notebook, and importing it imports every renderer.

:mod:`.app` is the group and its error handling, one module per command family
(:mod:`.report`, :mod:`.gate`, :mod:`.scrub`, :mod:`.cache`, :mod:`.export`), :mod:`.options`
what they share. The group imports a command's module only when that command runs
(``--version`` stays fast).
"""

import atexit
import importlib.abc
import importlib.machinery
import os
import signal
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

from ..errors import INTERNAL_ERROR
from .app import COMMANDS, cli, note_terminated, say_error


def main() -> None:
    """The command line, exiting through ``SystemExit`` as click does (for callers in
    Python)."""
    cli(prog_name="nsysscope")


def run() -> None:
    """The ``nsysscope`` program: :func:`main`, then a fast exit. Once the output is flushed
    and the exit handlers have run, the OS frees the process's memory in one go, where
    Python's own teardown of a large trace's arrays and of every module takes a tenth of a
    second or more (``bench/README.md``)."""
    # a CI timeout or `docker stop`: leave as Ctrl-C does, through every clean-up on the way
    # out (temporary files, the --no-cache folder), not at once
    signal.signal(signal.SIGTERM, _terminated)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not ignored (nohup)
        signal.signal(signal.SIGINT, _interrupted)
    # numpy asks the kernel for huge pages for every array of 4 MB or more; an analysis makes
    # and frees hundreds of them, and where the kernel compacts memory to find huge pages
    # (transparent_hugepage defrag "madvise") that took 0.4 s of system time on the light
    # 10^5 replica, and found none (bench/README.md). Read when numpy is imported: the user's
    # own setting wins
    os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
    # nothing here multiplies matrices, yet numpy's OpenBLAS starts a thread per core when
    # imported, and they spin: ~0.1-0.25 CPU-s of a light 10^5 report taken from the readers
    # and the windows' processes on a 2-core box (bench/README.md). Also read at import
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # pandas imports pyarrow, when installed, to hold text in it: the command line holds text
    # as Python strings (app._python_strings), and the import was ~0.1 s of every start
    sys.meta_path.insert(0, _PandasWithoutPyarrow())
    # a library's warning is no line of nsysscope's (matplotlib's "Tight layout not applied"
    # for a long name, numpy's on a damaged trace's values): the report says what matters,
    # and NSYSSCOPE_DEBUG=1 shows them; worker processes read the same from the environment
    if not os.environ.get("NSYSSCOPE_DEBUG"):
        warnings.simplefilter("ignore")
        os.environ["PYTHONWARNINGS"] = "ignore"
    # what the output's encoding cannot hold (an arrow on a cp1252 console, a file name that
    # is not UTF-8) is written as '?', not an internal error
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)  # None: closed, or not text
        if reconfigure is not None:
            reconfigure(errors="replace")
    try:
        main()
    except SystemExit as e:
        if not isinstance(e.code, int | None):
            raise  # a message to print: Python's own exit prints it
        code = e.code or 0
        if isinstance(e, _Terminated):  # one line, as for every other way a run ends early
            say_error("terminated (SIGTERM)", code)
    else:
        code = 0
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:  # None: closed when the program started (`>&-`)
                stream.flush()
        except (OSError, ValueError):  # `| head` (a broken pipe), /dev/full: the exit code stays
            pass
    os._exit(code)


class _PandasWithoutPyarrow(importlib.abc.MetaPathFinder):
    """Makes pyarrow look absent to pandas while pandas is being imported, and present
    after: pandas then holds text as Python strings, as the command line asks it to anyway,
    and skips ~0.1 s of importing pyarrow and pyarrow.compute (the warm 5000-step sample's
    report took 1.65-1.76 s against 1.76-1.93 s with it, on the 2-core bench box;
    bench/README.md). ``--per-launch FILE.parquet`` imports pyarrow itself, later, as
    usual. Only in the ``nsysscope`` program (:func:`run`), whose process is its own: in a
    user's Python, pandas is the user's."""

    def find_spec(self, name: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if name == "pyarrow":
            spec = getattr(sys.modules.get("pandas"), "__spec__", None)
            if getattr(spec, "_initializing", False):  # inside pandas' own `import pyarrow`
                raise ModuleNotFoundError("pyarrow is not for pandas in the nsysscope command",
                                          name=name)
        return None


class _Terminated(SystemExit):
    """The exit SIGTERM makes: code 143, through the clean-up."""


def _terminated(signum: int, frame: object) -> None:
    _on_repeats()
    note_terminated()
    raise _Terminated(128 + signum)


def _interrupted(signum: int, frame: object) -> None:
    _on_repeats()
    raise KeyboardInterrupt


#: signals after the first (:func:`_on_repeats`)
_repeats = 0


def _on_repeats() -> None:
    """The run is ending, through its clean-up: the next Ctrl-C or SIGTERM is ignored, as it
    would cut that short with a traceback (a worker pool's join at exit, say), and one often
    comes unsent by anyone: Ctrl-C and a CI's ``timeout`` signal the whole process group,
    and ``timeout`` signals the command, then its group. One after that leaves at once,
    clean-up or not: a clean-up can hang."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(sig) is not signal.SIG_IGN:  # ignored (nohup): it stays so
            signal.signal(sig, _repeated)


def _repeated(signum: int, frame: object) -> None:
    global _repeats
    _repeats += 1
    if _repeats > 1:
        os._exit(128 + signum)


__all__ = ["COMMANDS", "INTERNAL_ERROR", "cli", "main", "run"]
