"""Opening an export to scrub, and what it says about itself: its text columns, the
``StringIds`` references, the working directory, the user and host names, the GPU UUIDs.

:func:`export_context` reads all of that once; the scan (:mod:`.scan`) and the writer
(:mod:`.write`) work from it.
"""

from __future__ import annotations

import itertools
import os
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UnreadableInput
from ..trace.files import (
    GZIP_MAGIC,
    REPORT_MAGIC,
    REPORT_SUFFIXES,
    SQLITE_MAGIC,
    XZ_MAGIC,
    sqlite_uri,
)
from ..trace.nsys.nsys_rep import STAMP_TABLE
from ..trace.nsys.schema import META_TABLES, truncation, unversioned_export
from ..trace.nsys.sources import resolve
from ..util.text import clipped
from .cells import as_text, decode_text
from .names import Meta, WordPatterns, users_and_hosts, word_patterns
from .paths import KEEP_PATH_PREFIXES, SITE_PATH, STDLIB_PATH, TILDE_HOME, find_paths
from .policy import (
    ENV_VAR,
    JSON_IDS,
    UUID_PATTERN,
    ZERO_UUID,
    NotAnExport,
    ScrubError,
)

# --------------------------------------------------------------------------------------------
# opening


if TYPE_CHECKING:
    from sqlite_utils import Database


def utils_db(conn: sqlite3.Connection) -> Database:
    """sqlite-utils' view of ``conn``: tables, columns, conversions, ``VACUUM`` (imported
    here, not at start-up: every command imports this package)."""
    from sqlite_utils import Database

    return Database(conn)


def connect_ro(path: Path, nsys: str | None = None) -> sqlite3.Connection:
    """The export behind ``path``, read-only. ``.sqlite.xz``/``.gz`` and ``.nsys-rep`` go
    through the resolver every command uses (:func:`nsysscope.trace.nsys.sources.resolve`): it
    decompresses or exports into a cache and never writes to ``path``."""
    if not path.exists():
        raise ScrubError(f"{path}: no such file")
    if not path.is_file():
        raise ScrubError(f"{path}: not a file")
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError as e:
        raise ScrubError(f"{path}: cannot read it ({e.strerror})") from None
    db_path = path
    if head.startswith((XZ_MAGIC, GZIP_MAGIC, REPORT_MAGIC)) or \
            path.name.lower().endswith(REPORT_SUFFIXES):
        try:
            db_path = resolve(path, nsys=nsys)
        except UnreadableInput as e:
            raise ScrubError(str(e)) from None
    elif not head.startswith(SQLITE_MAGIC):
        raise ScrubError(f"{path}: not an SQLite file (nsysscope scrubs .sqlite, .sqlite.xz, "
                         ".sqlite.gz, .nsys-rep and torch.profiler JSON traces; an nsys export "
                         "is made with "
                         "'nsys export --type sqlite REPORT.nsys-rep')")
    cut = truncation(db_path)
    if cut:
        raise NotAnExport(f"{path}: truncated export ({cut}); copy or export it again")
    conn = sqlite3.connect(sqlite_uri(db_path, "mode=ro"), uri=True)
    conn.text_factory = decode_text
    _check_nsys(conn, path)
    return conn








def _tables(conn: sqlite3.Connection) -> list[str]:
    """The export's tables, less SQLite's own and nsysscope's stamp of the report an export
    was made from (:data:`~nsysscope.trace.nsys.nsys_rep.STAMP_TABLE`: a size and a hash, which
    the scrubbed copy drops)."""
    return sorted(t for t in utils_db(conn).table_names()
                  if not t.startswith("sqlite_") and t != STAMP_TABLE)


def _check_nsys(conn: sqlite3.Connection, path: Path) -> None:
    try:
        tables = set(_tables(conn))
    except sqlite3.DatabaseError as e:
        conn.close()
        raise NotAnExport(f"{path}: truncated or corrupt export ({e})") from None
    except UnicodeDecodeError as e:  # a damaged page of the schema
        conn.close()
        raise NotAnExport(f"{path}: corrupt export: text that is not UTF-8 "
                          f"({clipped(str(e))})") from None
    # an export older than schema 2.x has no metadata table: scrubbed all the same
    missing = sorted({"StringIds"} - tables) + \
        ([" or ".join(META_TABLES)] if not tables & set(META_TABLES)
         and not unversioned_export(frozenset(tables)) else [])
    if missing:
        conn.close()
        raise NotAnExport(f"{path}: SQLite, but not an nsys export "
                         f"(no {', '.join(missing)} table)")


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# --------------------------------------------------------------------------------------------
# what the file says about itself


@dataclass
class ExportContext:
    tables: list[str]
    text_columns: dict[str, list[str]]
    string_refs: list[tuple[str, str]]  # (table, column) that REFERENCES StringIds(id)
    referenced_ids: set[int]
    #: the ``StringIds`` ids of the texts the analysis reads (:data:`PROGRAM_TEXT_REFS`)
    program_ids: set[int]
    working_dir: str | None
    working_dir_from: str
    users: set[str]
    hosts: set[str]
    gpu_uuids: dict[str, str]
    word_patterns: WordPatterns = field(default_factory=list)
    #: the same, for the names the analysis reads (:func:`.names.word_patterns`)
    program_word_patterns: WordPatterns = field(default_factory=list)
    #: (table, column) of binary payloads, and what a value there becomes
    payloads: dict[tuple[str, str], bytes | None] = field(default_factory=dict)


def table_columns(conn: sqlite3.Connection, table: str) -> list[tuple[str, str]]:
    """``(name, declared type)`` of each column: the declared type tells text columns apart
    (``columns_dict`` maps an undeclared type to ``str`` too, but not ``CLOB`` or ``VARCHAR``)."""
    return [(c.name, (c.type or "").upper()) for c in utils_db(conn)[table].columns]


def _string_ref_columns(conn: sqlite3.Connection, tables: list[str]) -> list[tuple[str, str]]:
    refs = []
    known = {("NVTX_EVENTS", "jsonTextId")}
    for t in tables:
        sql = utils_db(conn)[t].schema or ""
        for line in sql.splitlines():
            m = re.match(r"\s*(\w+)\s+.*REFERENCES\s+StringIds\s*\(\s*id\s*\)", line)
            if m:
                refs.append((t, m.group(1)))
        cols = {c for c, _ in table_columns(conn, t)}
        refs.extend((kt, kc) for kt, kc in known if kt == t and kc in cols and (kt, kc) not in refs)
    return refs


#: the columns whose ``StringIds`` texts the analysis reads: NVTX range names, kernel names,
#: CUDA API names (and the Python samples' files and functions, :func:`json_ids`)
PROGRAM_TEXT_REFS = frozenset({
    ("NVTX_EVENTS", "textId"), ("CUPTI_ACTIVITY_KIND_KERNEL", "shortName"),
    ("CUPTI_ACTIVITY_KIND_KERNEL", "demangledName"), ("CUPTI_ACTIVITY_KIND_KERNEL", "mangledName"),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "nameId")})


def _referenced_ids(conn: sqlite3.Connection, refs: list[tuple[str, str]],
                    tables: list[str]) -> tuple[set[int], set[int]]:
    """The ``StringIds`` ids something references, and those of them the analysis reads."""
    ids: set[int] = set()
    program = json_ids(conn, tables)
    for t, c in refs:
        found = {r[0] for r in conn.execute(
            f"SELECT DISTINCT {quoted(c)} FROM {quoted(t)} WHERE {quoted(c)} IS NOT NULL")}
        ids |= found
        if (t, c) in PROGRAM_TEXT_REFS:
            program |= found
    return ids | program, program


def json_ids(conn: sqlite3.Connection, tables: list[str]) -> set[int]:
    """``StringIds`` ids that the Python-sampling JSON payloads reference."""
    ids: set[int] = set()
    if "NVTX_EVENTS" in tables and "jsonText" in {c for c, _ in table_columns(conn, "NVTX_EVENTS")}:
        for (j,) in conn.execute("SELECT jsonText FROM NVTX_EVENTS WHERE jsonText IS NOT NULL"):
            ids.update(int(x) for x in JSON_IDS.findall(as_text(j) or ""))  # text, or a blob
    return ids




def _name_values(conn: sqlite3.Connection, table: str) -> list[tuple[str, str]]:
    """The (name, value) rows of a META_DATA_* or TARGET_INFO_SYSTEM_ENV table, as text."""
    return [(as_text(n) or "", text) for n, v in conn.execute(
        f"SELECT name, value FROM {quoted(table)}") if (text := as_text(v)) is not None]


def _meta(conn: sqlite3.Connection, table: str, tables: list[str]) -> list[tuple[str, str]]:
    return _name_values(conn, table) if table in tables else []


def _project_sources(paths: set[str]) -> set[str]:
    """Absolute ``.py`` paths of the program itself (not libraries, not nsys)."""
    return {p for p in paths if p.startswith("/") and p.endswith(".py") and not SITE_PATH.search(p)
            and not STDLIB_PATH.search(p) and not p.startswith(KEEP_PATH_PREFIXES)}


def _derive_root(sources: set[str], hints: list[str]) -> str | None:
    for h in hints:
        roots: Counter[str] = Counter()
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




def export_context(conn: sqlite3.Connection) -> ExportContext:
    """Everything the scan needs to know about the export, read once."""
    tables = _tables(conn)
    refs = _string_ref_columns(conn, tables)
    capture = _meta(conn, "META_DATA_CAPTURE", tables)
    export = [kv for t in META_TABLES for kv in _meta(conn, t, tables)]
    sysenv = _sysenv(conn, tables)
    env = _recorded_env(capture, sysenv)
    paths, tilde_homes = _absolute_paths(conn, capture + export)
    sources = _project_sources(paths)
    working_dir, source = _working_dir(capture, env, sources, _hints(capture))
    users, hosts = users_and_hosts(capture + export, sysenv, env, paths, tilde_homes)
    referenced, program = _referenced_ids(conn, refs, tables)
    ctx = ExportContext(tables, _text_columns(conn, tables), refs, referenced, program,
                        working_dir, source, users, hosts, _gpu_uuids(conn, tables, sysenv))
    ctx.word_patterns, ctx.program_word_patterns = word_patterns(
        users, hosts, _program_words(conn, tables, program))
    ctx.payloads = _payload_columns(conn, ctx.text_columns)
    return ctx


def _payload_columns(conn: sqlite3.Connection,
                     text_columns: dict[str, list[str]]) -> dict[tuple[str, str], bytes | None]:
    """The columns that hold binary payloads, not text: NVTX ``binaryData`` (declared TEXT)
    and any column declared BLOB. Nothing in them can be searched, and the analysis reads
    none, so a value there is cleared: NULL, or an empty blob where the column is NOT NULL."""
    out: dict[tuple[str, str], bytes | None] = {}
    for table in text_columns:
        for c in utils_db(conn)[table].columns:
            if c.name == "binaryData" or "BLOB" in (c.type or "").upper():
                out[table, c.name] = b"" if c.notnull else None
    return out


def _text_columns(conn: sqlite3.Connection, tables: list[str]) -> dict[str, list[str]]:
    out = {}
    for t in tables:
        if t.startswith("ENUM_"):
            continue
        cols = [c for c, ty in table_columns(conn, t)
                if ty in ("TEXT", "") or "CHAR" in ty or "CLOB" in ty or "BLOB" in ty]
        if cols:
            out[t] = cols
    return out


def _sysenv(conn: sqlite3.Connection, tables: list[str]) -> Meta:
    return _meta(conn, "TARGET_INFO_SYSTEM_ENV", tables)


def _recorded_env(capture: Meta, sysenv: Meta) -> dict[str, str]:
    """Environment variables as recorded, for PWD / USER / HOME / HOSTNAME."""
    env: dict[str, str] = {}
    for n, v in capture:
        if n.endswith("ENVIRONMENT_VARIABLE") and (m := ENV_VAR.match(v)):
            env.setdefault(m.group(1), v[m.end():].strip('"'))
    for n, v in sysenv:
        if n == "DeviceEnvironment":
            for part in v.split(";"):
                if m := ENV_VAR.match(part):
                    env.setdefault(m.group(1), part[m.end():])
    return env


def _absolute_paths(conn: sqlite3.Connection, meta: Meta) -> tuple[set[str], set[str]]:
    """Every absolute path in the strings and the ``META_DATA_*`` values (the program's
    sources, and the home folders of user names), and the user names of the ``~NAME/``
    homes there (``load ~carol/ckpts``: no absolute path, so not a name the paths give)."""
    paths: set[str] = set()
    tilde: set[str] = set()
    for v in itertools.chain((v for (v,) in conn.execute(
            "SELECT value FROM StringIds WHERE value LIKE '%/%' OR value LIKE '%\\%'")
            if "\x00" not in v), (v for _, v in meta)):
        paths.update(find_paths(v))
        if "~" in v:
            tilde.update(TILDE_HOME.findall(v))
    return paths, tilde


def _hints(capture: Meta) -> list[str]:
    """The program's package or script names, from its command line."""
    hints = []
    args = [(n, v) for n, v in capture if re.match(r"PROCESS_\d+:ARGUMENT_\d+$", n)]
    args.sort(key=lambda nv: (nv[0].split(":")[0], int(nv[0].rsplit("_", 1)[1])))
    for (_, a), (_, b) in zip(args, args[1:], strict=False):
        if a == "-m" and b:
            hints.append(b.split(".")[0])
    for _, a in args:
        if a.endswith(".py") and not a.startswith("/"):
            hints.append(a.split("/")[0] if "/" in a else a[:-3])
    return hints


def _working_dir(capture: Meta, env: dict[str, str], sources: set[str],
                 hints: list[str]) -> tuple[str | None, str]:
    """The profiled program's working directory, and where it was read from."""
    candidates = [(v.rstrip("/"), f"META_DATA_CAPTURE {n}") for n, v in capture
                  if re.match(r"PROCESS_\d+:WORKING_DIR$", n)]
    if "PWD" in env:
        candidates.append((env["PWD"].rstrip("/"), "PWD in the recorded environment"))
    for cand, where in candidates:
        if not cand.startswith("/") or cand.count("/") < 1 or cand in ("", "/"):
            continue
        if not sources or any(p.startswith(cand + "/") for p in sources):
            return cand, where
    derived = _derive_root(sources, hints) if sources else None
    if derived:
        named = hints and any(f"/{hints[0]}/" in p or p.endswith(f"/{hints[0]}.py")
                              for p in sources)
        return derived, (f"prefix of the sources of '{hints[0]}'" if named
                         else "common directory of the program's .py sources")
    return None, "none: no absolute working directory or program sources found"


def _gpu_uuids(conn: sqlite3.Connection, tables: list[str], sysenv: Meta) -> dict[str, str]:
    """Each GPU UUID and its replacement, ``...-00000000000N`` by rank in the file."""
    found: dict[str, str] = {}
    if "TARGET_INFO_GPU" in tables and \
            "uuid" in {c for c, _ in table_columns(conn, "TARGET_INFO_GPU")}:
        for (u,) in conn.execute("SELECT uuid FROM TARGET_INFO_GPU ORDER BY rowid"):
            if isinstance(u, str) and UUID_PATTERN.fullmatch(u.removeprefix("GPU-")):
                found.setdefault(u.removeprefix("GPU-").lower(), "")
    for n, v in sysenv:
        if n == "GpuInfo":
            for u in re.findall(r'"Uuid"\s*:\s*"(?:GPU-)?([0-9a-fA-F-]{36})"', v):
                found.setdefault(u.lower(), "")
    zero = ZERO_UUID.format(0)[:-12]
    return {u: ZERO_UUID.format(i)
            for i, u in enumerate(u for u in found if not u.startswith(zero))}


def _program_words(conn: sqlite3.Connection, tables: list[str], ids: set[int]) -> set[str]:
    """The names the analysis reads, whole and their first words, in lower case."""
    texts: set[str] = set()
    if ids:
        for sid, value in conn.execute("SELECT id, value FROM StringIds"):
            if sid in ids and (text := as_text(value)):
                texts.add(text)
    if "NVTX_EVENTS" in tables and "text" in {c for c, _ in table_columns(conn, "NVTX_EVENTS")}:
        texts.update(t for (v,) in conn.execute(
            "SELECT DISTINCT text FROM NVTX_EVENTS WHERE text IS NOT NULL")
            if (t := as_text(v)))
    words = {t.lower() for t in texts}
    return words | {t.split(None, 1)[0].lower() for t in texts if t.strip()}
