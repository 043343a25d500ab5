"""Group steady-state stalls into sites: one row per thing an engineer has to fix.

A site is a place in the code: the same stall on every tensor-parallel rank (the same phase,
op, chain, thread name and line, in several processes) is one site, and fixing it relieves
every rank at once; its ``thread`` and ``pid`` are those of its first launch.

Sites come biggest first: by the launch rate fixing them would buy when a projection is given
(:mod:`.projection`), else by the GPU idle time after their launches; launch-bound gaps (the
host is slow, nothing to fix at one place) come after the stalls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..model import FIXES, SourceLine, StallSite
from .projection import Projection
from .stored import RowStore, as_rows

SITE_KEYS = ["klass", "phase", "op", "api_chain", "thread_name"]
#: with Python samples (see :mod:`.source_lines`) the line is part of the site
LINE_KEYS = ["src_file", "src_line", "src_function"]
#: the other columns a site is made of
_READ = ["launch", "proc", "steady", "stall", "nvtx_path", "block_start_ns", "block_end_ns",
         "gpu_idle_ns", "block_polls", "thread"]
_LINES = ["block", "src_samples", "src_block_samples", "src_text"]
#: how a site's numbers are put together from its parts' (``first``: the first known value)
_MERGE = dict(count="sum", lost_ns="sum", block_ns="sum", blocks="sum", polls="sum",
              example_launch="first", nvtx_path="first", proc="first", thread="first",
              stalls="sum")


@dataclass(frozen=True)
class SiteTable:
    """The sites of a trace's steady stalls and launch-bound gaps (their launches' keys:
    class, phase, op, API chain, thread name, and the source line where there are lines),
    put together from the launches a part at a time. ``sites``: one row per site, in the
    order of their first launch, with its keys and numbers; ``by_proc``: the same per site
    and process (``site``: the site's row); ``numbers``: each launch's site (-1: none)."""

    keys: list[str]
    lines: bool
    sites: pd.DataFrame
    by_proc: pd.DataFrame
    numbers: np.ndarray

    @classmethod
    def of(cls, launches: pd.DataFrame | RowStore) -> SiteTable:
        rows = as_rows(launches)
        lines = all(c in rows.columns for c in LINE_KEYS)
        keys = SITE_KEYS + (LINE_KEYS if lines else [])
        read = [k for k in keys if k != "thread_name"] + _READ + (_LINES if lines else [])
        numbers = np.full(len(rows), -1, dtype=np.int32)
        number: dict[tuple[Any, ...], int] = {}
        parts, proc_parts, blocks = [], [], []
        seen = pd.DataFrame(columns=["site", "block"])
        for part in rows.chunks(read):
            keyed = _keyed(part, keys)
            if keyed.empty:
                continue
            # sites numbered in the order of their first launch (a few keys, not launches)
            local = keyed.groupby(keys, sort=False, observed=True).ngroup().to_numpy()
            first = keyed.drop_duplicates(keys)[keys].itertuples(index=False, name=None)
            site = np.array([number.setdefault(k, len(number)) for k in first])[local]
            numbers[keyed.index] = site
            keyed = keyed.assign(site=site)
            parts.append(_numbers(keyed, ["site"]))
            proc_parts.append(_numbers(keyed, ["site", "proc"]))
            if lines and (keyed["src_file"] != "").any():  # samples once per block: one
                # block can be paired with more than one launch, in this part or (at its
                # edge) the one before
                firsts = keyed.drop_duplicates(["site", "block"])
                firsts = firsts.merge(seen, on=["site", "block"], how="left", indicator=True)
                firsts = firsts[firsts["_merge"] == "left_only"]
                blocks.append(firsts[["site", "proc", *_LINES]])
                # a later part can meet again only this part's blocks (and no block)
                low = keyed.loc[keyed["block"] >= 0, "block"].min()
                kept = seen if pd.isna(low) else \
                    seen[(seen["block"] >= low) | (seen["block"] < 0)]
                seen = pd.concat([kept, firsts[["site", "block"]]])
        site_keys = pd.DataFrame(list(number), columns=keys)
        if not parts:
            empty = pd.DataFrame(columns=[*keys, *_MERGE])
            return cls(keys, lines, empty, empty.assign(site=0).iloc[:0], numbers)
        sites = _merged(parts, ["site"])
        by_proc = _merged(proc_parts, ["site", "proc"])
        if lines and blocks:
            firsts = pd.concat(blocks)
            sites = sites.join(_samples(firsts, ["site"]))
            by_proc = by_proc.join(_samples(firsts, ["site", "proc"]))
        elif lines:  # no site has a line
            sites = sites.assign(samples=0, in_blocks=0, text=None)
            by_proc = by_proc.assign(samples=0, in_blocks=0, text=None)
        by_proc = by_proc.reset_index(level="site").reset_index(drop=True)
        sites = site_keys.join(sites)  # every site has a part: the keys' rows are the sites
        return cls(keys, lines, sites, by_proc, numbers)

    def stall_sites(self, top: int = 10, projected: list[Projection | None] | None = None,
                    proc: int | None = None) -> list[StallSite]:
        """The sites biggest first (the module doc), at most ``top``; ``projected``: each
        site's projection (:mod:`.projection`); ``proc``: that process's launches only, each
        site's projection still the site's over every process (fixed in the code every rank
        runs, it is fixed in every process that has it)."""
        g = self.sites
        if proc is not None:
            own = self.by_proc[self.by_proc["proc"] == proc].set_index("site")
            g = self.sites[self.keys].join(own.drop(columns=self.keys, errors="ignore"),
                                           how="inner").loc[own.index]
        if g.empty:
            return []
        g = g.assign(
            site=g.index, lost_us=g["lost_ns"] / 1e3,
            mean_block_us=(g["block_ns"] / g["blocks"].where(g["blocks"] > 0)) / 1e3,
            mean_polls=g["polls"] / g["count"],
            speedup=[p.speedup if p else None for p in _of(projected, g.index)],
            rate_if_fixed=[p.total_launches_per_s if p else None
                           for p in _of(projected, g.index)],
            stall_first=g["klass"] != "launch_bound")
        g = g.sort_values(["stall_first", "speedup", "lost_us", "count"], ascending=False,
                          na_position="last").head(top)
        n_stalls = int(self.sites["stalls"].sum() if proc is None else
                       self.by_proc.loc[self.by_proc["proc"] == proc, "stalls"].sum())
        return [StallSite(
            klass=r.klass, count=int(r.count), lost_us=round(float(r.lost_us), 1),
            share=round(r.count / n_stalls, 4) if n_stalls and r.klass != "launch_bound"
            else 0.0,
            phase=r.phase or None, op=r.op or None, api_chain=r.api_chain,
            nvtx_path=r.nvtx_path or "", thread=r.thread,
            mean_block_us=round(float(r.mean_block_us), 1) if pd.notna(r.mean_block_us)
            else 0.0,
            example_launch=int(r.example_launch), fix=FIXES[r.klass],
            source=_source(r) if self.lines else None, pid=int(r.proc) & 0xFFFFFF,
            mean_polls=round(float(r.mean_polls), 1),
            speedup_if_fixed=None if pd.isna(r.speedup) else float(r.speedup),
            launches_per_s_if_fixed=None if pd.isna(r.rate_if_fixed) else float(r.rate_if_fixed))
            for r in g.itertuples()]

    def stalled(self) -> list[int]:
        """The sites a fix can remove (not launch-bound gaps), as rows of :attr:`sites`."""
        return [int(s) for s in self.sites.index[self.sites["klass"] != "launch_bound"]]

    def launch_bound(self) -> list[int]:
        """The sites of launch-bound gaps, as rows of :attr:`sites`."""
        return [int(s) for s in self.sites.index[self.sites["klass"] == "launch_bound"]]


def stall_sites(launches: pd.DataFrame | RowStore, top: int = 10) -> list[StallSite]:
    """The sites of ``launches`` biggest first, without projections (:class:`SiteTable`)."""
    return SiteTable.of(launches).stall_sites(top)


def _of(projected: list[Projection | None] | None, sites: pd.Index) -> list[Projection | None]:
    return [None] * len(sites) if projected is None else [projected[s] for s in sites]


def _keyed(part: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The steady stalls and launch-bound gaps of ``part``, with their site's ``keys``
    (missing: "")."""
    rows = part[part["steady"].to_numpy(dtype=bool) & part["klass"].isin(list(FIXES)).to_numpy()]
    # "python3 (937)": the name without the thread id, the same on every rank
    rows = rows.assign(thread_name=rows["thread"].astype(str).str.replace(r" \(\d+\)$", "",
                                                                         regex=True))
    return rows.assign(**{k: rows[k].astype(object).where(rows[k].notna(), "") for k in keys})


def _numbers(keyed: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Each site's numbers in one part (:data:`_MERGE`), in the order of its first launch:
    counts and sums (GPU idle time lost and block time in whole nanoseconds: their sums are
    exact in any order), and the first known value of the others."""
    group = keyed["site"].to_numpy()
    if "proc" in by:
        procs, n_procs = pd.factorize(keyed["proc"])
        group = group * len(n_procs) + procs
    code = pd.factorize(group)[0]
    n = int(code.max()) + 1
    first = np.unique(code, return_index=True)[1]

    def total(values: np.ndarray) -> np.ndarray:
        return np.bincount(code, weights=np.nan_to_num(values.astype(np.float64)), minlength=n)

    def known(column: str) -> np.ndarray:
        values = keyed[column].to_numpy(dtype=object)
        ok = pd.notna(values)
        out = np.full(n, None, dtype=object)
        at, where = np.unique(code[ok], return_index=True)
        out[at] = values[ok][where]
        return out

    block = (keyed["block_end_ns"] - keyed["block_start_ns"]).to_numpy(dtype=np.float64)
    return pd.DataFrame({
        "count": np.bincount(code, minlength=n),
        "lost_ns": total(np.clip(keyed["gpu_idle_ns"].to_numpy(dtype=np.float64), 0, None)),
        "block_ns": total(block), "blocks": np.bincount(code[~np.isnan(block)], minlength=n),
        "polls": total(keyed["block_polls"].to_numpy()),
        "example_launch": keyed["launch"].to_numpy()[first], "nvtx_path": known("nvtx_path"),
        "proc": keyed["proc"].to_numpy()[first], "thread": known("thread"),
        "stalls": total(keyed["stall"].to_numpy())},
        index=pd.MultiIndex.from_frame(keyed[by].iloc[first]) if len(by) > 1 else
        pd.Index(keyed[by[0]].to_numpy()[first], name=by[0]))


def _samples(firsts: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """The Python samples of each site's blocks (each block once), and the first line's
    text."""
    return firsts.groupby(by, sort=False).agg(
        samples=("src_samples", "sum"), in_blocks=("src_block_samples", "sum"),
        text=("src_text", "first"))


def _merged(parts: list[pd.DataFrame], by: list[str]) -> pd.DataFrame:
    """The parts' numbers of each site (:func:`_numbers`) as one's."""
    if len(parts) == 1:
        return parts[0]
    return pd.concat(parts).groupby(level=by, sort=False).agg(_MERGE)


def _source(r: Any) -> SourceLine | None:
    if not r.src_file:
        return None
    text = r.text if isinstance(r.text, str) and r.text else None
    return SourceLine(file=str(r.src_file), line=int(r.src_line), function=str(r.src_function),
                      samples=int(r.samples),
                      agreement=round(float(r.samples / r.in_blocks), 4) if r.in_blocks else 0.0,
                      text=text)
