"""Remove what identifies a machine or a person from an nsys SQLite export, keep the analysis.

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
    The working directory is read from the data: ``PROCESS_n:WORKING_DIR`` in
    ``META_DATA_CAPTURE`` (or ``PWD`` in the recorded environment) when it is absolute and holds
    the program's own sources; otherwise it is derived from the source paths: the prefix in
    front of the package named by ``python -m PKG`` (or the script's first directory), else the
    common directory of the program's ``.py`` files, walked up while it has an ``__init__.py``.
``user`` / ``host``
    The values of the user and host fields become ``user`` / ``host``. User names also come
    from ``USER``/``LOGNAME``/``HOME`` and ``/home/NAME/`` paths. Wherever a user or host name
    recurs in any other string as a whole word it is replaced too (``root`` and names shorter
    than 2 characters are only replaced in their own fields: they are not identifying, or too
    ambiguous to search for).
``machine_id``
    GPU UUIDs (``TARGET_INFO_GPU.uuid`` and the ``Uuid`` in ``GpuInfo``) become
    ``00000000-0000-0000-0000-00000000000N``, N the GPU's rank in the file, so GPUs stay distinct.
``timezone``
    A local time that differs from UTC (``TARGET_INFO_SESSION_START_TIME.localTime``,
    ``EXPORT_TIME_LOCAL``) is set to the UTC time. Dates and times themselves are kept.

Kept on purpose: every timestamp, id and number; API names (``cudaGraphLaunch_v10000``); kernel
and NVTX names (unless ``drop_kernel_names``/``drop_nvtx_text``); memcpy kinds and all ``ENUM_*``
tables; the Python-sampling JSON payloads (they reference ``StringIds`` ids for ``File`` and
``Function``, so rewriting those strings rewrites their paths); process and thread names (comm
names such as ``python3`` or ``kworker/3:1``; they are scrubbed only for paths, user and host);
the program's captured stdout (scrubbed like any string); the session UUID (random per capture).
Row counts of all trace tables are unchanged; only ``META_DATA_CAPTURE``,
``TARGET_INFO_SYSTEM_ENV``, ``StringIds`` and environment tables lose rows (the drop options may
add ``StringIds`` rows, when a name they replace is shared with something they keep).

The library never prints and never modifies its input unless asked (``in_place``); the output is
written to a temporary file next to the destination, fsynced and renamed over it, so a failure
never leaves a partial file behind.
"""

from __future__ import annotations

import os
import re
import sqlite3
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Union

try:  # the CLI maps NsysscopeError subclasses to exit codes
    from .errors import NsysscopeError as _ErrorBase
except ImportError:  # pragma: no cover - the module also works on its own
    _ErrorBase = Exception

__all__ = ["Leak", "ScrubError", "ScrubResult", "find_leaks", "scrub", "rewrite_path"]

PathLike = Union[str, "os.PathLike[str]"]

#: placeholders written by :func:`scrub`; they are not leaks
USER_PLACEHOLDER = "user"
HOST_PLACEHOLDER = "host"
ENV_PLACEHOLDER = "<env>"
_ZERO_UUID = "00000000-0000-0000-0000-{:012d}"


class ScrubError(_ErrorBase):
    """The input cannot be scrubbed: missing, not SQLite, or not an nsys export."""

    exit_code = 2


@dataclass(frozen=True)
class Leak:
    """One thing in an export that identifies a machine or a person.

    ``key`` is the ``StringIds`` id, the ``name`` of a ``META_DATA_*``/``TARGET_INFO_SYSTEM_ENV``
    row, or the rowid elsewhere. ``excerpt`` is redacted: it says what the leak is without
    repeating it (``HOME=…``, ``/home/…/sampler.py``, ``a…``).
    """

    table: str
    column: str
    key: Union[int, str]
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


# --------------------------------------------------------------------------------------------
# patterns

# an absolute path: starts a word (not after a letter, digit, '.', '-', '/', '~', ':', '>'), so
# 'kworker/3:1', 'steps/s', URLs and our own '<path>/x' placeholders are not matched
_PATH = re.compile(r"(?<![\w.\-/~:>\\])/[A-Za-z0-9._+@%~\-]+(?:/[A-Za-z0-9._+@%~\-]*)*")
_KEEP_PATH_PREFIXES = ("/dev/", "/proc/", "/sys/", "/dvs/p4/")
_SITE = re.compile(r"/(?:site|dist)-packages/(.*)$")
_STDLIB = re.compile(r"/lib(?:64)?/(?:python|pypy)\d+(?:\.\d+)?t?/(.*)$")
_ENV_VAR = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=")
_UPPER_ENV_VAR = re.compile(r"^([A-Z_][A-Z0-9_]*)=")
_KNOWN_ENV = frozenset(
    "PATH HOME USER LOGNAME USERNAME PWD OLDPWD HOSTNAME SHELL MAIL TERM LANG LD_LIBRARY_PATH "
    "LD_PRELOAD PYTHONPATH PYTHONHOME VIRTUAL_ENV CONDA_PREFIX CONDA_DEFAULT_ENV TMPDIR XDG_RUNTIME_DIR "
    "SSH_AUTH_SOCK SSH_CLIENT SSH_CONNECTION DISPLAY CUDA_VISIBLE_DEVICES".split())
_SECRETISH = re.compile(r"TOKEN|SECRET|PASSW|API_?KEY|CREDENTIAL|AUTH", re.I)
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_JSON_IDS = re.compile(r'"(?:Function|File|Module)"\s*:\s*(\d+)')
_HOME_NAME = re.compile(r"(?<![\w.\-/~:>\\])/(?:home|Users)/([A-Za-z0-9._\-]+)")
_GENERIC_USERS = frozenset({"", "root", "user", "nobody"})
_GENERIC_HOSTS = frozenset({"", "host", "localhost", "Local (CLI)"})

_DELETE = object()  # sentinel: the row goes


def _env_names(value: str, semicolons: bool = False) -> list[str]:
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
    names = [m.group(1) for p in parts if (m := _ENV_VAR.match(p))]
    if len(parts) > 1 and len(names) >= 2 and len(names) * 2 >= len(parts):
        return names
    if len(parts) == 1 and (m := (_ENV_VAR if semicolons else _UPPER_ENV_VAR).match(parts[0])):
        name = m.group(1)
        if semicolons or name in _KNOWN_ENV or _SECRETISH.search(name):
            return [name]
    return []


def rewrite_path(path: str, working_dir: str | None) -> str:
    """The scrubbed form of one absolute ``path`` (see the module docstring)."""
    if path.startswith(_KEEP_PATH_PREFIXES):
        return path
    if working_dir:
        if path.rstrip("/") == working_dir:
            return "."
        if path.startswith(working_dir + "/"):
            rest = path[len(working_dir) + 1:]
            if not _SITE.search("/" + rest):
                return rest
    if m := _SITE.search(path):
        return "<site-packages>/" + m.group(1)
    if m := _STDLIB.search(path):
        return "<stdlib>/" + m.group(1)
    base = path.rstrip("/").rsplit("/", 1)[-1]
    return f"<path>/{base}" if base else "<path>"


def _is_leaky_path(path: str) -> bool:
    """Two components or more (``/opt/x``), or ``/root``; not ``/dev``, ``/proc``, ``/sys``, ``/dvs/p4``."""
    if path.startswith(_KEEP_PATH_PREFIXES):
        return False
    parts = [p for p in path.split("/") if p]
    return len(parts) >= 2 or parts == ["root"]


def _redact_path(path: str) -> str:
    parts = [p for p in path.split("/") if p]
    if len(parts) <= 1:
        return "/" + (parts[0] if parts else "")
    if len(parts) == 2 and parts[0] not in ("home", "Users"):
        return f"/{parts[0]}/…"
    return f"/{parts[0]}/…/{parts[-1]}"


def _redact_name(name: str) -> str:
    return (name[:1] + "…") if name else "''"


def _word(name: str) -> re.Pattern[str]:
    return re.compile(r"(?<![A-Za-z0-9_.\-])" + re.escape(name) + r"(?![A-Za-z0-9_\-])")


# --------------------------------------------------------------------------------------------
# opening


def _connect_ro(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise ScrubError(f"{path}: no such file")
    if not path.is_file():
        raise ScrubError(f"{path}: not a file")
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as e:
        raise ScrubError(f"{path}: cannot read it ({e.strerror})") from None
    if head != b"SQLite format 3\x00":
        raise ScrubError(f"{path}: not an SQLite file (an nsys export is made with "
                         "'nsys export --type sqlite REPORT.nsys-rep')")
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    _check_nsys(conn, path)
    return conn


def _tables(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]


def _check_nsys(conn: sqlite3.Connection, path: Path) -> None:
    try:
        tables = set(_tables(conn))
    except sqlite3.DatabaseError as e:
        conn.close()
        raise ScrubError(f"{path}: not a readable SQLite file ({e})") from None
    missing = {"META_DATA_EXPORT", "StringIds"} - tables
    if missing:
        conn.close()
        raise ScrubError(f"{path}: SQLite, but not an nsys export (no {', '.join(sorted(missing))} table)")


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# --------------------------------------------------------------------------------------------
# what the file says about itself


@dataclass
class _Context:
    tables: list[str]
    text_columns: dict[str, list[str]]
    string_refs: list[tuple[str, str]]  # (table, column) that REFERENCES StringIds(id)
    referenced_ids: set[int]
    working_dir: str | None
    working_dir_from: str
    users: set[str]
    hosts: set[str]
    gpu_uuids: dict[str, str]
    word_patterns: list[tuple[re.Pattern[str], str, str, str]] = field(default_factory=list)


def _columns(conn: sqlite3.Connection, table: str) -> list[tuple[str, str]]:
    return [(r[1], (r[2] or "").upper()) for r in conn.execute(f"PRAGMA table_info({_q(table)})")]


def _string_ref_columns(conn: sqlite3.Connection, tables: list[str]) -> list[tuple[str, str]]:
    refs = []
    known = {("NVTX_EVENTS", "jsonTextId")}
    for t in tables:
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name=?", (t,)).fetchone()[0] or ""
        for line in sql.splitlines():
            m = re.match(r"\s*(\w+)\s+.*REFERENCES\s+StringIds\s*\(\s*id\s*\)", line)
            if m:
                refs.append((t, m.group(1)))
        cols = {c for c, _ in _columns(conn, t)}
        refs.extend((kt, kc) for kt, kc in known if kt == t and kc in cols and (kt, kc) not in refs)
    return refs


def _referenced_ids(conn: sqlite3.Connection, refs: list[tuple[str, str]], tables: list[str]) -> set[int]:
    ids: set[int] = set()
    for t, c in refs:
        ids.update(r[0] for r in conn.execute(
            f"SELECT DISTINCT {_q(c)} FROM {_q(t)} WHERE {_q(c)} IS NOT NULL"))
    if "NVTX_EVENTS" in tables and "jsonText" in {c for c, _ in _columns(conn, "NVTX_EVENTS")}:
        for (j,) in conn.execute("SELECT jsonText FROM NVTX_EVENTS WHERE jsonText IS NOT NULL"):
            ids.update(int(x) for x in _JSON_IDS.findall(j))
    return ids


def _meta(conn: sqlite3.Connection, table: str, tables: list[str]) -> list[tuple[str, str]]:
    if table not in tables:
        return []
    return [(n, v) for n, v in conn.execute(f"SELECT name, value FROM {_q(table)}") if isinstance(v, str)]


def _project_sources(paths: set[str]) -> set[str]:
    """Absolute ``.py`` paths of the program itself (not libraries, not nsys)."""
    return {p for p in paths if p.endswith(".py") and not _SITE.search(p) and not _STDLIB.search(p)
            and not p.startswith(_KEEP_PATH_PREFIXES)}


def _derive_root(sources: set[str], hints: list[str]) -> str | None:
    for h in hints:
        roots = Counter()
        for p in sources:
            i = p.find(f"/{h}/")
            if i > 0:
                roots[p[:i]] += 1
            elif p.endswith(f"/{h}.py"):
                roots[p[: -len(h) - 4]] += 1
        if roots:
            return roots.most_common(1)[0][0]
    if not sources:
        return None
    d = os.path.commonpath(sorted(sources))
    if d in sources:
        d = os.path.dirname(d)
    while d not in ("/", "") and f"{d}/__init__.py" in sources:
        d = os.path.dirname(d)
    return d if d not in ("/", "") else None


def _context(conn: sqlite3.Connection) -> _Context:
    tables = _tables(conn)
    text_columns = {}
    for t in tables:
        if t.startswith("ENUM_"):
            continue
        cols = [c for c, ty in _columns(conn, t) if ty in ("TEXT", "") or "CHAR" in ty or "CLOB" in ty]
        if cols:
            text_columns[t] = cols
    refs = _string_ref_columns(conn, tables)
    capture = _meta(conn, "META_DATA_CAPTURE", tables)
    export = _meta(conn, "META_DATA_EXPORT", tables)
    sysenv = []
    if "TARGET_INFO_SYSTEM_ENV" in tables:
        sysenv = [(n, v) for n, v in conn.execute("SELECT name, value FROM TARGET_INFO_SYSTEM_ENV")
                  if isinstance(v, str)]

    # environment variables as recorded, for PWD / USER / HOME / HOSTNAME
    env: dict[str, str] = {}
    for n, v in capture:
        if n.endswith("ENVIRONMENT_VARIABLE") and (m := _ENV_VAR.match(v)):
            env.setdefault(m.group(1), v[m.end():].strip('"'))
    for n, v in sysenv:
        if n == "DeviceEnvironment":
            for part in v.split(";"):
                if m := _ENV_VAR.match(part):
                    env.setdefault(m.group(1), part[m.end():])

    # every absolute path in the strings, to find the program's sources
    paths: set[str] = set()
    for (v,) in conn.execute("SELECT value FROM StringIds WHERE value LIKE '%/%'"):
        if "\x00" not in v:
            paths.update(_PATH.findall(v))
    for _, v in capture:
        paths.update(_PATH.findall(v))
    sources = _project_sources(paths)

    hints = []
    args = [(n, v) for n, v in capture if re.match(r"PROCESS_\d+:ARGUMENT_\d+$", n)]
    args.sort(key=lambda nv: (nv[0].split(":")[0], int(nv[0].rsplit("_", 1)[1])))
    for (_, a), (_, b) in zip(args, args[1:]):
        if a == "-m" and b:
            hints.append(b.split(".")[0])
    for _, a in args:
        if a.endswith(".py") and not a.startswith("/"):
            hints.append(a.split("/")[0] if "/" in a else a[:-3])

    working_dir, source = None, "none: no absolute working directory or program sources found"
    candidates = [(v.rstrip("/"), f"META_DATA_CAPTURE {n}") for n, v in capture
                  if re.match(r"PROCESS_\d+:WORKING_DIR$", n)]
    if "PWD" in env:
        candidates.append((env["PWD"].rstrip("/"), "PWD in the recorded environment"))
    for cand, where in candidates:
        if not cand.startswith("/") or cand.count("/") < 1 or cand in ("", "/"):
            continue
        if not sources or any(p.startswith(cand + "/") for p in sources):
            working_dir, source = cand, where
            break
    if working_dir is None and sources:
        derived = _derive_root(sources, hints)
        if derived:
            working_dir = derived
            source = (f"prefix of the sources of '{hints[0]}'" if hints and any(
                f"/{hints[0]}/" in p or p.endswith(f"/{hints[0]}.py") for p in sources)
                else "common directory of the program's .py sources")

    users: set[str] = set()
    hosts: set[str] = set()
    for n, v in capture + export:
        if n.endswith("USER_NAME") or n == "EXPORT_USER":
            users.add(v)
        elif n in ("EXPORT_HOST", "DEVICE_DISPLAY_NAME"):
            hosts.add(v)
    for n, v in sysenv:
        if n in ("Hostname", "HostName"):
            hosts.add(v)
    for k in ("USER", "LOGNAME", "USERNAME"):
        if k in env:
            users.add(env[k])
    if "HOSTNAME" in env:
        hosts.add(env["HOSTNAME"])
    for p in list(paths) + [env.get("HOME", "")]:
        if m := _HOME_NAME.match(p):
            users.add(m.group(1))
    users -= {USER_PLACEHOLDER, ""}
    hosts -= _GENERIC_HOSTS
    for h in list(hosts):
        if "." in h and not re.fullmatch(r"[\d.]+", h):
            hosts.add(h.split(".")[0])

    gpu_uuids: dict[str, str] = {}
    if "TARGET_INFO_GPU" in tables and "uuid" in {c for c, _ in _columns(conn, "TARGET_INFO_GPU")}:
        for (u,) in conn.execute("SELECT uuid FROM TARGET_INFO_GPU ORDER BY rowid"):
            if isinstance(u, str) and _UUID.fullmatch(u.removeprefix("GPU-")):
                gpu_uuids.setdefault(u.removeprefix("GPU-").lower(), "")
    for n, v in sysenv:
        if n == "GpuInfo":
            for u in re.findall(r'"Uuid"\s*:\s*"(?:GPU-)?([0-9a-fA-F-]{36})"', v):
                gpu_uuids.setdefault(u.lower(), "")
    zero = _ZERO_UUID.format(0)[:-12]
    gpu_uuids = {u: _ZERO_UUID.format(i) for i, u in enumerate(u for u in gpu_uuids if not u.startswith(zero))}

    ctx = _Context(tables, text_columns, refs, _referenced_ids(conn, refs, tables), working_dir, source,
                   users, hosts, gpu_uuids)
    for name in sorted(users, key=len, reverse=True):
        if name not in _GENERIC_USERS and len(name) >= 2:
            ctx.word_patterns.append((_word(name), USER_PLACEHOLDER, "user", name))
    for name in sorted(hosts, key=len, reverse=True):
        if len(name) >= 2:
            ctx.word_patterns.append((_word(name), HOST_PLACEHOLDER, "host", name))
    return ctx


# --------------------------------------------------------------------------------------------
# the scan: one pass that both find_leaks and scrub use


@dataclass
class _Finding:
    table: str
    column: str
    rowid: int
    key: Union[int, str]
    kinds: list[tuple[str, str]]  # (kind, excerpt)
    new: object  # new cell value, or _DELETE for the row


def _rewrite_text(value: str, ctx: _Context, kinds: list[tuple[str, str]]) -> str:
    """``value`` with paths, user/host names and GPU UUIDs scrubbed; appends what it found."""
    new = value
    if ctx.gpu_uuids and "-" in new:
        def uuid_sub(m: re.Match[str]) -> str:
            rep = ctx.gpu_uuids.get(m.group(0).lower())
            if rep is None:
                return m.group(0)
            kinds.append(("machine_id", m.group(0)[:4] + "…"))
            return rep
        new = _UUID.sub(uuid_sub, new)
    if "/" in new:
        def path_sub(m: re.Match[str]) -> str:
            p = m.group(0)
            if not _is_leaky_path(p):
                return p
            rep = rewrite_path(p, ctx.working_dir)
            if rep != p:
                kinds.append(("abs_path", _redact_path(p)))
            return rep
        new = _PATH.sub(path_sub, new)
    for pat, rep, kind, name in ctx.word_patterns:
        new, n = pat.subn(rep, new)
        if n:
            kinds.append((kind, _redact_name(name)))
    return new


def _field_rule(table: str, name: str, value: str) -> tuple[str, str] | None:
    """Field-level replacement for user/host/working-dir/timezone fields: (kind, new value)."""
    if table in ("META_DATA_CAPTURE", "META_DATA_EXPORT"):
        if (name.endswith("USER_NAME") or name == "EXPORT_USER") and value not in ("", USER_PLACEHOLDER):
            return "user", USER_PLACEHOLDER
        if name in ("EXPORT_HOST", "DEVICE_DISPLAY_NAME") and value not in _GENERIC_HOSTS:
            return "host", HOST_PLACEHOLDER
    if table == "TARGET_INFO_SYSTEM_ENV" and name in ("Hostname", "HostName") and value not in _GENERIC_HOSTS:
        return "host", HOST_PLACEHOLDER
    return None


def _scan(conn: sqlite3.Connection, ctx: _Context) -> Iterator[_Finding]:
    meta_tables = {"META_DATA_CAPTURE", "META_DATA_EXPORT", "TARGET_INFO_SYSTEM_ENV"}
    for table, cols in ctx.text_columns.items():
        whole_env = "ENVIRONMENT" in table.upper() and table not in meta_tables
        has_name = table in meta_tables
        sel = ", ".join(_q(c) for c in cols)
        namecol = ", name" if has_name else ""
        for row in conn.execute(f"SELECT rowid{namecol}, {sel} FROM {_q(table)}"):
            rowid = row[0]
            name = row[1] if has_name else None
            values = row[2:] if has_name else row[1:]
            key: Union[int, str] = name if has_name else rowid
            if whole_env:
                yield _Finding(table, cols[0], rowid, key, [("env", f"{table} row")], _DELETE)
                continue
            v = next((x for c, x in zip(cols, values) if c == "value"), "") if has_name else ""
            if has_name and (name.endswith("ENVIRONMENT_VARIABLE")
                             or ("environment" in name.lower() and _env_names(v or "", semicolons=True))):
                v = v or ""
                var = _ENV_VAR.match(v)
                label = f"{var.group(1)}=…" if var else f"{name} …"
                yield _Finding(table, "value", rowid, key, [("env", label)], _DELETE)
                continue
            for col, value in zip(cols, values):
                if not isinstance(value, str) or not value:
                    continue
                if has_name and col == "name":
                    continue
                kinds: list[tuple[str, str]] = []
                names = _env_names(value) if "=" in value else []
                if names:
                    excerpt = f"{names[0]}=…" + (f" (+{len(names) - 1} more)" if len(names) > 1 else "")
                    if table == "StringIds":
                        new: object = ENV_PLACEHOLDER if rowid in ctx.referenced_ids else _DELETE
                    elif has_name:
                        new = _DELETE
                    else:
                        new = ENV_PLACEHOLDER
                    if value != ENV_PLACEHOLDER:
                        yield _Finding(table, col, rowid, key, [("env", excerpt)], new)
                    continue
                new_value = value
                if has_name and col == "value":
                    rule = _field_rule(table, name, value)
                    if rule:
                        kinds.append((rule[0], _redact_name(value)))
                        new_value = rule[1]
                if new_value is value and ("/" in value or ctx.word_patterns or ctx.gpu_uuids):
                    new_value = _rewrite_text(value, ctx, kinds)
                if kinds and new_value != value:
                    yield _Finding(table, col, rowid, key, kinds, new_value)
    yield from _scan_timezone(conn, ctx)


def _scan_timezone(conn: sqlite3.Connection, ctx: _Context) -> Iterator[_Finding]:
    if "TARGET_INFO_SESSION_START_TIME" in ctx.tables:
        cols = {c for c, _ in _columns(conn, "TARGET_INFO_SESSION_START_TIME")}
        if {"utcTime", "localTime"} <= cols:
            for rowid, utc, local in conn.execute(
                    "SELECT rowid, utcTime, localTime FROM TARGET_INFO_SESSION_START_TIME"):
                if isinstance(local, str) and isinstance(utc, str) and local != utc:
                    yield _Finding("TARGET_INFO_SESSION_START_TIME", "localTime", rowid, rowid,
                                   [("timezone", "local time ≠ UTC")], utc)
    if "META_DATA_EXPORT" in ctx.tables:
        meta = {n: (r, v) for r, n, v in conn.execute("SELECT rowid, name, value FROM META_DATA_EXPORT")}
        if "EXPORT_TIME_LOCAL" in meta:
            rowid, local = meta["EXPORT_TIME_LOCAL"]
            m = re.match(r"^(\S+) ([+-]\d{4})\b", local or "")
            if m and m.group(2) not in ("+0000", "-0000"):
                utc = meta.get("EXPORT_TIME_UTC", (None, m.group(1)))[1]
                yield _Finding("META_DATA_EXPORT", "value", rowid, "EXPORT_TIME_LOCAL",
                               [("timezone", f"UTC{m.group(2)}")], f"{utc} +0000 UTC")


def _leaks(findings: list[_Finding]) -> list[Leak]:
    out = []
    for f in findings:
        seen = set()
        for kind, excerpt in f.kinds:
            if (kind, excerpt) in seen:
                continue
            seen.add((kind, excerpt))
            out.append(Leak(f.table, f.column, f.key, kind, excerpt))
    return out


def find_leaks(path: PathLike) -> list[Leak]:
    """List what in the export at ``path`` identifies a machine or a person (see the module doc).

    One :class:`Leak` per cell and kind of leak (a cell holding two different paths gives two).
    An empty list means the file is clean by this module's policy. Raises :class:`ScrubError`
    when ``path`` is not an nsys SQLite export.
    """
    path = Path(path)
    conn = _connect_ro(path)
    try:
        ctx = _context(conn)
        return _leaks(list(_scan(conn, ctx)))
    finally:
        conn.close()


# --------------------------------------------------------------------------------------------
# scrubbing


def _apply(conn: sqlite3.Connection, findings: list[_Finding]) -> tuple[dict[str, int], int]:
    deleted: Counter[str] = Counter()
    rewritten = 0
    by_table: dict[tuple[str, str], list[tuple[object, int]]] = {}
    deletes: dict[str, set[int]] = {}
    for f in findings:
        if f.new is _DELETE:
            deletes.setdefault(f.table, set()).add(f.rowid)
        else:
            by_table.setdefault((f.table, f.column), []).append((f.new, f.rowid))
    for table, rowids in deletes.items():
        conn.executemany(f"DELETE FROM {_q(table)} WHERE rowid = ?", [(r,) for r in sorted(rowids)])
        deleted[table] += len(rowids)
    for (table, col), updates in by_table.items():
        updates = [(v, r) for v, r in updates if r not in deletes.get(table, ())]
        conn.executemany(f"UPDATE {_q(table)} SET {_q(col)} = ? WHERE rowid = ?", updates)
        rewritten += len(updates)
    return dict(deleted), rewritten


def _set_strings(conn: sqlite3.Connection, ctx: _Context, owners: list[tuple[str, str]],
                 new_values: dict[int, str]) -> None:
    """Give StringIds ids used by ``owners`` columns new values without touching other users.

    An id that another column (or a JSON payload) also references is copied to a new id for
    the ``owners`` columns, so e.g. an API name that happens to equal a kernel name stays.
    """
    if not new_values:
        return
    others: set[int] = set()
    for t, c in ctx.string_refs:
        if (t, c) not in owners:
            others.update(r[0] for r in conn.execute(f"SELECT DISTINCT {_q(c)} FROM {_q(t)} WHERE {_q(c)} IS NOT NULL"))
    if "NVTX_EVENTS" in ctx.tables and ("NVTX_EVENTS", "jsonText") not in owners \
            and "jsonText" in ctx.text_columns.get("NVTX_EVENTS", []):
        for (j,) in conn.execute("SELECT jsonText FROM NVTX_EVENTS WHERE jsonText IS NOT NULL"):
            others.update(int(x) for x in _JSON_IDS.findall(j))
    next_id = (conn.execute("SELECT MAX(id) FROM StringIds").fetchone()[0] or 0) + 1
    inplace, moved = [], {}
    for sid, value in new_values.items():
        if sid in others:
            moved[sid] = next_id
            conn.execute("INSERT INTO StringIds (id, value) VALUES (?, ?)", (next_id, value))
            next_id += 1
        else:
            inplace.append((value, sid))
    conn.executemany("UPDATE StringIds SET value = ? WHERE id = ?", inplace)
    for t, c in owners:
        if moved:
            conn.executemany(f"UPDATE {_q(t)} SET {_q(c)} = ? WHERE {_q(c)} = ?",
                             [(new, old) for old, new in moved.items()])


def _drop_kernel_names(conn: sqlite3.Connection, ctx: _Context) -> int:
    t = "CUPTI_ACTIVITY_KIND_KERNEL"
    if t not in ctx.tables:
        return 0
    cols = [c for c in ("demangledName", "shortName", "mangledName") if (t, c) in ctx.string_refs]
    ids: set[int] = set()
    for c in cols:
        ids.update(r[0] for r in conn.execute(f"SELECT DISTINCT {c} FROM {t} WHERE {c} IS NOT NULL"))
    _set_strings(conn, ctx, [(t, c) for c in cols], {i: f"kernel_{i}" for i in sorted(ids)})
    return len(ids)


def _drop_nvtx_text(conn: sqlite3.Connection, ctx: _Context) -> int:
    """Replace NVTX text with ``range_<n>``, n numbered by first appearance of each text.

    nsys's own Python sampler is kept: its events (JSON payloads) and everything in their
    domain, including the ``Python Periodic Sampling`` domain name, which is how it is found.
    """
    t = "NVTX_EVENTS"
    if t not in ctx.tables:
        return 0
    cols = {c for c, _ in _columns(conn, t)}
    has_text, has_id = "text" in cols, ("textId" in cols and (t, "textId") in ctx.string_refs)
    conds = []
    if "jsonText" in cols:
        conds.append("{a}jsonText IS NULL")
        if "domainId" in cols:
            kept = sorted(r[0] for r in conn.execute(
                f"SELECT DISTINCT domainId FROM {t} WHERE jsonText IS NOT NULL AND domainId IS NOT NULL"))
            if kept:
                conds.append("({a}domainId IS NULL OR {a}domainId NOT IN (%s))" % ",".join(str(int(d)) for d in kept))

    def rewritable(a: str = "") -> str:
        return " AND ".join(c.format(a=a) for c in conds) or "1"

    parts = []
    if has_text:
        parts.append(f"SELECT rowid, text, NULL FROM {t} WHERE text IS NOT NULL AND {rewritable()}")
    if has_id:
        parts.append(f"SELECT n.rowid, s.value, n.textId FROM {t} n JOIN StringIds s ON s.id = n.textId "
                     f"WHERE n.textId IS NOT NULL AND {rewritable('n.')}")
    if not parts:
        return 0
    names: dict[str, str] = {}
    inline: list[tuple[str, int]] = []
    ids: dict[int, str] = {}
    for rowid, text, sid in conn.execute(" UNION ALL ".join(parts) + " ORDER BY 1"):
        rep = names.setdefault(text, f"range_{len(names)}")
        if sid is None:
            inline.append((rep, rowid))
        else:
            ids[sid] = rep
    conn.executemany(f"UPDATE {t} SET text = ? WHERE rowid = ?", inline)
    if ids:
        # an id that a kept event also uses is copied for the rewritten events, not changed
        kept_ids = {r[0] for r in conn.execute(
            f"SELECT DISTINCT textId FROM {t} WHERE textId IS NOT NULL AND NOT ({rewritable()})")}
        _set_strings(conn, ctx, [(t, "textId")], {i: v for i, v in ids.items() if i not in kept_ids})
        next_id = (conn.execute("SELECT MAX(id) FROM StringIds").fetchone()[0] or 0) + 1
        for old, value in ids.items():
            if old in kept_ids:
                conn.execute("INSERT INTO StringIds (id, value) VALUES (?, ?)", (next_id, value))
                conn.execute(f"UPDATE {t} SET textId = ? WHERE textId = ? AND {rewritable()}", (next_id, old))
                next_id += 1
    return len(names)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - not every platform can open a directory
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def scrub(src: PathLike, dst: PathLike | None = None, *, drop_kernel_names: bool = False,
          drop_nvtx_text: bool = False, in_place: bool = False) -> ScrubResult:
    """Write a scrubbed copy of the nsys export ``src`` to ``dst`` (see the module docstring).

    ``src`` is never modified unless ``in_place`` (then ``dst`` must be omitted or equal ``src``,
    and ``src`` is replaced atomically, like any ``dst``). The copy is made with SQLite's backup
    API into a temporary file in ``dst``'s directory, cleaned, vacuumed, fsynced and renamed
    over ``dst``; on any error the temporary file is removed and ``dst`` is left as it was.

    ``drop_kernel_names`` replaces kernel names (the ``StringIds`` rows that
    ``CUPTI_ACTIVITY_KIND_KERNEL.demangledName/shortName/mangledName`` reference) with
    ``kernel_<id>``. ``drop_nvtx_text`` replaces every NVTX text (ranges, marks, domains; inline
    or registered) with ``range_<n>``, the same text always giving the same ``n``.
    """
    src = Path(src)
    if in_place:
        if dst is not None and Path(dst).resolve() != src.resolve():
            raise ScrubError(f"{dst}: in_place scrubs {src} itself; give no other destination")
        dst = src
    elif dst is None:
        raise ScrubError("scrub needs a destination (or in_place=True)")
    dst = Path(dst)
    if not in_place and dst.exists() and dst.resolve() == src.resolve():
        raise ScrubError(f"{dst}: destination is the source; use in_place=True to overwrite it")
    if not dst.parent.is_dir():
        raise ScrubError(f"{dst.parent}: destination directory does not exist")

    src_conn = _connect_ro(src)
    mode = (dst if dst.exists() else src).stat().st_mode & 0o777
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".scrub-tmp", dir=dst.parent)
    except OSError as e:
        src_conn.close()
        raise ScrubError(f"{dst.parent}: cannot write the scrubbed file there ({e.strerror})") from None
    os.close(fd)
    tmp = Path(tmp_name)
    os.chmod(tmp, mode | 0o200)  # mkstemp makes 0600; keep the usual mode, writable by its owner
    try:
        out = sqlite3.connect(tmp, isolation_level=None)
        try:
            src_conn.backup(out)
            src_conn.close()
            out.execute("PRAGMA journal_mode = OFF")
            out.execute("PRAGMA synchronous = OFF")
            ctx = _context(out)
            out.execute("BEGIN")
            findings = list(_scan(out, ctx))
            leaks = _leaks(findings)
            deleted, rewritten = _apply(out, findings)
            nk = _drop_kernel_names(out, ctx) if drop_kernel_names else 0
            nn = _drop_nvtx_text(out, ctx) if drop_nvtx_text else 0
            out.execute("COMMIT")
            remaining = tuple(_leaks(list(_scan(out, ctx))))
            out.execute("VACUUM")
        finally:
            out.close()
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, dst)
        _fsync_dir(dst.parent)
    except sqlite3.DatabaseError as e:
        tmp.unlink(missing_ok=True)
        raise ScrubError(f"{src}: cannot scrub, SQLite error: {e}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        src_conn.close()
        for suffix in ("-journal", "-wal", "-shm"):
            Path(str(tmp) + suffix).unlink(missing_ok=True)
    return ScrubResult(src=src, dst=dst, working_dir=ctx.working_dir, working_dir_from=ctx.working_dir_from,
                       leaks_found=len(leaks), kinds=dict(Counter(l.kind for l in leaks)),
                       rows_deleted=deleted, cells_rewritten=rewritten, kernel_names_dropped=nk,
                       nvtx_texts_dropped=nn, remaining=remaining)
