"""Name the Python line behind each stall, from nsys Python sampling.

For every stalled launch, the samples of the thread that blocked, taken inside its block
(``[block_start_ns, block_end_ns]``, bounds included), vote. Each sample votes for its
*culprit frame*: the innermost frame in the user's code, i.e. the first frame, innermost
first, whose file matches none of :attr:`AnalysisConfig.library_paths` (the standard library,
site-packages, frozen modules, torch). During a readback's ``cudaStreamSynchronize`` that is
the ``if is_greedy.all():`` line; during a pageable copy it is the line that made the copy.

Lines are chosen per site, not per stall, so that a stall caught by one or two samples is not
moved to another line by one sample taken a little before or after its block:

1. the stalls of one site (same class, phase, op, API chain and thread) pool their votes;
   every line with at least ``min_line_share`` of the pooled votes is a *candidate*, and so
   is the most voted line;
2. each stall takes the candidate its own samples vote for most (ties: the more voted line
   of the site); a stall with no vote for any candidate takes the site's most voted line.

So a site splits by line only where the samples really show two lines, and the per-launch
table gets ``src_file``, ``src_line``, ``src_function``, ``src_text``, ``src_samples`` (this
block's votes for that line) and ``src_block_samples`` (every sample in the block).
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from ..model import STALL_CLASSES, Note, StallSite
from ..trace.python_samples import PythonSamples
from ..util.text import capped, printable
from .config import AnalysisConfig
from .sites import SITE_KEYS

#: the columns :func:`attach_source_lines` adds to the launch table
LINE_COLUMNS = ["src_file", "src_line", "src_function", "src_text", "src_samples",
                "src_block_samples"]
#: and those of the launch table it reads (the stalls' blocks, their sites)
SOURCE_READS = ["klass", "block", "block_tid", "block_start_ns", "block_end_ns",
                *(k for k in SITE_KEYS if k not in ("klass", "thread_name"))]


def library_predicate(globs: Iterable[str]) -> Callable[[str], bool]:
    """``is_library(path)`` for ``fnmatch`` globs (``*`` also matches ``/``)."""
    globs = tuple(globs)
    if not globs:
        return lambda path: False
    rx = re.compile("|".join(fnmatch.translate(g) for g in globs))
    return lambda path: rx.match(path) is not None


def culprit_frames(samples: PythonSamples, is_library: Callable[[str], bool]) -> pd.DataFrame:
    """Per sample (the rows of ``samples.samples``, same order): ``tid``, ``time_ns``, the
    innermost user frame, ``file``, ``line``, ``function`` (None/-1 where every frame is a
    library's) and ``code``, one number per distinct (file, line, function) (-1: none)."""
    s = samples.samples
    f = samples.frames
    sid, depth = f["sample"].to_numpy(), f["depth"].to_numpy()
    if len(f) > 1 and not ((np.diff(sid) > 0) | ((np.diff(sid) == 0) & (np.diff(depth) > 0))).all():
        f = f.sort_values(["sample", "depth"], kind="stable")
        sid = f["sample"].to_numpy()
    file_code, files = _codes(f["file"])
    fn_code, functions = _codes(f["function"])
    lib = np.fromiter((is_library(str(x)) for x in files), dtype=bool, count=len(files))
    user = np.flatnonzero(~lib[file_code] & (file_code >= 0)) if len(f) else \
        np.zeros(0, dtype=np.int64)
    first_sid, at = np.unique(sid[user], return_index=True)  # innermost user frame per sample
    rows = user[at]
    line = f["line"].to_numpy(dtype=np.int64)[rows]
    span = int(line.max()) + 2 if len(line) else 1
    key = (file_code[rows].astype(np.int64) * len(functions) + fn_code[rows]) * span + (line + 1)
    ukey, inverse = np.unique(key, return_inverse=True)
    uniq = np.stack([ukey // span // max(len(functions), 1), ukey % span - 1,
                     ukey // span % max(len(functions), 1)], axis=1)
    n_ids = int(max(s["sample"].max() if len(s) else -1, sid.max() if len(sid) else -1)) + 1
    code_of = np.full(n_ids, -1, dtype=np.int64)
    code_of[first_sid] = np.asarray(inverse).reshape(-1)
    code = code_of[s["sample"].to_numpy()] if len(s) else np.zeros(0, dtype=np.int64)
    has = code >= 0
    c = np.maximum(code, 0)

    def pick(col: int, values: np.ndarray) -> np.ndarray:
        return np.asarray(np.where(has, values[uniq[c, col]] if len(uniq) else None, None))

    return pd.DataFrame({
        "sample": s["sample"].to_numpy(), "tid": s["tid"].to_numpy(),
        "time_ns": s["time_ns"].to_numpy(),
        "file": pick(0, files),
        "line": np.where(has, uniq[c, 1] if len(uniq) else -1, -1).astype(np.int64),
        "function": pick(2, functions), "code": code})


def _codes(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(col.dtype, pd.CategoricalDtype):
        return col.cat.codes.to_numpy(), np.asarray(col.cat.categories, dtype=object)
    code, values = pd.factorize(col.to_numpy(dtype=object))
    return code, np.asarray(values, dtype=object)


def stall_blocks(launches: pd.DataFrame) -> pd.DataFrame:
    """``tid``, ``start_ns``, ``end_ns`` of the blocks paired with stalled launches: where
    the samples that matter are (only those need parsing)."""
    rows = _stalled(launches)
    return pd.DataFrame({"tid": rows["block_tid"].to_numpy(dtype=np.int64),
                         "start_ns": rows["block_start_ns"].to_numpy(dtype=np.float64),
                         "end_ns": rows["block_end_ns"].to_numpy(dtype=np.float64)})


def is_stalled(launches: pd.DataFrame) -> pd.Series:
    """Whether each launch stalled, waited on in a block: the launches lines are named for."""
    return (launches["block"] >= 0) & launches["klass"].isin([str(k) for k in STALL_CLASSES])


def _stalled(launches: pd.DataFrame) -> pd.DataFrame:
    return launches[is_stalled(launches)]


def block_votes(launches: pd.DataFrame, culprits: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """Votes of the samples inside each stalled launch's block: (``block``, ``code``, ``n``)
    with ``code`` indexing the culprit lines, and the total samples per block (user frame
    or not). ``culprits`` must be sorted by ``tid``, ``time_ns``."""
    rows = _stalled(launches).drop_duplicates("block")
    blocks = rows["block"].to_numpy(dtype=np.int64)
    lo = np.zeros(len(rows), dtype=np.int64)
    hi = np.zeros(len(rows), dtype=np.int64)
    tids = culprits["tid"].to_numpy()
    times = culprits["time_ns"].to_numpy()
    b_tid = rows["block_tid"].to_numpy(dtype=np.int64)
    b_start = rows["block_start_ns"].to_numpy(dtype=np.float64)
    b_end = rows["block_end_ns"].to_numpy(dtype=np.float64)
    for tid in np.unique(b_tid):
        sel = np.flatnonzero(b_tid == tid)
        a, z = np.searchsorted(tids, tid, side="left"), np.searchsorted(tids, tid, side="right")
        t = times[a:z]
        lo[sel] = a + np.searchsorted(t, b_start[sel], side="left")
        hi[sel] = a + np.searchsorted(t, b_end[sel], side="right")
    n = np.maximum(hi - lo, 0)
    totals = pd.Series(n, index=blocks)
    idx = np.repeat(lo, n) + (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n))
    codes = culprits["code"].to_numpy()[idx]
    v = pd.DataFrame({"block": np.repeat(blocks, n), "code": codes})
    v = v[v["code"] >= 0].groupby(["block", "code"], sort=True).size().rename("n").reset_index()
    return v, totals


def attach_source_lines(launches: pd.DataFrame, samples: PythonSamples | None,
                        cfg: AnalysisConfig,
                        is_library: Callable[[str], bool] | None = None) -> pd.DataFrame:
    """The launch table with the ``src_*`` columns (empty where no line is known)."""
    df = launches.assign(**no_source_lines(launches.index))  # the caller's table unchanged
    if samples is None or not samples.ok or samples.samples.empty or df.empty:
        return df
    cul = culprit_frames(samples, is_library or library_predicate(cfg.library_paths))
    lines = cul[cul["code"] >= 0].drop_duplicates("code").set_index("code")[
        ["file", "line", "function"]]
    votes, totals = block_votes(df, cul)
    rows = _stalled(df)
    if rows.empty:
        return df
    assigned = _assign(rows, votes, cfg.min_line_share)
    ok = assigned >= 0
    at = rows.index[ok]
    codes = assigned[ok]
    df.loc[at, "src_file"] = lines["file"].reindex(codes).to_numpy(dtype=object)
    df.loc[at, "src_line"] = lines["line"].reindex(codes).to_numpy(dtype=np.int64)
    df.loc[at, "src_function"] = lines["function"].reindex(codes).to_numpy(dtype=object)
    mine = pd.Series(votes["n"].to_numpy(),
                     index=pd.MultiIndex.from_frame(votes[["block", "code"]]))
    pair = pd.MultiIndex.from_arrays([rows["block"].to_numpy()[ok], codes])
    df.loc[at, "src_samples"] = mine.reindex(pair).fillna(0).to_numpy(dtype=np.int64)
    df.loc[rows.index, "src_block_samples"] = totals.reindex(rows["block"].to_numpy()).fillna(0) \
        .to_numpy(dtype=np.int64)
    root = source_root(cfg)
    text = {c: source_text(lines.loc[c, "file"], lines.loc[c, "line"], root,
                           lines.loc[c, "function"])
            for c in np.unique(codes)}
    df.loc[at, "src_text"] = [text[c] for c in codes]
    return df


def no_source_lines(index: pd.Index) -> dict[str, pd.Series]:
    """The :data:`LINE_COLUMNS` of launches (``index``) whose line is not known: what each
    launch has until :func:`attach_source_lines` names the stalls' lines."""
    return {"src_file": pd.Series(None, index=index, dtype=object),
            "src_line": pd.Series(pd.NA, index=index, dtype="Int64"),
            "src_function": pd.Series(None, index=index, dtype=object),
            "src_text": pd.Series(None, index=index, dtype=object),
            "src_samples": pd.Series(0, index=index, dtype=np.int64),
            "src_block_samples": pd.Series(0, index=index, dtype=np.int64)}


def _assign(rows: pd.DataFrame, votes: pd.DataFrame, min_share: float) -> np.ndarray:
    """The line code of each stalled row (-1: no sample in its site named a user line)."""
    group_cols = [k for k in SITE_KEYS if k in rows.columns]
    keyed = rows[group_cols].astype(object).where(rows[group_cols].notna(), "")
    gkey = keyed.groupby(group_cols, sort=False, dropna=False).ngroup().to_numpy()
    rb = pd.DataFrame({"row": np.arange(len(rows)), "gkey": gkey,
                       "block": rows["block"].to_numpy(dtype=np.int64)})
    pairs = rb.drop_duplicates(["gkey", "block"])[["gkey", "block"]]
    pooled = pairs.merge(votes, on="block").groupby(["gkey", "code"], as_index=False)["n"].sum()
    out = np.full(len(rows), -1, dtype=np.int64)
    if pooled.empty:
        return out
    pooled = pooled.sort_values(["gkey", "n", "code"], ascending=[True, False, True], kind="stable")
    pooled["rank"] = pooled.groupby("gkey").cumcount()
    pooled["share"] = pooled["n"] / pooled.groupby("gkey")["n"].transform("sum")
    cand = pooled[(pooled["rank"] == 0) | (pooled["share"] >= min_share)]
    top = cand[cand["rank"] == 0].set_index("gkey")["code"]
    mine = rb.merge(votes, on="block").merge(cand[["gkey", "code", "rank"]], on=["gkey", "code"])
    mine = mine.sort_values(["row", "n", "rank"], ascending=[True, False, True], kind="stable")
    best = mine.drop_duplicates("row").set_index("row")["code"]
    out[:] = top.reindex(gkey).fillna(-1).to_numpy(dtype=np.int64)
    out[best.index.to_numpy()] = best.to_numpy()
    return out


# -- the line's text ------------------------------------------------------------------------
#
# A frame's file name is the trace's, i.e. the sender's: a shared trace may name
# ``/proc/self/environ`` or ``../../.ssh/id_rsa``. So a file is looked up only under the one
# root the user gave (``source_root``, else the current folder), after resolving links and
# ``..``; only a regular file with a Python suffix, of a plausible size, without NUL bytes; and
# only one line of it comes back, cut to :data:`MAX_TEXT` characters.

#: the suffixes of the files a Python frame's line is read from
SOURCE_SUFFIXES = frozenset({".py", ".pyw", ".pyx", ".pxd", ".pyi"})
#: the largest source file read: CPython's own biggest modules are ~0.3 MB, generated ones
#: (protobuf, vendored tables) ~1 MB; past that it is no source file a frame points at
MAX_SOURCE_BYTES = 2_000_000
#: the most trailing parts of a recorded path matched under the root (deeper trees are rare:
#: site-packages paths run ~8-12 parts)
MAX_DEPTH = 16
#: the longest line text kept (the rest cut, with an ellipsis)
MAX_TEXT = 200


def source_root(cfg: AnalysisConfig) -> Path:
    """The one folder source files are read under: ``source_root`` when given, else the
    current folder. Never a folder the trace names (its working directory is the sender's)."""
    return Path(cfg.source_root) if cfg.source_root else Path.cwd()


def candidate_paths(file: str) -> list[Path]:
    """The relative paths under the root that may hold ``file``, longest first.

    ``file`` as the trace records it: a path relative to the profiled process's folder, or an
    absolute one from the machine it ran on (``/home/dev/serving/probes/x.py``), matched by
    its suffixes (``home/dev/serving/probes/x.py`` ... ``probes/x.py``, ``x.py``). Nothing
    before a ``..`` is kept, so no candidate climbs out of the root."""
    parts = [p for p in file.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        parts = parts[len(parts) - parts[::-1].index(".."):]
    parts = parts[-MAX_DEPTH:]  # a name of 10^5 slashes is not 10^5 lookups
    return [Path(*parts[i:]) for i in range(len(parts))]


def source_text(file: str | None, line: int | None, root: Path,
                function: str | None = None) -> str | None:
    """The text of ``file:line`` (stripped, at most :data:`MAX_TEXT` characters, printable)
    from a file under ``root``, or None when no such file is found there. Scrubbed placeholders
    (``<stdlib>/..``, ``<path>/..``) and pseudo-files (``<string>``) are never found.

    With ``function`` (the name the sample recorded), a file whose line is not inside a
    function of that name is taken to be another version of the source than the one profiled
    (or another file with the same name), and the next candidate is tried: no text rather than
    the wrong one."""
    if not file or line is None or pd.isna(line) or int(line) < 1 or file.startswith("<"):
        return None
    if os.path.splitext(file)[1] not in SOURCE_SUFFIXES:
        return None
    try:
        real_root = root.resolve(strict=True)
    except OSError:
        return None
    for rel in candidate_paths(file):
        lines = _lines(real_root, rel)
        if lines is None or int(line) > len(lines):
            continue
        if function and not _inside(lines, int(line), function):
            continue
        return printable(capped(lines[int(line) - 1].strip(), MAX_TEXT))
    return None


_DEF = re.compile(r"^\s*(?:async\s+)?def\s+(\w+)\s*[\[(]")


def _inside(lines: tuple[str, ...], line: int, function: str) -> bool:
    """Whether ``line`` (1-based) lies in a ``def function`` (``<module>``: in none). Names
    Python makes up (``<lambda>``, ``<genexpr>``, class bodies) are not checked."""
    if function != "<module>" and not function.isidentifier():
        return True
    text = lines[line - 1]
    if not text.strip():
        return True
    if (m := _DEF.match(text)) and m.group(1) == function:
        return True  # the def line itself: where torch.profiler places a function
    indent = len(text) - len(text.lstrip())
    for above in reversed(lines[:line - 1]):
        body = above.lstrip()
        if not body or body.startswith("#"):
            continue
        level = len(above) - len(body)
        if level >= indent:
            continue
        indent = level
        m = _DEF.match(above)
        if m:
            return m.group(1) == function
        if body.startswith("class ") and function != "<module>":
            return True  # a class body, or a method's class: not checked
    return function == "<module>"


def _lines(root: Path, rel: Path) -> tuple[str, ...] | None:
    """The lines of ``root / rel`` when, links and ``..`` resolved, it is a regular file under
    ``root`` with a Python suffix, at most :data:`MAX_SOURCE_BYTES`, holding no NUL byte."""
    try:
        path = (root / rel).resolve(strict=True)
        st = path.stat()
    except (OSError, RuntimeError, ValueError):  # missing, a link loop, a NUL in the name
        return None
    if not path.is_relative_to(root) or path.suffix not in SOURCE_SUFFIXES:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SOURCE_BYTES:  # a FIFO would wait
        return None  # for a writer forever
    return _read_lines(str(path), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=32)
def _read_lines(path: str, mtime_ns: int, size: int) -> tuple[str, ...] | None:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SOURCE_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_SOURCE_BYTES or b"\0" in data:  # grown since, or not text
        return None
    return tuple(data.decode("utf-8", errors="replace").splitlines())


def missing_text_note(sites: Iterable[StallSite], cfg: AnalysisConfig) -> Note | None:
    """Why stall sites with a source line have no text, and the advice that can work, or None
    where every line has its text. ``--source-root`` is advised only where it can help: a
    pseudo-file (``<string>``: exec'd or generated code) or a file that is not Python source
    has no text anywhere, and a folder already given is not advised again (the report kept
    saying "pass --source-root" for a path from another machine, which --source-root could not
    map then). A path recorded on another machine is matched by its end under the root, so no
    --path-map is needed: ``/home/dev/serving/probes/x.py`` is found as ``probes/x.py``."""
    # a frame without a line (torch.profiler's line 0) has no text by nature: its location
    # says so (model.sites.source_location), and no folder could give it one
    missing = list(dict.fromkeys(s.source.file for s in sites
                                 if s.source is not None and not s.source.text
                                 and s.source.line > 0))
    if not missing:
        return None
    nowhere = [f for f in missing if f.startswith("<") or
               os.path.splitext(f)[1] not in SOURCE_SUFFIXES]
    return Note("source_text_missing", {
        "nowhere": nowhere, "not_found": [f for f in missing if f not in nowhere],
        "source_root": bool(cfg.source_root)})
