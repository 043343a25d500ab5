"""One job, many files: the ranks of one server profiled apart (one nsys report or
torch.profiler trace per rank, or per node) analysed as one server.

Each file is analysed alone first, as ``nsysscope report FILE`` would (a long one in windows),
keeping its NCCL kernels (:class:`JobPart`: made where the file is read, in a worker). The
job then puts the parts together:

* **clocks**: every file has a clock of its own. Its session start (nsys's
  ``TARGET_INFO_SESSION_START_TIME``, a torch.profiler trace's base time) puts it on the first
  file's time axis; two nodes' clocks still disagree by microseconds to milliseconds, so the
  files' collectives, lined up the way NCCL orders them (:mod:`.alignment`), give what is
  left: a file's offset is its ranks' median offset from their group's reference rank. The
  times of the job's rows are on the reference's axis;
* **processes**: a process key (the pid, in nsys's global id) is a file's own: where two
  files hold the same key (ranks in containers of their own, with pid 1 each), the later
  file's processes and threads are given keys of their own (:func:`_distinct_keys`);
* **ranks waiting for ranks**: the collective waits are measured over the job's kernels
  (:class:`.collectives.RankWaits`) and put on every file's launches, in place of what each
  file alone said;
* the summary is made over every file's rows, as for one export of the whole server.

Memory: the job holds every file's launch and block rows (on disk, as a long trace's windows:
:class:`.stored.SpilledRows`) and every rank's NCCL kernels (~40 bytes each).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..model import LatentSite, Note
from ..trace.arrays import workers
from ..trace.joined import KEY_BITS, joined, keyed, moved, rekeyed
from ..trace.load import Trace
from ..util.forks import map_forked
from .collectives import RankWaits, attach_waits
from .config import AnalysisConfig
from .pipeline import Analysis, analyze_file
from .stored import SpilledRows
from .summarise import summarize
from .windows import columns_of

#: columns of the launch, block and NVTX step rows that hold a time on the file's clock (the
#: rest hold durations, counts, keys and names)
TIMES = {"launches": ("api_start_ns", "api_end_ns", "gpu_start_ns", "gpu_end_ns",
                      "next_api_start_ns", "next_api_end_ns", "next_gpu_start_ns",
                      "block_start_ns", "block_end_ns", "cause_start_ns"),
         "blocks": ("start_ns", "end_ns", "boundary_ns"),
         "steps": ("start_ns", "end_ns")}
#: columns of the launch, block and NVTX step rows that hold a process key, and a thread id
#: (:func:`~nsysscope.trace.joined.keyed`)
ROW_KEYS = {"launches": (("proc",), ("tid", "block_tid", "cause_tid")),
            "blocks": (("proc",), ("tid", "anchor_tid")), "steps": ((), ("tid",))}


@dataclass
class JobPart:
    """What one file of a job gives the job: its own analysis's rows, its identity,
    processes, threads and NCCL kernels (``outline``: a trace with no other events, or with
    every event where a timeline of the job is drawn)."""

    path: str
    outline: Trace
    launches: pd.DataFrame
    blocks: pd.DataFrame
    steps: pd.DataFrame
    latent: list[LatentSite]

    @classmethod
    def of(cls, path: str | Path, a: Analysis, events: bool = False) -> JobPart:
        """The part of the file at ``path`` analysed as ``a`` (with its collectives kept:
        :func:`~.pipeline.analyze_file`; with ``events``, every event)."""
        t = a.trace
        outline = replace(t, source=None) if events else replace(t, **{
            name: getattr(t, name).iloc[:0] for name in (
                "api", "graph_work", "gpu_ops", "syncs", "event_records", "nvtx")}, source=None)
        return cls(str(path), outline, a.launches, a.blocks, a.step_ranges(),
                   list(a.summary.latent))


@dataclass(frozen=True)
class FileClock:
    """How one file's clock was put on the job's axis: ``session_ns`` from the session
    starts, ``refined_ns`` from the collectives (what the session starts left), None where
    the file has no collective that lines up with another file's."""

    path: str
    session_ns: int
    refined_ns: int | None

    @property
    def offset_ns(self) -> int:
        """What the file's times are moved by."""
        return self.session_ns - (self.refined_ns or 0)


def analyze_files(paths: Sequence[str | Path], cfg: AnalysisConfig, nsys: str | None = None,
                  events: bool = False) -> Analysis:
    """The files at ``paths``, one job (:func:`analyze_job`): each read once, a CPU's worth at
    a time in processes forked from this one (:func:`~nsysscope.util.forks.map_forked`);
    ``events``: every file's events kept, on the job's axis (a timeline of the job: each
    file read whole)."""
    def part(path: str | Path) -> JobPart:
        a = analyze_file(path, cfg, nsys, events="all" if events else "none", collectives=True)
        return JobPart.of(path, a, events)

    n = max(1, workers())
    parts = [p for i in range(0, len(paths), n) for p in map_forked(part, list(paths[i:i + n]))]
    return analyze_job(parts, cfg)


def pairs_up(parts: Sequence[JobPart]) -> bool:
    """Whether the files are one job: a rank of one file lines up in collectives with a
    rank of another (:func:`.alignment.align_ranks`)."""
    return len(parts) > 1 and _groups_across(_collectives(parts, _session_offsets(parts)),
                                              parts)


def analyze_job(parts: Sequence[JobPart], cfg: AnalysisConfig) -> Analysis:
    """The analysis of the job whose files gave ``parts`` (the module's doc): one process
    per rank, its waits in collectives measured against the other files' ranks."""
    parts = _distinct_keys(parts)
    session = _session_offsets(parts)
    kernels = _collectives(parts, session)
    ranks = RankWaits.of(kernels)
    clocks = _clocks(parts, session, ranks)
    launches, blocks, steps = SpilledRows(), SpilledRows(), SpilledRows()
    try:
        first_block = 0
        for part, clock in zip(parts, clocks, strict=True):
            moved = _moved(part, clock.offset_ns)
            rows = attach_waits(moved["launches"], ranks)
            waited = rows["block"].to_numpy() >= 0
            rows["block"] = np.where(waited, rows["block"].to_numpy() + first_block, -1)
            first_block += len(moved["blocks"])
            launches.append(columns_of(rows))
            blocks.append(columns_of(moved["blocks"]))
            steps.append(columns_of(moved["steps"]))
        launches.update_parts({"launch": p.index.to_numpy()} for p in launches.chunks(["launch"]))
        blocks.update_parts({"block": p.index.to_numpy()} for p in blocks.chunks(["block"]))
        outline = _outline(parts, clocks)
        summary, table = summarize(outline, launches, cfg, None,
                                   [s for p in parts for s in p.latent], steps)
    except BaseException:
        for store in (launches, blocks, steps):
            store.close()
        raise
    summary = replace(summary, note_facts=[*summary.note_facts, clocks_note(clocks)])
    if all(len(p.outline.api) for p in parts):  # every event held: the trace says its steps
        steps.close()
        return Analysis(outline, cfg, launches, blocks, summary, table)
    return Analysis(outline, cfg, launches, blocks, summary, table, steps=steps)


def file_clocks(parts: Sequence[JobPart]) -> list[FileClock]:
    """How each file's clock is put on the job's axis (:class:`FileClock`), as
    :func:`analyze_job` puts it."""
    parts = _distinct_keys(parts)
    session = _session_offsets(parts)
    return _clocks(parts, session, RankWaits.of(_collectives(parts, session)))


def _session_offsets(parts: Sequence[JobPart]) -> list[int]:
    """Each file's session start less the first file's (0 where either has none)."""
    first = parts[0].outline.meta.session_start_ns
    return [0 if first is None or p.outline.meta.session_start_ns is None
            else int(p.outline.meta.session_start_ns - first) for p in parts]


def _collectives(parts: Sequence[JobPart], session: list[int]) -> pd.DataFrame:
    """Every file's NCCL kernels, on the first file's axis by the session starts."""
    cols = ["proc", "corr_id", "start_ns", "end_ns", "name"]
    kernels = [p.outline.collectives.reindex(columns=cols).assign(
        start_ns=lambda c, s=s: c["start_ns"] + s, end_ns=lambda c, s=s: c["end_ns"] + s,
        name=lambda c: c["name"].astype(str))
        for p, s in zip(parts, session, strict=True) if len(p.outline.collectives)]
    if not kernels:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "name" else "int64")
                             for c in cols})
    return pd.concat(kernels, ignore_index=True)


def _groups_across(kernels: pd.DataFrame, parts: Sequence[JobPart]) -> bool:
    groups = RankWaits.of(kernels).groups if len(kernels) else pd.Series(dtype="int64")
    owner = {int(p): i for i, part in enumerate(parts)
             for p in pd.unique(part.outline.collectives["proc"])} if len(groups) else {}
    files = pd.Series([owner.get(int(p), -1) for p in groups.index], index=groups.index)
    return bool((files.groupby(groups).nunique() > 1).any())


def _clocks(parts: Sequence[JobPart], session: list[int], ranks: RankWaits) -> list[FileClock]:
    """Each file's clock on the job's axis: what the session starts left, its ranks' median
    offset from their group's reference, counted from the first file's (where the first
    file is in that group). None for a file none of whose ranks meets another file's."""
    table = ranks.alignment.table
    file_of = {int(p): i for i, part in enumerate(parts)
               for p in pd.unique(part.outline.collectives["proc"]) if p in table.index}
    files = table.index.to_series().map(file_of)
    spans = files.groupby(table["group"]).nunique()  # files each group's ranks are in
    offsets: list[int | None] = []
    for i in range(len(parts)):
        mine = table[(files == i) & table["group"].map(spans).gt(1)]
        offsets.append(int(np.median(mine["offset_ns"])) if len(mine) else None)
    base = offsets[0] or 0
    return [FileClock(part.path, s, None if o is None else o - base)
            for part, s, o in zip(parts, session, offsets, strict=True)]


def clocks_note(clocks: Sequence[FileClock]) -> Note:
    """The note saying how the files' clocks were put on one axis."""
    return Note("job_clocks", {
        "files": len(clocks), "on": Path(clocks[0].path).name,
        "moved": [{"name": Path(c.path).name, "session_us": c.session_ns / 1e3,
                   "refined_us": None if c.refined_ns is None else -c.refined_ns / 1e3}
                  for c in clocks[1:]]})


def _moved(part: JobPart, offset_ns: int) -> dict[str, pd.DataFrame]:
    """The part's launch, block and step rows with their times moved by ``offset_ns``."""
    out = {}
    for name, df in (("launches", part.launches), ("blocks", part.blocks),
                     ("steps", part.steps)):
        df = df.reset_index(drop=True)
        if offset_ns:
            df = df.assign(**{c: df[c] + offset_ns for c in TIMES[name] if c in df})
        out[name] = df
    return out


def _distinct_keys(parts: Sequence[JobPart]) -> list[JobPart]:
    """The parts, a later file's process keys and thread ids made its own where an earlier
    file holds the same process key (a pid seen in two files is two processes)."""
    seen: set[int] = set()
    out = []
    for i, part in enumerate(parts):
        own = {int(p) for p in part.outline.processes.get("proc", pd.Series(dtype="int64"))} | \
            {int(p) for p in pd.unique(part.launches["proc"])}
        if own & seen:
            part = replace(part, outline=rekeyed(part.outline, i), **{
                name: keyed(getattr(part, name), i, *ROW_KEYS[name]) for name in ROW_KEYS})
            own = {p ^ (i << KEY_BITS) for p in own}
        seen |= own
        out.append(part)
    return out


def _ranked(part: JobPart, order: int) -> pd.DataFrame:
    """The part's processes with ``rank`` (the rank its trace names, given to the one process
    of the file that launched graphs) and ``order`` (the file's place in the job), which
    :func:`.processes.ranks` names them by."""
    procs = part.outline.processes
    launching = pd.unique(part.launches["proc"])
    said = part.outline.meta.rank if len(launching) == 1 else None
    return procs.assign(rank=np.where(procs["proc"].isin(launching) & (said is not None),
                                      said if said is not None else np.nan, np.nan),
                        order=order)


def _outline(parts: Sequence[JobPart], clocks: Sequence[FileClock]) -> Trace:
    """The job as one trace: the first file's identity named for the job, every file's
    processes, threads, NCCL kernels and (where the parts hold them) events, on the job's
    time axis."""
    metas = [p.outline.meta for p in parts]
    first = metas[0]
    meta = replace(
        first, path=f"{first.path} + {len(parts) - 1} more file"
        f"{'s' if len(parts) > 2 else ''} (one job)",
        gpus=tuple(dict.fromkeys(g for m in metas for g in m.gpus)),
        has_sync_records=all(m.has_sync_records for m in metas),
        has_event_records=all(m.has_event_records for m in metas),
        has_nvtx=all(m.has_nvtx for m in metas),
        has_graph_nodes=all(m.has_graph_nodes for m in metas),
        diagnostics=tuple(dict.fromkeys(d for m in metas for d in m.diagnostics)),
        reader_notes=tuple(dict.fromkeys(n for m in metas for n in m.reader_notes)),
        capture_start_ns=min(m.capture_start_ns + c.offset_ns for m, c in zip(
            metas, clocks, strict=True)),
        capture_end_ns=max(m.capture_end_ns + c.offset_ns for m, c in zip(
            metas, clocks, strict=True)),
        can_window=False)
    return joined([moved(replace(p.outline, processes=_ranked(p, i)), c.offset_ns)
                   for i, (p, c) in enumerate(zip(parts, clocks, strict=True))], meta)


