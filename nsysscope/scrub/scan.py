"""The scan: one pass over every text cell that both :func:`find_leaks` and the writer use.

Each finding says where a leak is, what kind it is (policy in :mod:`.policy`), and what the
cell becomes (or that the row goes).
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from ..trace.formats import is_kineto
from ..trace.nsys.nsys_rep import STAMP_TABLE
from ..trace.nsys.schema import META_TABLES
from .cells import as_text
from .context import (
    ExportContext,
    connect_ro,
    export_context,
    quoted,
    table_columns,
)
from .kineto import find_kineto_leaks
from .paths import is_leaky_path, redact_path, rewrite_path, sub_paths
from .policy import (
    DELETE,
    ENV_PLACEHOLDER,
    ENV_VAR,
    UUID_PATTERN,
    ZERO_UUID,
    Finding,
    Leak,
    NotAnExport,
    PathLike,
    env_names,
    field_rule,
    redact_name,
)
from .private import Keep, scan_private
from .schema import scan_schema
from .secrets import (
    SECRET,
    address_option,
    redact_addresses,
    redact_secrets,
    secret_option,
)

_META_TABLES = frozenset({"META_DATA_CAPTURE", "TARGET_INFO_SYSTEM_ENV", *META_TABLES})
#: a META_DATA_CAPTURE row holding one argument of the profiled command
_ARGUMENT = re.compile(r"PROCESS_\d+:ARGUMENT_\d+")


def _rewrite_text(value: str, ctx: ExportContext, kinds: list[tuple[str, str]],
                  program: bool = False) -> str:
    """``value`` with secrets and addresses, paths, user/host names and GPU UUIDs scrubbed
    (``program``: a name the analysis reads, :func:`.names.word_patterns`); appends what
    it found."""
    new, found = redact_secrets(value)
    kinds += found
    if "-" in new and (ctx.gpu_uuids or "GPU-" in new or "MIG-" in new):
        def uuid_sub(m: re.Match[str]) -> str:
            u = m.group(0).lower()
            rep = ctx.gpu_uuids.get(u)
            if rep is None and m.string[max(0, m.start() - 4):m.start()] in ("GPU-", "MIG-") \
                    and not u.startswith(ZERO_UUID[:24]):  # not one of ours
                # a GPU the file's GPU tables do not list (another node's, in a log line)
                rep = ctx.gpu_uuids[u] = ZERO_UUID.format(len(ctx.gpu_uuids))
            if rep is None:
                return m.group(0)
            kinds.append(("machine_id", m.group(0)[:4] + "…"))
            return rep
        new = UUID_PATTERN.sub(uuid_sub, new)
    def path_sub(p: str) -> str:
        if not is_leaky_path(p):
            return p
        rep = rewrite_path(p, ctx.working_dir)
        if rep != p:
            kinds.append(("abs_path", redact_path(p)))
        return rep

    new = sub_paths(new, path_sub)
    for pat, rep, kind, name in ctx.program_word_patterns if program else ctx.word_patterns:
        new, n = pat.subn(rep, new)
        if n:
            kinds.append((kind, redact_name(name)))
    return new


def scan_findings(conn: sqlite3.Connection, ctx: ExportContext,
                  keep: Keep | None = None) -> Iterator[Finding]:
    """Every finding of the export's rows (the schema's: :func:`schema_findings`)."""
    for table, cols in ctx.text_columns.items():
        yield from _scan_table(conn, ctx, table, cols)
    yield from _scan_timezone(conn, ctx)
    yield from scan_private(conn, ctx, keep or Keep())


def _scan_table(conn: sqlite3.Connection, ctx: ExportContext, table: str,
                cols: list[str]) -> Iterator[Finding]:
    whole_env = "ENVIRONMENT" in table.upper() and table not in _META_TABLES
    has_name = table in _META_TABLES
    sel = ", ".join(quoted(c) for c in cols)
    namecol = ", name" if has_name else ""
    after_secret_option = False  # the previous command-line argument was --api-key, say
    after_address_option = False  # ... or --master-addr
    for row in conn.execute(f"SELECT rowid{namecol}, {sel} FROM {quoted(table)}"):
        rowid = row[0]
        name = (as_text(row[1]) or "") if has_name else None
        values = row[2:] if has_name else row[1:]
        key: int | str = name if name is not None else rowid
        if name is not None and _ARGUMENT.fullmatch(name):
            value = dict(zip(cols, values, strict=True)).get("value")
            argument = as_text(value) or ""
            if after_secret_option and argument and not argument.startswith("-") and \
                    argument != SECRET:
                yield Finding(table, "value", rowid, key, [("secret", f"{name} …")], SECRET,
                               value)
                after_secret_option = False
                continue
            if after_address_option and not argument.startswith("-"):
                redacted, addresses = redact_addresses(argument)
                if addresses:
                    yield Finding(table, "value", rowid, key, addresses, redacted, value)
                    after_address_option = False
                    continue
            after_secret_option = secret_option(argument)
            after_address_option = address_option(argument)
        if whole_env:
            yield Finding(table, cols[0], rowid, key, [("env", f"{table} row")], DELETE)
            continue
        if name is not None:
            env_row = _env_row(table, rowid, name, cols, values)
            if env_row is not None:
                yield env_row
                continue
        for col, value in zip(cols, values, strict=True):
            if not value or (has_name and col == "name"):
                continue
            if isinstance(value, bytes) and (table, col) in ctx.payloads:  # unsearchable
                yield Finding(table, col, rowid, key, [("binary", f"{len(value)} bytes")],
                              ctx.payloads[table, col], value)
                continue
            text = as_text(value)  # text stored as a blob: searched, and rewritten, as text
            found = _scan_cell(ctx, table, col, rowid, key, name, text) if text else None
            if found is not None:
                yield dataclasses.replace(found, old=value)  # matched by the stored value


def schema_findings(conn: sqlite3.Connection, ctx: ExportContext) -> list[Finding]:
    """What the export's schema leaks (:mod:`.schema`), names rewritten as a cell's text is."""
    return list(scan_schema(conn, lambda text, kinds: _rewrite_text(text, ctx, kinds),
                            skip=frozenset({STAMP_TABLE})))


def _env_row(table: str, rowid: int, name: str, cols: list[str],
             values: tuple[object, ...]) -> Finding | None:
    """A ``META_DATA_*`` row that records an environment variable: it goes."""
    v = as_text(next((x for c, x in zip(cols, values, strict=True) if c == "value"), "")) or ""
    if not (name.endswith("ENVIRONMENT_VARIABLE")
            or ("environment" in name.lower() and env_names(v, semicolons=True))):
        return None
    var = ENV_VAR.match(v)
    label = f"{var.group(1)}=…" if var else f"{name} …"
    return Finding(table, "value", rowid, name, [("env", label)], DELETE)


def _scan_cell(ctx: ExportContext, table: str, col: str, rowid: int, key: int | str,
               name: str | None, value: str) -> Finding | None:
    """One text cell: an environment dump, a user/host field, or paths, names, UUIDs."""
    has_name = name is not None
    names = env_names(value) if "=" in value else []
    if names:
        if value == ENV_PLACEHOLDER:
            return None
        excerpt = f"{names[0]}=…" + (f" (+{len(names) - 1} more)" if len(names) > 1 else "")
        if table == "StringIds":
            new: object = ENV_PLACEHOLDER if rowid in ctx.referenced_ids else DELETE
        elif has_name:
            new = DELETE
        else:
            new = ENV_PLACEHOLDER
        return Finding(table, col, rowid, key, [("env", excerpt)], new, value)
    kinds: list[tuple[str, str]] = []
    new_value = value
    if name is not None and col == "value":
        rule = field_rule(table, name, value)
        if rule:
            kinds.append((rule[0], redact_name(value)))
            new_value = rule[1]
    if new_value is value:
        # a name the analysis reads: a user named "sample" renamed the 'sample' phase, one
        # named "launch" the kernel launch_clamp_scalar
        program = (table == "StringIds" and rowid in ctx.program_ids) or \
            (table == "NVTX_EVENTS" and col == "text")
        new_value = _rewrite_text(value, ctx, kinds, program)
    if kinds and new_value != value:
        return Finding(table, col, rowid, key, kinds, new_value, value)
    return None


def _scan_timezone(conn: sqlite3.Connection, ctx: ExportContext) -> Iterator[Finding]:
    if "TARGET_INFO_SESSION_START_TIME" in ctx.tables:
        cols = {c for c, _ in table_columns(conn, "TARGET_INFO_SESSION_START_TIME")}
        if {"utcTime", "localTime"} <= cols:
            for rowid, utc, local in conn.execute(
                    "SELECT rowid, utcTime, localTime FROM TARGET_INFO_SESSION_START_TIME"):
                utc_text, local_text = as_text(utc), as_text(local)
                if utc_text is not None and local_text is not None and local_text != utc_text:
                    yield Finding("TARGET_INFO_SESSION_START_TIME", "localTime", rowid, rowid,
                                   [("timezone", "local time ≠ UTC")], utc_text, local)
    for table in (t for t in META_TABLES if t in ctx.tables):
        meta = {as_text(n): (r, v) for r, n, v in
                conn.execute(f"SELECT rowid, name, value FROM {table}")}
        if "EXPORT_TIME_LOCAL" in meta:
            rowid, local = meta["EXPORT_TIME_LOCAL"]
            m = re.match(r"^(\S+) ([+-]\d{4})\b", as_text(local) or "")
            if m and m.group(2) not in ("+0000", "-0000"):
                utc = as_text(meta.get("EXPORT_TIME_UTC", (None, m.group(1)))[1])
                yield Finding(table, "value", rowid, "EXPORT_TIME_LOCAL",
                              [("timezone", f"UTC{m.group(2)}")], f"{utc} +0000 UTC", local)


def leaks_of(findings: list[Finding]) -> list[Leak]:
    out = []
    for f in findings:
        seen = set()
        for kind, excerpt in f.kinds:
            if (kind, excerpt) in seen:
                continue
            seen.add((kind, excerpt))
            out.append(Leak(f.table, f.column, f.key, kind, excerpt))
    return out


def find_leaks(path: PathLike, *, keep_process_list: bool = False,
               keep_program_output: bool = False, keep_kernel_string: bool = False,
               keep_session_uuid: bool = False, nsys: str | None = None) -> list[Leak]:
    """List what in the export at ``path`` identifies a machine or a person (see
    :mod:`.policy`), and the private items :func:`scrub` drops by default (:mod:`.private`)
    unless kept with the same ``keep_*`` options.

    One :class:`Leak` per cell and kind of leak (a cell holding two different paths gives two;
    a dropped row gives one). An empty list means the file is clean by this policy. ``path``
    is read like :func:`scrub`'s ``src`` (``.sqlite``, ``.sqlite.xz``/``.gz``,
    ``.nsys-rep``). Raises :class:`ScrubError` when it is not an nsys export.
    """
    path = Path(path)
    if is_kineto(path):  # a torch.profiler JSON trace
        return find_kineto_leaks(path)
    keep = Keep(keep_process_list, keep_program_output, keep_kernel_string, keep_session_uuid)
    conn = connect_ro(path, nsys)
    try:
        ctx = export_context(conn)
        return leaks_of(schema_findings(conn, ctx) + list(scan_findings(conn, ctx, keep)))
    except sqlite3.DatabaseError as e:  # a damaged page past the schema (was exit 70)
        raise NotAnExport(f"{path}: truncated or corrupt export ({e})") from None
    finally:
        conn.close()
