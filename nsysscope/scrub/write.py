"""Writing the scrubbed copy: apply the scan's findings, optionally drop kernel names and NVTX
text, and replace the destination atomically."""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections import Counter
from pathlib import Path

from ..trace.sources import is_kineto
from .context import _columns, _connect_ro, _Context, _context, _q
from .kineto import scrub_kineto
from .policy import _DELETE, _JSON_IDS, PathLike, ScrubError, ScrubResult
from .scan import _Finding, _leaks, _scan


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
            others.update(r[0] for r in conn.execute(
                f"SELECT DISTINCT {_q(c)} FROM {_q(t)} WHERE {_q(c)} IS NOT NULL"))
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
        ids.update(r[0] for r in
                   conn.execute(f"SELECT DISTINCT {c} FROM {t} WHERE {c} IS NOT NULL"))
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
          drop_nvtx_text: bool = False, in_place: bool = False, slim: bool = False) -> ScrubResult:
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
    if is_kineto(src):  # a torch.profiler JSON trace (``slim``: see scrub/kineto.py)
        return scrub_kineto(src, dst, slim=slim, in_place=in_place)  # type: ignore[return-value]
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
        raise ScrubError(f"{dst.parent}: cannot write the scrubbed file there "
                         f"({e.strerror})") from None
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
    return ScrubResult(src=src, dst=dst, working_dir=ctx.working_dir,
                       working_dir_from=ctx.working_dir_from, leaks_found=len(leaks),
                       kinds=dict(Counter(lk.kind for lk in leaks)),
                       rows_deleted=deleted, cells_rewritten=rewritten, kernel_names_dropped=nk,
                       nvtx_texts_dropped=nn, remaining=remaining)
