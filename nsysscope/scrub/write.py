"""Writing the scrubbed copy: apply the scan's findings (sqlite-utils: ``delete_where``,
``Table.convert`` per text column, ``VACUUM``), optionally drop kernel names and NVTX text,
and replace the destination atomically."""

from __future__ import annotations

import itertools
import os
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ..trace.formats import file_kind, is_kineto
from ..trace.nsys.nsys_rep import STAMP_TABLE
from ..util.atomic import replace, target, temp_beside
from .cells import decode_text, is_valid_unicode, stored_text
from .context import (
    ExportContext,
    connect_ro,
    export_context,
    quoted,
    table_columns,
    utils_db,
)
from .kineto import scrub_kineto
from .policy import DELETE, JSON_IDS, Finding, PathLike, ScrubError, ScrubResult
from .private import Keep, unreferenced_strings
from .scan import leaks_of, scan_findings, schema_findings
from .schema import apply_schema

if TYPE_CHECKING:
    from sqlite_utils import Database


def _apply(db: Database, findings: list[Finding]) -> tuple[dict[str, int], int]:
    """Delete the rows that go and rewrite the cells that change, one ``DELETE`` per table and
    (normally) one ``Table.convert`` per column."""
    deletes: dict[str, set[int]] = {}
    rewrites: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        if f.new is DELETE:
            deletes.setdefault(f.table, set()).add(f.rowid)
        else:
            rewrites.setdefault((f.table, f.column), []).append(f)
    for table, rowids in deletes.items():
        db.table(table).delete_where(f"rowid IN ({_ids(rowids)})")
    rewritten = 0
    for (table, col), found in rewrites.items():
        gone = deletes.get(table, set())
        found = [f for f in found if f.rowid not in gone]
        rewritten += len(found)
        raw = [f for f in found if isinstance(f.old, str) and not is_valid_unicode(f.old)]
        raw_ids = {id(f) for f in raw}
        for group in _consistent_groups([f for f in found if id(f) not in raw_ids]):
            db.table(table).convert(col, _lookup({f.old: f.new for f in group}),
                              where=f"rowid IN ({_ids(f.rowid for f in group)})")
        _rewrite_raw(db.conn, table, col, raw)
    return {t: len(r) for t, r in deletes.items()}, rewritten


def _rewrite_raw(conn: sqlite3.Connection, table: str, col: str, found: list[Finding]) -> None:
    """Rewrite text cells that are not valid UTF-8, row by row: SQLite hands such text to no
    Python function (``Table.convert``), so each new text is bound as the bytes it keeps, cast
    back to text (the bytes that were not UTF-8 and are not a leak stay as they were)."""
    conn.executemany(f"UPDATE {quoted(table)} SET {quoted(col)} = CAST(? AS TEXT) "
                     "WHERE rowid = ?",
                     [(stored_text(f.new) if isinstance(f.new, str) else f.new, f.rowid)
                      for f in found])


def _ids(rowids: Iterable[int]) -> str:
    return ",".join(str(int(r)) for r in sorted(rowids))


def _consistent_groups(found: list[Finding]) -> list[list[Finding]]:
    """Split ``found`` so that within a group each old value has one new value (it always has,
    except where a field rule rewrites a value that is also free text in another row)."""
    groups: list[tuple[dict[object, object], list[Finding]]] = []
    for f in found:
        for mapping, members in groups:
            if mapping.get(f.old, f.new) == f.new:
                mapping[f.old] = f.new
                members.append(f)
                break
        else:
            groups.append(({f.old: f.new}, [f]))
    return [members for _, members in groups]


_FUNCTIONS = itertools.count()


def _lookup(mapping: dict[object, object]) -> Callable[[object], object]:
    """The conversion ``Table.convert`` applies: old value -> new value. Each gets its own SQL
    function name (sqlite-utils registers a name once)."""
    def convert(value: object) -> object:
        return mapping.get(value, value)

    convert.__name__ = f"nsysscope_scrub_{next(_FUNCTIONS)}"
    return convert


def _stream_strings(conn: sqlite3.Connection, findings: list[Finding]) -> set[int]:
    """``StringIds`` ids that the rows about to be dropped reference (thread names, program
    output): dropped too when nothing else uses them."""
    ids: set[int] = set()
    cols = {"ThreadNames": ("nameId",), "ProcessStreams": ("filenameId", "contentId"),
            "ANALYSIS_FILE": ("contentId",)}
    for table, names in cols.items():
        rowids = [f.rowid for f in findings if f.table == table and f.new is DELETE]
        present = {n for n, _ in table_columns(conn, table)} if rowids else set()
        have = [c for c in names if c in present]
        for c in have:
            ids.update(r[0] for r in conn.execute(
                f"SELECT DISTINCT {quoted(c)} FROM {quoted(table)} WHERE rowid IN ({_ids(rowids)}) "
                f"AND {quoted(c)} IS NOT NULL"))
    return ids


def _set_strings(conn: sqlite3.Connection, ctx: ExportContext, owners: list[tuple[str, str]],
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
            others.update(r[0] for r in conn.execute(
                f"SELECT DISTINCT {quoted(c)} FROM {quoted(t)} WHERE {quoted(c)} IS NOT NULL"))
    if "NVTX_EVENTS" in ctx.tables and ("NVTX_EVENTS", "jsonText") not in owners \
            and "jsonText" in ctx.text_columns.get("NVTX_EVENTS", []):
        for (j,) in conn.execute("SELECT jsonText FROM NVTX_EVENTS WHERE jsonText IS NOT NULL"):
            others.update(int(x) for x in JSON_IDS.findall(j))
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
            conn.executemany(f"UPDATE {quoted(t)} SET {quoted(c)} = ? WHERE {quoted(c)} = ?",
                             [(new, old) for old, new in moved.items()])


def _drop_kernel_names(conn: sqlite3.Connection, ctx: ExportContext) -> int:
    t = "CUPTI_ACTIVITY_KIND_KERNEL"
    if t not in ctx.tables:
        return 0
    cols = [c for c in ("demangledName", "shortName", "mangledName") if (t, c) in ctx.string_refs]
    ids: set[int] = set()
    for c in cols:
        ids.update(r[0] for r in
                   conn.execute(f"SELECT DISTINCT {c} FROM {t} WHERE {c} IS NOT NULL"))
    _set_strings(conn, ctx, [(t, c) for c in cols], {i: f"kernel_{i}" for i in sorted(ids)})
    return len(ids)


def _drop_nvtx_text(conn: sqlite3.Connection, ctx: ExportContext) -> int:
    """Replace NVTX text with ``range_<n>``, n numbered by first appearance of each text.

    nsys's own Python sampler is kept: its events (JSON payloads) and everything in their
    domain, including the ``Python Periodic Sampling`` domain name, which is how it is found.
    """
    t = "NVTX_EVENTS"
    if t not in ctx.tables:
        return 0
    cols = {c for c, _ in table_columns(conn, t)}
    has_text, has_id = "text" in cols, ("textId" in cols and (t, "textId") in ctx.string_refs)
    conds = []
    if "jsonText" in cols:
        conds.append("{a}jsonText IS NULL")
        if "domainId" in cols:
            kept = sorted(r[0] for r in conn.execute(
                f"SELECT DISTINCT domainId FROM {t} "
                "WHERE jsonText IS NOT NULL AND domainId IS NOT NULL"))
            if kept:
                ids_in = ",".join(str(int(d)) for d in kept)
                conds.append("({a}domainId IS NULL OR {a}domainId NOT IN (" + ids_in + "))")

    def rewritable(a: str = "") -> str:
        return " AND ".join(c.format(a=a) for c in conds) or "1"

    parts = []
    if has_text:
        parts.append(f"SELECT rowid, text, NULL FROM {t} WHERE text IS NOT NULL AND {rewritable()}")
    if has_id:
        parts.append(f"SELECT n.rowid, s.value, n.textId FROM {t} n "
                     "JOIN StringIds s ON s.id = n.textId "
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
        _set_strings(conn, ctx, [(t, "textId")],
                     {i: v for i, v in ids.items() if i not in kept_ids})
        next_id = (conn.execute("SELECT MAX(id) FROM StringIds").fetchone()[0] or 0) + 1
        for old, value in ids.items():
            if old in kept_ids:
                conn.execute("INSERT INTO StringIds (id, value) VALUES (?, ?)", (next_id, value))
                conn.execute(f"UPDATE {t} SET textId = ? WHERE textId = ? AND {rewritable()}",
                             (next_id, old))
                next_id += 1
    return len(names)


def scrub(src: PathLike, dst: PathLike | None = None, *, drop_kernel_names: bool = False,
          drop_nvtx_text: bool = False, in_place: bool = False, force: bool = False,
          keep_process_list: bool = False, keep_program_output: bool = False,
          keep_kernel_string: bool = False, keep_session_uuid: bool = False,
          nsys: str | None = None, slim: bool = False) -> ScrubResult:
    """Write a scrubbed copy of the nsys export ``src`` to ``dst`` (see :mod:`.policy`); a
    torch.profiler JSON trace goes to :func:`~nsysscope.scrub.kineto.scrub_kineto` (``slim``
    drops the ``python_function`` events no CUDA call needs).

    ``src`` is a ``.sqlite``, ``.sqlite.xz``/``.gz`` or ``.nsys-rep`` (exported with ``nsys``,
    ``$NSYS`` or PATH), resolved like every other command's input; it is never modified unless
    ``in_place`` (then ``dst`` must be omitted or equal ``src``, an uncompressed ``.sqlite``,
    and ``src`` is replaced atomically, like any ``dst``). An existing ``dst`` is refused unless
    ``force``. A ``dst`` named ``.xz`` or ``.gz`` is compressed. The copy is made with SQLite's
    backup API into a temporary file in ``dst``'s directory, cleaned, vacuumed, fsynced and
    renamed over ``dst``; on any error the temporary file is removed and ``dst`` is left as it
    was.

    By default the host's process list (all but the traced processes), the program's
    stdout/stderr, the kernel string and the session UUID are dropped (:mod:`.private`);
    ``keep_*`` keeps each. ``drop_kernel_names`` replaces kernel names (the ``StringIds`` rows
    that ``CUPTI_ACTIVITY_KIND_KERNEL.demangledName/shortName/mangledName`` reference) with
    ``kernel_<id>``. ``drop_nvtx_text`` replaces every NVTX text (ranges, marks, domains;
    inline or registered) with ``range_<n>``, the same text always giving the same ``n``.
    """
    src = Path(src)
    if is_kineto(src):  # a torch.profiler JSON trace (``slim``: see scrub/kineto)
        if in_place:
            _in_place(src, dst)
        elif dst is not None:
            _check_target(src, Path(dst), force, json=True)
        return scrub_kineto(src, None if in_place else dst, slim=slim,  # type: ignore[return-value]
                            in_place=in_place)
    keep = Keep(keep_process_list, keep_program_output, keep_kernel_string, keep_session_uuid)
    dst = _destination(src, dst, in_place, force)
    src_conn = connect_ro(src, nsys)
    mode = (dst if dst.exists() else src).stat().st_mode & 0o777
    try:
        tmp = temp_beside(dst)
    except OSError as e:
        src_conn.close()
        raise ScrubError(f"{dst.parent}: cannot write the scrubbed file there "
                         f"({e.strerror})") from None
    os.chmod(tmp, mode | 0o200)  # the mode of the file it replaces (or of SRC), owner-writable
    packed: Path | None = None
    try:
        out = sqlite3.connect(tmp, isolation_level=None)
        out.text_factory = decode_text
        try:
            src_conn.backup(out)
            src_conn.close()
            out.execute("PRAGMA journal_mode = OFF")
            out.execute("PRAGMA synchronous = OFF")
            ctx = export_context(out)
            out.execute("BEGIN")
            schema = schema_findings(out, ctx)
            if apply_schema(out, schema):  # tables and columns named anew: read again
                ctx = export_context(out)
            db = utils_db(out)
            findings = list(scan_findings(out, ctx, keep))
            leaks = leaks_of(schema + findings)
            strings = _stream_strings(out, findings)
            deleted, rewritten = _apply(db, findings)
            orphans = unreferenced_strings(out, ctx, strings)
            if orphans:
                db.table("StringIds").delete_where(f"id IN ({_ids(orphans)})")
                deleted["StringIds"] = deleted.get("StringIds", 0) + len(orphans)
            nk = _drop_kernel_names(out, ctx) if drop_kernel_names else 0
            nn = _drop_nvtx_text(out, ctx) if drop_nvtx_text else 0
            out.execute(f"DROP TABLE IF EXISTS {STAMP_TABLE}")  # nsysscope's, not the trace's
            out.execute("COMMIT")
            remaining = tuple(leaks_of(schema_findings(out, ctx) +
                                       list(scan_findings(out, ctx, keep))))
            db.vacuum()
        finally:
            out.close()
        if dst.name.lower().endswith((".xz", ".gz")):
            packed = temp_beside(dst)
            os.chmod(packed, mode | 0o200)
            _compress(tmp, packed, dst.name.lower().endswith(".xz"))
            tmp.unlink()
            tmp, packed = packed, None
        replace(tmp, dst)
    except sqlite3.DatabaseError as e:
        tmp.unlink(missing_ok=True)
        raise ScrubError(f"{src}: cannot scrub, SQLite error: {e}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        src_conn.close()
        if packed is not None:
            packed.unlink(missing_ok=True)
        for suffix in ("-journal", "-wal", "-shm"):
            Path(str(tmp) + suffix).unlink(missing_ok=True)
    return ScrubResult(src=src, dst=dst, working_dir=ctx.working_dir,
                       working_dir_from=ctx.working_dir_from, leaks_found=len(leaks),
                       kinds=dict(Counter(lk.kind for lk in leaks)),
                       rows_deleted=deleted, cells_rewritten=rewritten, kernel_names_dropped=nk,
                       nvtx_texts_dropped=nn, remaining=remaining)


def _in_place(src: Path, dst: PathLike | None) -> None:
    """Refuse a destination beside ``--in-place`` other than the source itself: the source
    is what is rewritten (a torch.profiler trace was, while the command said it wrote the
    destination, which it never made)."""
    if dst is not None and Path(dst).resolve() != src.resolve():
        raise ScrubError(f"{dst}: --in-place scrubs {src} itself; give no other destination")


def _destination(src: Path, dst: PathLike | None, in_place: bool, force: bool) -> Path:
    if in_place:
        _in_place(src, dst)
        if src.is_file() and not _is_sqlite(src):
            raise ScrubError(f"{src}: --in-place rewrites an uncompressed .sqlite export (or a "
                             "torch.profiler trace) only; give a destination instead")
        return target(src)  # through a link: the file it names is what must be clean
    if dst is None:
        raise ScrubError("scrub needs a destination, or --in-place")
    dst = Path(dst)
    _check_target(src, dst, force, json=False)
    return target(dst)  # a symbolic link is written through, not replaced


def _check_target(src: Path, dst: Path, force: bool, json: bool) -> None:
    """Refuse a destination that is the source, not a regular file, there already (without
    ``force``), in no folder, or named for the other kind of trace (``json``: the source is a
    torch.profiler JSON trace, written as JSON; else an nsys export, written as SQLite)."""
    if dst.exists() and dst.resolve() == src.resolve():
        raise ScrubError(f"{dst}: the destination is the source; --in-place rewrites it")
    if dst.exists() and not dst.is_file():  # the temporary file renamed onto it would
        # replace a device node
        raise ScrubError(f"{dst}: not a regular file (a device, a FIFO or a socket); name a "
                         "file")
    if dst.exists() and not force:
        raise ScrubError(f"{dst}: already exists; pass --force to overwrite it")
    if not dst.parent.is_dir():
        raise ScrubError(f"{dst.parent}: destination directory does not exist")
    named_json = dst.name.lower().endswith((".json", ".json.gz"))
    if json != named_json and not json and file_kind(src) is None:  # not a trace at all
        raise ScrubError(f"{src}: no such file" if not src.exists() else
                         f"{src}: not a trace (nsysscope scrubs .sqlite, .sqlite.xz, "
                         ".sqlite.gz, .nsys-rep and torch.profiler JSON traces)")
    if json != named_json:
        raise ScrubError(
            f"{dst}: {src.name} is a torch.profiler trace, written as JSON: name the "
            "destination .json or .json.gz" if json else
            f"{dst}: {src.name} is an nsys export, written as SQLite: name the destination "
            ".sqlite (or .sqlite.xz/.gz)")


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _compress(src: Path, dst: Path, xz: bool) -> None:
    """``src`` xz- (preset 9) or gzip-compressed into ``dst``; the same input gives the same
    bytes (gzip: no time and no file name in the header, which would name the temporary
    file)."""
    import gzip
    import lzma
    import shutil

    with open(src, "rb") as f, open(dst, "wb") as raw:
        g = lzma.open(raw, "wb", preset=9) if xz else \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0)  # noqa: SIM115
        with g:  # closed here, before raw
            shutil.copyfileobj(f, g, 1 << 22)
