"""Group steady-state stalls into sites: one row per thing an engineer has to fix.

A site is a place in the code: the same stall on every tensor-parallel rank (the same phase,
op, chain, thread name and line, in several processes) is one site, and fixing it relieves
every rank at once; its ``thread`` and ``pid`` are those of its first launch.

Sites come biggest first: by the launch rate fixing them would buy when a projection is given
(:mod:`.projection`), else by the GPU idle time after their launches; launch-bound gaps (the
host is slow, nothing to fix at one place) come after the stalls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from ..model import FIXES, SourceLine, StallSite
from .projection import Projection

SITE_KEYS = ["klass", "phase", "op", "api_chain", "thread_name"]
#: with Python samples (see :mod:`.source_lines`) the line is part of the site
LINE_KEYS = ["src_file", "src_line", "src_function"]
#: the other columns a site is made of
_READ = ["launch", "proc", "stall", "nvtx_path", "block_start_ns", "block_end_ns", "gpu_idle_ns",
         "block_polls", "thread"]


def site_rows(launches: pd.DataFrame) -> pd.DataFrame:
    """The steady stalls and launch-bound gaps of ``launches``, keyed by their site: what
    :func:`stall_sites` groups (``scope``, read once for every process's sites)."""
    lines = all(c in launches.columns for c in LINE_KEYS)
    return _keyed(launches, SITE_KEYS + (LINE_KEYS if lines else []), lines)


def stall_sites(launches: pd.DataFrame, top: int = 10,
                if_fixed: Callable[[pd.Index], Projection] | None = None,
                scope: pd.DataFrame | None = None) -> list[StallSite]:
    """Sites of the steady-state stalls and launch-bound gaps. ``if_fixed(rows)``: the
    projection of the whole trace with the stalls of ``rows`` (launch labels) fixed;
    the rows of a site are those of ``scope`` (:func:`site_rows`; default: ``launches``'s),
    so that one process's site, fixed in the code every rank runs, is fixed in every process
    that has it."""
    lines = all(c in launches.columns for c in LINE_KEYS)
    keys = SITE_KEYS + (LINE_KEYS if lines else [])
    keyed = _keyed(launches, keys, lines)
    if keyed.empty:
        return []
    g = keyed.groupby(keys, sort=False, observed=True).agg(
        count=("launch", "size"), lost_us=("lost_us", "sum"), mean_block_us=("block_us", "mean"),
        example_launch=("launch", "first"), nvtx_path=("nvtx_path", "first"),
        proc=("proc", "first"), thread=("thread", "first"), mean_polls=("block_polls", "mean"))
    if lines:
        # samples once per block: one block can be paired with more than one launch
        per_block = keyed.drop_duplicates(keys + ["block"]).groupby(keys, sort=False, observed=True)
        g = g.join(per_block.agg(samples=("src_samples", "sum"),
                                 in_blocks=("src_block_samples", "sum"),
                                 text=("src_text", "first")))
    everywhere = keyed if scope is None else scope
    members = everywhere.groupby(keys, sort=False, observed=True).indices
    g = g.reset_index()
    projected = [if_fixed(everywhere.index[members[tuple(r[k] for k in keys)]])
                 if if_fixed is not None and r["klass"] != "launch_bound" else None
                 for _, r in g.iterrows()]
    g["speedup"] = [p.speedup if p else None for p in projected]
    g["rate_if_fixed"] = [p.total_launches_per_s if p else None for p in projected]
    g["stall_first"] = g["klass"] != "launch_bound"
    g = g.sort_values(["stall_first", "speedup", "lost_us", "count"], ascending=False,
                      na_position="last").head(top)
    n_stalls = int(keyed["stall"].sum())
    return [StallSite(
        klass=r.klass, count=int(r.count), lost_us=round(float(r.lost_us), 1),
        share=round(r.count / n_stalls, 4) if n_stalls and r.klass != "launch_bound" else 0.0,
        phase=r.phase or None, op=r.op or None, api_chain=r.api_chain, nvtx_path=r.nvtx_path or "",
        thread=r.thread,
        mean_block_us=round(float(r.mean_block_us), 1) if pd.notna(r.mean_block_us) else 0.0,
        example_launch=int(r.example_launch), fix=FIXES[r.klass],
        source=_source(r) if lines else None, pid=int(r.proc) & 0xFFFFFF,
        mean_polls=round(float(r.mean_polls), 1),
        speedup_if_fixed=None if pd.isna(r.speedup) else float(r.speedup),
        launches_per_s_if_fixed=None if pd.isna(r.rate_if_fixed) else float(r.rate_if_fixed))
        for r in g.itertuples()]


def _keyed(launches: pd.DataFrame, keys: list[str], lines: bool) -> pd.DataFrame:
    """The steady stalls and launch-bound gaps of ``launches``, with their site's ``keys``
    (missing: "") and their block and lost time in microseconds."""
    read = [k for k in keys if k != "thread_name"] + _READ + \
        (["block", "src_samples", "src_block_samples", "src_text"] if lines else [])
    rows = launches.loc[launches["steady"] & launches["klass"].isin(list(FIXES)), read]
    # "python3 (937)": the name without the thread id, the same on every rank
    rows = rows.assign(thread_name=rows["thread"].astype(str).str.replace(r" \(\d+\)$", "",
                                                                         regex=True))
    return rows.assign(**{k: rows[k].astype(object).where(rows[k].notna(), "") for k in keys},
                       block_us=(rows["block_end_ns"] - rows["block_start_ns"]) / 1e3,
                       lost_us=rows["gpu_idle_ns"].clip(lower=0) / 1e3)


def _source(r: Any) -> SourceLine | None:
    if not r.src_file:
        return None
    text = r.text if isinstance(r.text, str) and r.text else None
    return SourceLine(file=str(r.src_file), line=int(r.src_line), function=str(r.src_function),
                      samples=int(r.samples),
                      agreement=round(float(r.samples / r.in_blocks), 4) if r.in_blocks else 0.0,
                      text=text)
