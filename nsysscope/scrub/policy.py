"""The scrub policy: what in an nsys SQLite export identifies a machine or a person, and what
it becomes; the analysis keeps everything it reads.

Why: an ``nsys export --type sqlite`` file carries much more than the trace. nsys records the
profiled process's whole environment (``META_DATA_CAPTURE`` rows ``PROCESS_n:ENVIRONMENT_VARIABLE``,
``TARGET_INFO_SYSTEM_ENV`` row ``DeviceEnvironment`` and one NUL-separated ``NAME=value`` blob in
``StringIds`` per process it saw start), the host and user names (``EXPORT_HOST``,
``EXPORT_USER``, ``DEVICE_DISPLAY_NAME``, ``PROCESS_n:USER_NAME``, ``Hostname``), the GPU's
hardware UUID, and absolute paths everywhere: the export's own input/output paths
(``META_DATA_EXPORT`` ``EXPORT_PARAM_*_PATH*``), the working directory and arguments of the
command, the Python source files of the Python sampler (``StringIds``, referenced by id from the
JSON payloads in ``NVTX_EVENTS.jsonText``), the nsys install and session directories
(``TARGET_INFO_SYSTEM_ENV``, ``DIAGNOSTIC_EVENT``, ``ANALYSIS_FILE``, ``ProcessStreams``).
Sample traces that go into a repository, a bug report or a CI artefact must not carry those.

What: :func:`find_leaks` lists what would leak, :func:`scrub` writes a cleaned copy.

Policy (what counts as a leak, and what it becomes):

``env``
    Environment variables: NUL-separated ``NAME=value`` dumps anywhere, a lone variable whose
    name is a well-known one (``PATH``, ``HOME``, ``USER``...) or looks like a secret
    (``*TOKEN*``, ``*SECRET*``, ``*API_KEY*``...), ``PROCESS_n:ENVIRONMENT_VARIABLE`` rows,
    ``DeviceEnvironment`` rows (``;``-separated) and any table whose name says ``ENVIRONMENT``.
    Rows are deleted; a ``StringIds`` row that something still references keeps its id and gets
    the value ``<env>``.
``abs_path``
    Every absolute path (``/x/y...``, two components or more, or ``/root``) is machine specific,
    except the kernel's virtual file systems ``/dev``, ``/proc``, ``/sys`` and NVIDIA's own
    build-farm paths compiled into nsys (``/dvs/p4/...``), which are the same everywhere.
    A path under the profiled program's working directory becomes relative to it
    (``/tmp/tmp.abc/proj/engine_under_test/sampler.py`` -> ``engine_under_test/sampler.py``; the
    working directory itself becomes ``.``); a path inside a ``site-packages``/``dist-packages``
    directory becomes ``<site-packages>/torch/cuda/graphs.py``; a path inside a Python standard
    library directory (``.../lib/python3.12/...``) becomes ``<stdlib>/threading.py``; any other
    absolute path becomes ``<path>/<basename>``. Relative paths are kept as they are.
    Windows paths (``C:\\Users\\bob\\report.nsys-rep``, ``\\\\server\\share\\x``: an export
    made on Windows names its report so) follow the same rules. A text that is one absolute
    path with spaces (``/home/bob/My Models/x.pt``: an argument, a working directory, a
    source file) is one path; inside a longer text a space ends a POSIX path.
    The working directory is read from the data: ``PROCESS_n:WORKING_DIR`` in
    ``META_DATA_CAPTURE`` (or ``PWD`` in the recorded environment) when it is absolute and holds
    the program's own sources; otherwise it is derived from the source paths: the prefix in
    front of the package named by ``python -m PKG`` (or the script's first directory), else the
    common directory of the program's ``.py`` files, walked up while it has an ``__init__.py``.
``user`` / ``host``
    The values of the user and host fields become ``user`` / ``host``. User names also come
    from ``USER``/``LOGNAME``/``HOME`` and ``/home/NAME/`` (``C:\\Users\\NAME``) paths; a host's
    domain (``corp.example.com`` of ``node7.corp.example.com``) counts as a host name. Wherever
    a user or host name recurs in any other string as a whole word, in any case, it is
    replaced too, and a name of four characters or more also inside words joined by ``_`` or
    ``-`` (``alice_runs``). In the names the analysis reads (NVTX ranges, kernel and CUDA API
    names, the Python samples' files and functions) only a whole word as written is, and not
    a name that is itself one of those names or their first word (a user named ``sample``
    would rename the 'sample' phase; ``--drop-nvtx-text`` hides range names entirely).
    Generic names (``root``, ``ubuntu``, ``test``, ``runner``, ``localhost``, ``worker``...)
    and names shorter than 2 characters are only replaced in their own fields: they are not
    identifying, or too ambiguous to search for.
``machine_id``
    GPU UUIDs (``TARGET_INFO_GPU.uuid`` and the ``Uuid`` in ``GpuInfo``) become
    ``00000000-0000-0000-0000-00000000000N``, N the GPU's rank in the file, so GPUs stay distinct.
    Network cards' MAC addresses and InfiniBand GUIDs anywhere (``NicInfo``) become ``<mac>`` and
    ``<guid>`` (:mod:`.secrets`).
``secret`` / ``email`` / ``ip``
    Tokens, secret-named values (``--api-key VALUE`` on two argument rows included), URL
    passwords, e-mail addresses, IP addresses (IPv4 where a text uses it as an address, IPv6
    anywhere) and network cards' addresses in any text: :mod:`.secrets`.
``schema``
    The schema itself (``sqlite_master``): views and triggers go (nsys writes none, and their
    SQL is text no cell holds); a table, column or index named after a user or host is
    renamed (an index dropped); a table whose SQL holds a secret is rebuilt: :mod:`.schema`.
``binary``
    A binary payload (``NVTX_EVENTS.binaryData``, any column declared ``BLOB``) cannot be
    searched for any of the above: it is cleared (NULL, or an empty blob where the column may
    not be NULL). The analysis reads none. Text stored as a blob in a text column (a range
    name, a metadata name or value) is text to the loader: it is decoded (UTF-8, bad bytes
    replaced), searched like any text and, where it leaks, rewritten as text. Text that is not
    UTF-8 is searched with its bad bytes kept (:func:`.cells.decode_text`) and written back
    with them.
``timezone``
    A local time that differs from UTC (``TARGET_INFO_SESSION_START_TIME.localTime``,
    ``EXPORT_TIME_LOCAL``) is set to the UTC time. Dates and times themselves are kept.

Dropped unless kept (:mod:`.private`): the host's process list, the program's stdout/stderr,
the kernel string and the session UUID.

Kept on purpose: every timestamp, id and number; API names (``cudaGraphLaunch_v10000``); kernel
and NVTX names (unless ``drop_kernel_names``/``drop_nvtx_text``); memcpy kinds and all ``ENUM_*``
tables; the Python-sampling JSON payloads (they reference ``StringIds`` ids for ``File`` and
``Function``, so rewriting those strings rewrites their paths); the names of the traced
processes and their threads (comm names such as ``python3``; they are scrubbed only for paths,
user and host). Row counts of all trace tables are unchanged; only ``META_DATA_CAPTURE``,
``TARGET_INFO_SYSTEM_ENV``, ``StringIds``, environment tables and the tables of
:mod:`.private` lose rows (the drop options may add ``StringIds`` rows, when a name they replace
is shared with something they keep).

The library never prints and never modifies its input unless asked (``in_place``); the output is
written to a temporary file next to the destination, fsynced and renamed over it, so a failure
never leaves a partial file behind.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

from ..errors import NotAnNsysExport, NsysscopeError
from ..trace.nsys.schema import META_TABLES
from ..util.units import plural
from .names import GENERIC_HOSTS, HOST_PLACEHOLDER, USER_PLACEHOLDER

PathLike = Union[str, "os.PathLike[str]"]

#: placeholders written by :func:`scrub` (and :data:`.names.USER_PLACEHOLDER`,
#: :data:`.names.HOST_PLACEHOLDER`); they are not leaks
ENV_PLACEHOLDER = "<env>"
ZERO_UUID = "00000000-0000-0000-0000-{:012d}"


class ScrubError(NsysscopeError):
    """The input cannot be scrubbed: missing, not SQLite, or not an nsys export."""

    exit_code = 2


class NotAnExport(ScrubError, NotAnNsysExport):
    """SQLite, but not an nsys export, or a truncated or corrupt one: exit 5, as for every
    command that reads an export."""

    exit_code = NotAnNsysExport.exit_code


@dataclass(frozen=True)
class Leak:
    """One thing in an export that identifies a machine or a person.

    ``key`` is the ``StringIds`` id, the ``name`` of a ``META_DATA_*``/``TARGET_INFO_SYSTEM_ENV``
    row, or the rowid elsewhere. ``excerpt`` is redacted: it says what the leak is without
    repeating it (``HOME=…``, ``/home/…/sampler.py``, ``a…``).
    """

    table: str
    column: str
    key: int | str
    kind: str
    excerpt: str


@dataclass(frozen=True)
class ScrubResult:
    """What :func:`scrub` did. ``remaining`` is empty when the output is clean."""

    src: Path
    dst: Path
    working_dir: str | None
    working_dir_from: str
    leaks_found: int
    kinds: dict[str, int]
    rows_deleted: dict[str, int]
    cells_rewritten: int
    kernel_names_dropped: int = 0
    nvtx_texts_dropped: int = 0
    remaining: tuple[Leak, ...] = field(default=())

    def counts(self) -> str:
        """What was done, for the command's one line: ``3 leaks removed, 1 row dropped``."""
        return (f"{plural(self.leaks_found, 'leak')} removed, "
                f"{plural(sum(self.rows_deleted.values()), 'row')} dropped")


# --------------------------------------------------------------------------------------------
# patterns

ENV_VAR = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=")
_UPPER_ENV_VAR = re.compile(r"^([A-Z_][A-Z0-9_]*)=")
_KNOWN_ENV = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "USERNAME", "PWD", "OLDPWD", "HOSTNAME", "SHELL", "MAIL",
    "TERM", "LANG", "LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV",
    "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "TMPDIR", "XDG_RUNTIME_DIR", "SSH_AUTH_SOCK",
    "SSH_CLIENT", "SSH_CONNECTION", "DISPLAY", "CUDA_VISIBLE_DEVICES"})
_SECRETISH = re.compile(r"TOKEN|SECRET|PASSW|API_?KEY|CREDENTIAL|AUTH", re.I)
UUID_PATTERN = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
JSON_IDS = re.compile(r'"(?:Function|File|Module)"\s*:\s*(\d+)')
DELETE = object()  # sentinel: the row goes


@dataclass
class Finding:
    """One leak the scan found: where, what kind, and what the cell becomes (or ``DELETE``).
    ``old`` is the cell's value, so the writer can rewrite a column by value."""

    table: str
    column: str
    rowid: int
    key: int | str
    kinds: list[tuple[str, str]]  # (kind, excerpt)
    new: object  # new cell value, or DELETE for the row
    old: object = None


def env_names(value: str, semicolons: bool = False) -> list[str]:
    """The variable names if ``value`` is an environment dump or a sensitive variable, else [].

    A dump is NUL-separated ``NAME=value`` items (how nsys stores a process's environment), or
    ``;``-separated ones where the caller knows the field holds an environment
    (``DeviceEnvironment``): ``bs=8;seq=128`` in an NVTX range is not an environment.
    """
    if "=" not in value:
        return []
    if "\x00" in value:
        parts = value.split("\x00")
    elif semicolons and ";" in value:
        parts = value.split(";")
    else:
        parts = [value]
    parts = [p for p in parts if p]
    names = [m.group(1) for p in parts if (m := ENV_VAR.match(p))]
    if len(parts) > 1 and len(names) >= 2 and len(names) * 2 >= len(parts):
        return names
    if len(parts) == 1 and (m := (ENV_VAR if semicolons else _UPPER_ENV_VAR).match(parts[0])):
        name = m.group(1)
        if semicolons or name in _KNOWN_ENV or _SECRETISH.search(name):
            return [name]
    return []


def redact_name(name: str) -> str:
    return (name[:1] + "…") if name else "''"


def field_rule(table: str, name: str, value: str) -> tuple[str, str] | None:
    """Field-level replacement for user/host/working-dir/timezone fields: (kind, new value)."""
    if table == "META_DATA_CAPTURE" or table in META_TABLES:
        if (name.endswith("USER_NAME") or name == "EXPORT_USER") and \
                value not in ("", USER_PLACEHOLDER):
            return "user", USER_PLACEHOLDER
        if name in ("EXPORT_HOST", "DEVICE_DISPLAY_NAME") and value not in GENERIC_HOSTS:
            return "host", HOST_PLACEHOLDER
    if table == "TARGET_INFO_SYSTEM_ENV" and name in ("Hostname", "HostName") and \
            value not in GENERIC_HOSTS:
        return "host", HOST_PLACEHOLDER
    return None

