"""Ranks waiting for ranks: time spent inside collectives beyond the latest-arriving rank.

When one tensor-parallel rank stalls, its peers do not go idle: they launch the next step on
time and then spin inside its first collective (an NCCL kernel in their graph) until the
late rank arrives. Their own launches look healthy; the time is lost in the collective.

A collective's kernels end together on every rank (none can finish before all have
arrived), so kernels of different processes whose ends lie within ``match_ns`` of each other
are one collective (a process's second kernel in such a group starts a new one). In each
collective the rank whose kernel started last is the one the others waited for; each other
rank's wait is that start minus its own (at most its kernel's duration).

nsys records no NCCL communicator, so an export of several independent groups (data parallel
over tensor parallel) would let one group's kernel end near another's and be matched with it.
:func:`communicators` first tells the groups apart: the ranks of one group end (almost)
every collective together, ranks of different groups only by chance. On the two-rank H200
captures 99.96-100 % of a rank's kernels have their peer's end within 5 us (``GROUP_NS``;
every one within 10 us); laid over each other, the two captures' ranks do so for 2.4-4.3 % of
their kernels (``tests/analysis/test_collectives.py``). Chance grows with how close
collectives follow each other (about 10 us over the gap between them): groups whose
collectives come every 11 us or less cannot be told apart. Kernels are matched within a
group only.

:func:`collective_waits` returns one row per matched kernel: ``proc, corr_id, start_ns,
end_ns, wait_ns, waited_for`` (the latecomer's process, -1 for the latecomer itself), ``op``
(``all-reduce``, ``all-gather``...);
:func:`attach_waits` sums them per launch.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

#: collective kernels of different ranks that end this close together are one collective;
#: NVLink all-reduce ranks finish within a few microseconds of each other
MATCH_NS = 20_000
#: ranks are grouped by kernels that end this close together: tighter than ``MATCH_NS``, so
#: that chance meetings of two groups' kernels are rare (above)
GROUP_NS = 5_000
#: two ranks are in one group when at least this share of each one's collective kernels (while
#: both ran) has the other's end within ``GROUP_NS`` (0.9996-1.0 within a group, 0.024-0.043
#: across groups: above)
SAME_GROUP = 0.9
#: kernels of a rank that must lie in the span both ranks ran (all of them, for a rank with
#: fewer): a rank of one kernel, or one whose records start just before the others end, would
#: otherwise agree with any rank that had a kernel end near it, and join two groups
MIN_SHARED = 20

COLUMNS = ["proc", "corr_id", "start_ns", "end_ns", "wait_ns", "waited_for", "op"]
_OP = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)")


def op_name(kernel: str) -> str:
    """``ncclDevKernel_AllReduce_Sum_bf16_RING_LL`` -> ``all-reduce``."""
    m = _OP.match(kernel)
    if not m:
        return "collective"
    return re.sub(r"(?<!^)(?=[A-Z])", "-", m.group(1)).lower()


def collective_waits(collectives: pd.DataFrame, match_ns: int = MATCH_NS,
                     groups: pd.Series | None = None) -> pd.DataFrame:
    """Per collective kernel of a multi-process trace: how long it waited for a peer
    (``groups``: :func:`communicators`, found here when not given)."""
    c = collectives
    if c.empty or c["proc"].nunique() < 2:
        return pd.DataFrame({k: pd.Series(dtype="int64" if k != "op" else object)
                             for k in COLUMNS})
    groups = communicators(c) if groups is None else groups
    c = c.assign(comm=c["proc"].map(groups).to_numpy())
    c = c.sort_values(["comm", "end_ns", "proc"], kind="stable").reset_index(drop=True)
    end, comm = c["end_ns"].to_numpy(), c["comm"].to_numpy()
    group = np.cumsum(np.r_[True, (np.diff(end) > match_ns) | (comm[1:] != comm[:-1])])
    # a process appearing twice in one group: its kernels are consecutive collectives
    nth = c.groupby([group, c["proc"].to_numpy()]).cumcount().to_numpy()
    gid = pd.factorize(pd.MultiIndex.from_arrays([group, nth]))[0]
    start = c["start_ns"].to_numpy()
    latest = pd.Series(start).groupby(gid).transform("max").to_numpy()
    members = pd.Series(gid).map(pd.Series(gid).value_counts()).to_numpy()
    late_row = pd.Series(start).groupby(gid).transform("idxmax").to_numpy()
    late_proc = c["proc"].to_numpy()[late_row]
    duration = end - start
    wait = np.where(members > 1, np.minimum(latest - start, duration), 0)
    waited_for = np.where((members > 1) & (late_row != np.arange(len(c))), late_proc, -1)
    names = c["name"].astype(str)
    ops = names.map({n: op_name(n) for n in names.unique()})  # a regex per name, not per kernel
    return pd.DataFrame({"proc": c["proc"].to_numpy(), "corr_id": c["corr_id"].to_numpy(),
                         "start_ns": start, "end_ns": end, "wait_ns": wait.astype(np.int64),
                         "waited_for": waited_for.astype(np.int64), "op": ops.to_numpy()})


def communicators(collectives: pd.DataFrame, within_ns: int = GROUP_NS) -> pd.Series:
    """The group of ranks each process of ``collectives`` waits with, by process, named by its
    smallest process key: two processes are in one group when at least :data:`SAME_GROUP` of
    each one's kernels, while both ran, has an end of the other's within ``within_ns``, and
    groups are joined through shared members. Kernels of no known process (``proc`` -1) are
    left out. A loop over pairs of processes (a server's handful), each pair compared in numpy.

    A long trace read in time windows is grouped once, from all its kernels
    (:func:`~nsysscope.analysis.pipeline.analyze_windows`): a window decides nothing alone."""
    if collectives.empty or "proc" not in collectives:
        return pd.Series(dtype="int64", index=pd.Index([], name="proc"))
    known = collectives[collectives["proc"] != -1]  # -1: no process known (nsys); a Kineto
    # trace's pid may be negative
    ends = {p: np.sort(e.to_numpy()) for p, e in known.groupby("proc")["end_ns"]}
    procs = sorted(ends)
    parent = {p: p for p in procs}

    def root(p: int) -> int:
        while parent[p] != p:
            p = parent[p]
        return p

    for i, p in enumerate(procs):
        for q in procs[i + 1:]:
            if min(_matched(ends[p], ends[q], within_ns),
                   _matched(ends[q], ends[p], within_ns)) >= SAME_GROUP:
                a, b = root(p), root(q)
                parent[max(a, b)] = min(a, b)  # a group's root: its smallest member
    return pd.Series([root(p) for p in procs], index=pd.Index(procs, name="proc"),
                     dtype="int64")


def _matched(ends: np.ndarray, other: np.ndarray, within_ns: int) -> float:
    """The share of ``ends`` (sorted) with an end of ``other`` (sorted) within ``within_ns``,
    counted while both ran (a rank whose capture starts later, or lost its last records, is
    still its group's)."""
    if not len(ends) or not len(other):
        return 0.0
    shared = ends[(ends >= max(ends[0], other[0]) - within_ns) &
                  (ends <= min(ends[-1], other[-1]) + within_ns)]
    if not len(shared) or len(shared) < min(MIN_SHARED, len(ends)):
        return 0.0
    ends = shared
    at = np.searchsorted(other, ends)
    before = other[np.clip(at - 1, 0, len(other) - 1)]
    after = other[np.clip(at, 0, len(other) - 1)]
    nearest = np.minimum(np.abs(ends - before), np.abs(after - ends))
    return float(np.mean(nearest <= within_ns))


def attach_waits(launches: pd.DataFrame, waits: pd.DataFrame,
                 groups: pd.Series | None = None) -> pd.DataFrame:
    """``collective_wait_ns`` (the collective wait inside each launch's replay, whose kernels
    carry its correlation id), ``waited_for`` (the peer it waited for longest, -1: none),
    ``waited_in`` (the collective it waited in longest, e.g. ``all-reduce``) and
    ``collective_group`` (its process's group, :func:`communicators`; -1: no collectives)."""
    df = launches.copy()
    df["collective_group"] = df["proc"].map(groups).fillna(-1).astype("int64") \
        if groups is not None and len(groups) else -1
    df["collective_wait_ns"] = 0
    df["waited_for"] = -1
    df["waited_in"] = None
    if waits.empty:
        return df
    per = waits.groupby(["proc", "corr_id"])["wait_ns"].sum()
    peer = waits[waits["waited_for"] >= 0].groupby(["proc", "corr_id", "waited_for", "op"])[
        "wait_ns"].sum().reset_index().sort_values("wait_ns", kind="stable") \
        .drop_duplicates(["proc", "corr_id"], keep="last").set_index(["proc", "corr_id"])
    keys = pd.MultiIndex.from_arrays([df["proc"], df["corr_id"]])
    df["collective_wait_ns"] = per.reindex(keys).fillna(0).to_numpy(dtype=np.int64)
    df["waited_for"] = peer["waited_for"].reindex(keys).fillna(-1).to_numpy(dtype=np.int64)
    df["waited_in"] = peer["op"].reindex(keys).to_numpy()
    return df


def groups_note(launches: pd.DataFrame) -> str | None:
    """The note naming the groups of ranks a trace of several holds (``collective_group``):
    each rank's waits were counted within its own group."""
    g = launches.loc[launches["collective_group"] >= 0, ["collective_group", "proc"]]
    members = g.drop_duplicates().groupby("collective_group")["proc"].apply(sorted)
    members = members[members.map(len) > 1]
    if len(members) < 2:
        return None
    listed = "; ".join("pids " + ", ".join(str(p & 0xFFFFFF) for p in m) for m in members)
    return (f"{len(members)} groups of ranks wait for each other in collectives ({listed}): "
            "each rank's waits are counted within its own group (ranks are grouped by when "
            "their collective kernels end; nsys records no NCCL communicator)")
