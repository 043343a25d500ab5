"""Ranks lined up the way NCCL orders them: the k-th collective of every rank of a
communicator is the same collective.

Every rank of a communicator issues the same collectives in the same order, so its kernels,
taken in order, pair up one to one with a peer's. Two ranks' clocks need not agree: nsys
puts each GPU's timestamps on the host's clock with its own calibration (ranks of one export
end their collectives 0.3 us apart on the H200 captures here, ~10 us on captures from
another machine: issue 53), and ranks profiled apart (one file each) have clocks of their own
that disagree by microseconds to milliseconds. The ends of a matched pair of kernels differ
by the two clocks' offset (a collective ends on every rank at once) plus noise, so the
median difference over the matched pairs is the offset, and the pairs' scatter around it
tells whether the two ranks belong together at all.

:func:`align_ranks` finds, for each process with collectives, its group (the ranks it meets
in collectives), its index shift (its k-th kernel is the group reference's ``k + shift``-th:
a capture that begins or ends a few collectives apart), its clock offset from the reference
and how well its kernels agree with the reference's. Groups are found greedily: each rank,
most kernels first, joins the first group whose reference it agrees with, else starts one.

Choosing the shift. Candidates: near 0 (both ranks recorded from their first collective)
and near the shift the times suggest (``prior_ns``: the offset the clocks are known to have,
0 within one export, the session starts' for files of one job). A candidate whose pairs'
names (op, type, algorithm) disagree more often than another's is out. Among the rest, the
one whose end differences scatter least wins, unless the candidate at 0 (else the one the
times suggest) scatters at most :data:`CLOSE_SPREAD` times as much: on a periodic model a
shift by one layer scatters only ~4 times as much as the right one on the H200 captures
(1.2 us against 0.3 us median deviation), and with tens of microseconds of noise no more,
so order, not scatter, decides there.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

#: candidate shifts tried on each side of 0 and of the shift the times suggest: covers a
#: clock offset of 16 collectives' spacing beyond the prior (1.4-3.3 ms on the TP=2 H200
#: captures, whose collectives come 85-207 us apart)
SEARCH = 16
#: a candidate at the prior shift wins while its scatter is at most this many times the
#: least (the module's doc: a wrong shift by one layer scatters 3.9-4.1 times as much on the
#: TP=2 captures, by one collective 400 times)
CLOSE_SPREAD = 2.0
#: kernels whose end differences decide the shift: the first ones (where the collectives of
#: a model's set-up, of other names, sit) and an even sample of the rest
HEAD, SAMPLE = 256, 1024
#: matched kernels a rank needs to join a group (all of the reference's, where it has fewer):
#: a rank of a stray kernel or two would agree with any rank that had a kernel end near them
MIN_SHARED = 20
#: two ranks are one group when at least this share of their matched kernels end closer to
#: each other (after removing the offset) than to the reference's neighbouring kernel: 1.0
#: on the three TP=2 captures; with normal noise planted on one rank's clock (its kernels
#: 85-207 us apart) 0.98 at 20 us, 0.89 at 30 us, 0.70 at 50 us, 0.54 at 80 us; ranks of two
#: captures laid over each other, 0.009 at any shift (tests/analysis/test_collectives.py)
SAME_GROUP = 0.5


@dataclass(frozen=True)
class Alignment:
    """How the ranks of a trace's collectives line up, one row per process with collectives
    (index ``proc``): ``group`` (named by its reference rank: the member with the most
    kernels), ``shift`` (its k-th kernel is the reference's ``k + shift``-th), ``offset_ns``
    (its clock minus the reference's), ``spread_ns`` (median distance of its matched ends
    from the offset) and ``agree`` (the share of its matched kernels that agree, 1.0 for a
    reference)."""

    table: pd.DataFrame

    @property
    def groups(self) -> pd.Series:
        """The group of each process, named by its smallest process key (the per-launch
        ``collective_group`` column)."""
        procs = self.table.index.to_series()
        return procs.groupby(self.table["group"]).transform("min").astype("int64")

    @classmethod
    def none(cls) -> Alignment:
        return cls(pd.DataFrame({c: pd.Series(dtype="float64" if c == "agree" else "int64")
                                 for c in COLUMNS},
                                index=pd.Index([], name="proc", dtype="int64")))


COLUMNS = ["group", "shift", "offset_ns", "spread_ns", "agree"]


@dataclass(frozen=True)
class Sequence:
    """One rank's collective kernels in order (by end): their ends, name codes and rows in
    the collectives table."""

    proc: int
    end: np.ndarray
    name: np.ndarray
    rows: np.ndarray

    @cached_property
    def gaps(self) -> np.ndarray:
        """Per kernel, the time to its nearest neighbour in this sequence (inf: alone)."""
        d = np.diff(self.end).astype(np.float64)
        inf = np.array([np.inf])
        return np.asarray(np.minimum(np.r_[inf, d], np.r_[d, inf]))


@dataclass(frozen=True)
class Match:
    """How one rank lines up with its group's reference (:class:`Alignment`'s columns)."""

    shift: int
    offset: int
    spread: int
    agree: float


def sequences(collectives: pd.DataFrame) -> list[Sequence]:
    """Each known process's kernels in order, most kernels first (then by process key)."""
    c = collectives
    if c.empty or "proc" not in c:
        return []
    proc = c["proc"].to_numpy()
    keep = np.flatnonzero(proc != -1)  # -1: no process known (nsys); a Kineto pid may be < 0
    end, start = c["end_ns"].to_numpy()[keep], c["start_ns"].to_numpy()[keep]
    codes = pd.factorize(c["name"].astype(str).to_numpy()[keep])[0]
    order = np.lexsort((start, end, proc[keep]))
    p = proc[keep][order]
    cuts = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
    bounds = np.r_[cuts, len(p)]
    seqs = [Sequence(int(p[a]), end[order[a:b]], codes[order[a:b]], keep[order[a:b]])
            for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    return sorted(seqs, key=lambda s: (-len(s.end), s.proc))


def align_ranks(collectives: pd.DataFrame,
                prior_ns: dict[int, int] | None = None) -> Alignment:
    """The :class:`Alignment` of the processes of ``collectives`` (the loader's table:
    ``proc, start_ns, end_ns, name``). ``prior_ns``: each process's clock offset where it is
    known beforehand (files of one job: from their session starts), 0 where not given."""
    seqs = sequences(collectives)
    if not seqs:
        return Alignment.none()
    prior = prior_ns or {}
    refs: list[Sequence] = []
    rows: dict[int, tuple[int, int, int, int, float]] = {}
    for s in seqs:
        for ref in refs:
            m = match(ref, s, prior.get(s.proc, 0) - prior.get(ref.proc, 0))
            if m is not None and m.agree >= SAME_GROUP:
                rows[s.proc] = (ref.proc, m.shift, m.offset, m.spread, m.agree)
                break
        else:
            refs.append(s)
            rows[s.proc] = (s.proc, 0, 0, 0, 1.0)
    t = pd.DataFrame.from_dict(rows, orient="index", columns=COLUMNS).sort_index()
    t.index.name = "proc"
    return Alignment(t.astype({c: "int64" for c in COLUMNS if c != "agree"}))


def match(ref: Sequence, s: Sequence, prior_ns: int = 0) -> Match | None:
    """How ``s`` lines up with ``ref`` (its k-th kernel with ``ref``'s ``k + shift``-th);
    None where they share fewer than :data:`MIN_SHARED` kernels at every shift tried."""
    shift = _best_shift(ref, s, prior_ns)
    if shift is None:
        return None
    k = np.arange(max(0, -shift), min(len(s.end), len(ref.end) - shift))
    d = s.end[k] - ref.end[k + shift]
    median = int(np.median(d))
    off = np.abs(d - median)
    agree = (off * 2 < ref.gaps[k + shift]) & (s.name[k] == ref.name[k + shift])
    spread = int(np.median(off))
    # an offset within the ends' own scatter is not told from none (the TP=2 captures: 21-93
    # ns against 293-295 ns): the ranks' clocks agree as far as the kernels can say
    offset = median if abs(median) > spread else 0
    return Match(shift, offset, spread, float(agree.mean()))


def _best_shift(ref: Sequence, s: Sequence, prior_ns: int) -> int | None:
    n = len(s.end)
    ks = np.unique(np.r_[np.arange(min(n, HEAD)),
                         np.linspace(0, n - 1, min(n, SAMPLE)).astype(np.int64)])
    timed = _timed_shift(ref, s, ks, prior_ns)
    shifts = np.unique(np.r_[np.arange(-SEARCH, SEARCH + 1), timed + np.arange(-SEARCH,
                                                                                SEARCH + 1)])
    at = ks[None, :] + shifts[:, None]
    valid = (at >= 0) & (at < len(ref.end))
    shared = valid.sum(axis=1)
    enough = shared >= min(MIN_SHARED, len(ref.end))  # (the reference has the most)
    if not enough.any():
        return None
    safe = np.clip(at, 0, len(ref.end) - 1)
    d = np.where(valid, (s.end[ks][None, :] - ref.end[safe]).astype(np.float64), np.nan)
    same = np.where(valid, s.name[ks][None, :] == ref.name[safe], False).sum(axis=1)
    names = np.where(enough, same / np.maximum(shared, 1), -1.0)
    ok = enough & (names >= names.max())
    d = np.where(ok[:, None], d, 0.0)  # (a shift left out has no pair to take a median of)
    spread = np.where(ok, np.nanmedian(np.abs(d - np.nanmedian(d, axis=1)[:, None]), axis=1),
                      np.inf)
    least = spread.min()
    for preferred in (0, timed):
        i = np.flatnonzero(shifts == preferred)
        if len(i) and ok[i[0]] and spread[i[0]] <= CLOSE_SPREAD * least:
            return int(preferred)
    return int(shifts[np.argmin(spread)])


def _timed_shift(ref: Sequence, s: Sequence, ks: np.ndarray, prior_ns: int) -> int:
    """The shift the times suggest: the median, over ``ks``, of the index of ``ref``'s kernel
    that ends nearest (``prior_ns`` removed) minus the kernel's own."""
    t = s.end[ks] - prior_ns
    j = np.clip(np.searchsorted(ref.end, t), 1, len(ref.end) - 1) if len(ref.end) > 1 \
        else np.zeros(len(t), dtype=np.int64)
    if len(ref.end) > 1:
        j = np.where(np.abs(ref.end[j - 1] - t) <= np.abs(ref.end[j] - t), j - 1, j)
    return int(np.median(j - ks))


def collective_ids(collectives: pd.DataFrame, alignment: Alignment) -> tuple[np.ndarray,
                                                                                np.ndarray]:
    """Per row of ``collectives``: the collective it is part of (its index in its group's
    reference, numbered on across groups; -1: no peer's kernel lines up with it) and its
    start on the reference's clock."""
    ids = np.full(len(collectives), -1, dtype=np.int64)
    start = collectives["start_ns"].to_numpy().astype(np.int64, copy=True)
    if alignment.table.empty:
        return ids, start
    seqs = {s.proc: s for s in sequences(collectives)}
    base = 0
    for group, members in alignment.table.groupby("group"):
        ref = seqs[int(group)]
        for proc, shift, offset in zip(members.index, members["shift"], members["offset_ns"],
                                       strict=True):
            s = seqs[int(proc)]
            at = np.arange(len(s.end)) + int(shift)
            j = np.clip(at, 0, len(ref.end) - 1)
            lines_up = (at >= 0) & (at < len(ref.end)) & (s.name == ref.name[j]) & \
                (np.abs(s.end - offset - ref.end[j]) * 2 < ref.gaps[j])
            lines_up |= proc == group  # (the reference's own kernels)
            ids[s.rows[lines_up]] = base + at[lines_up]
            start[s.rows] -= offset
        base += len(ref.end)
    return ids, start
