"""Ranks waiting for ranks: time spent inside collectives beyond the latest-arriving rank.

When one tensor-parallel rank stalls, its peers do not go idle: they launch the next step on
time and then spin inside its first collective (an NCCL kernel in their graph) until the
late rank arrives. Their own launches look healthy; the time is lost in the collective.

The kernels of one collective are found the way NCCL orders them (:mod:`.alignment`): the
k-th collective of each rank of a group is the same one, each rank's clock offset from the
group's reference rank is the median difference of their matched ends, and a rank's wait
is measured after removing it: in each collective the rank whose kernel started last is the
one the others waited for, and each other rank's wait is that start minus its own (at most
its kernel's duration). nsys records no NCCL communicator; the groups are the ranks whose
kernels line up (:func:`.alignment.align_ranks`), so the ranks of two independent groups
(data parallel over tensor parallel) are kept apart.

:func:`collective_waits` returns one row per kernel of a group: ``proc, corr_id, start_ns,
end_ns, wait_ns, waited_for`` (the latecomer's process, -1 for the latecomer itself, or for a
kernel matched with no peer), ``op`` (``all-reduce``, ``all-gather``...); :class:`RankWaits`
holds them summed per launch, made once from every kernel of a trace (a long trace's windows
are each given the whole trace's), and :func:`attach_waits` puts them on the launches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..model import Note
from .alignment import Alignment, align_ranks, collective_ids

COLUMNS = ["proc", "corr_id", "start_ns", "end_ns", "wait_ns", "waited_for", "op"]
#: ``waited_for`` of a kernel that waited for a rank not in the input: a rank whose group's
#: other ranks are not there (one file of a job given alone)
ABSENT = -2
#: a rank without peers: the share of its kernels of one name (op, type, algorithm) that
#: are taken to have waited for nobody, the largest of which is the collective's own time;
#: on the TP=2 H200 captures a rank's bf16 all-reduce takes 13.0-13.3 us (p10-p50) where it
#: did not wait, and 0.5-20 ms where it waited for its stalled peer (4 % of them)
OWN_TIME = 0.1
#: what :class:`RankWaits` holds per launch (keyed by ``proc, corr_id``)
PER_LAUNCH = ["collective_wait_ns", "waited_for", "waited_in"]
_OP = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)")


def op_name(kernel: str) -> str:
    """``ncclDevKernel_AllReduce_Sum_bf16_RING_LL`` -> ``all-reduce``."""
    m = _OP.match(kernel)
    if not m:
        return "collective"
    return re.sub(r"(?<!^)(?=[A-Z])", "-", m.group(1)).lower()


def collective_waits(collectives: pd.DataFrame,
                     alignment: Alignment | None = None) -> pd.DataFrame:
    """Per collective kernel of a multi-process trace: how long it waited for a peer
    (``alignment``: :func:`.alignment.align_ranks`, found here when not given)."""
    c = collectives
    if c.empty:
        return pd.DataFrame({k: pd.Series(dtype="int64" if k != "op" else object)
                             for k in COLUMNS})
    alignment = align_ranks(c) if alignment is None else alignment
    ids, start = collective_ids(c, alignment)
    alone = ids < 0
    gid = np.where(alone, -1 - np.arange(len(c)), ids)  # a kernel of no collective: its own
    g = pd.Series(start).groupby(gid)
    latest = g.transform("max").to_numpy()
    members = pd.Series(gid).map(pd.Series(gid).value_counts()).to_numpy()
    late_row = g.transform("idxmax").to_numpy()
    proc = c["proc"].to_numpy()
    end = c["end_ns"].to_numpy()
    duration = end - c["start_ns"].to_numpy()
    wait = np.where(members > 1, np.clip(latest - start, 0, duration), 0)
    waited_for = np.where((members > 1) & (late_row != np.arange(len(c))), proc[late_row], -1)
    names = c["name"].astype(str)
    lone = np.isin(proc, _without_peers(alignment))
    if lone.any():  # its peers are not in the input: what its kernels took beyond their own time
        own = pd.Series(duration[lone]).groupby([proc[lone], names.to_numpy()[lone]])
        beyond = np.clip(duration[lone] - own.transform("quantile", OWN_TIME).to_numpy(), 0,
                         None)
        wait[lone] = beyond
        waited_for[lone] = np.where(beyond > 0, ABSENT, -1)
    ops = names.map({n: op_name(n) for n in names.unique()})  # a regex per name, not per kernel
    return pd.DataFrame({"proc": proc, "corr_id": c["corr_id"].to_numpy(),
                         "start_ns": c["start_ns"].to_numpy(), "end_ns": end,
                         "wait_ns": wait.astype(np.int64),
                         "waited_for": waited_for.astype(np.int64), "op": ops.to_numpy()})


def _without_peers(alignment: Alignment) -> np.ndarray:
    """The processes whose group holds no other (their peers are not in the input)."""
    groups = alignment.table["group"]
    sizes = groups.map(groups.value_counts())
    return np.asarray(groups.index[sizes.to_numpy() == 1])


def communicators(collectives: pd.DataFrame) -> pd.Series:
    """The group of ranks each process of ``collectives`` waits with, by process, named by its
    smallest process key (:func:`.alignment.align_ranks`). Kernels of no known process
    (``proc`` -1) are left out."""
    return align_ranks(collectives).groups


@dataclass(frozen=True)
class RankWaits:
    """The collective waits of a trace's ranks, per launch (:data:`PER_LAUNCH`, indexed by
    ``proc, corr_id``), and how its ranks line up (:class:`.alignment.Alignment`). Made once
    from every kernel: a time window of a long trace, or one file of a job, is given the
    whole's."""

    alignment: Alignment
    per_launch: pd.DataFrame

    @property
    def groups(self) -> pd.Series:
        return self.alignment.groups

    @classmethod
    def of(cls, collectives: pd.DataFrame, prior_ns: dict[int, int] | None = None) -> RankWaits:
        """``prior_ns``: clock offsets known beforehand (:func:`.alignment.align_ranks`)."""
        alignment = align_ranks(collectives, prior_ns)
        return cls(alignment, per_launch(collective_waits(collectives, alignment)))


def per_launch(waits: pd.DataFrame) -> pd.DataFrame:
    """``waits`` (:func:`collective_waits`) summed per launch (whose kernels carry its
    correlation id): the wait, the peer waited for longest and the collective it was in."""
    index = pd.MultiIndex.from_arrays([pd.Series(dtype="int64"), pd.Series(dtype="int64")],
                                      names=["proc", "corr_id"])
    if waits.empty:
        return pd.DataFrame({"collective_wait_ns": pd.Series(dtype="int64"),
                             "waited_for": pd.Series(dtype="int64"),
                             "waited_in": pd.Series(dtype=object)}, index=index)
    total = waits.groupby(["proc", "corr_id"])["wait_ns"].sum()
    peer = waits[waits["waited_for"] != -1].groupby(["proc", "corr_id", "waited_for", "op"])[
        "wait_ns"].sum().reset_index().sort_values("wait_ns", kind="stable") \
        .drop_duplicates(["proc", "corr_id"], keep="last").set_index(["proc", "corr_id"])
    return pd.DataFrame({
        "collective_wait_ns": total.astype(np.int64),
        "waited_for": peer["waited_for"].reindex(total.index).fillna(-1).astype(np.int64),
        "waited_in": peer["op"].reindex(total.index).astype(object)})


def attach_waits(launches: pd.DataFrame, ranks: RankWaits | None) -> pd.DataFrame:
    """``collective_wait_ns`` (the collective wait inside each launch's replay, whose kernels
    carry its correlation id), ``waited_for`` (the peer it waited for longest, -1: none),
    ``waited_in`` (the collective it waited in longest, e.g. ``all-reduce``) and
    ``collective_group`` (its process's group; -1: no collectives)."""
    df = launches.copy()
    groups = ranks.groups if ranks is not None else pd.Series(dtype="int64")
    df["collective_group"] = df["proc"].map(groups).fillna(-1).astype("int64") \
        if len(groups) else -1
    df["collective_wait_ns"] = 0
    df["waited_for"] = -1
    df["waited_in"] = None
    if ranks is None or ranks.per_launch.empty:
        return df
    at = ranks.per_launch.reindex(pd.MultiIndex.from_arrays([df["proc"], df["corr_id"]]))
    df["collective_wait_ns"] = at["collective_wait_ns"].fillna(0).to_numpy(dtype=np.int64)
    df["waited_for"] = at["waited_for"].fillna(-1).to_numpy(dtype=np.int64)
    df["waited_in"] = at["waited_in"].to_numpy()
    return df


def groups_note(launches: pd.DataFrame) -> Note | None:
    """The note naming the groups of ranks a trace of several holds (``collective_group``):
    each rank's waits were counted within its own group."""
    g = launches.loc[launches["collective_group"] >= 0, ["collective_group", "proc"]]
    members = g.drop_duplicates().groupby("collective_group")["proc"].apply(sorted)
    members = members[members.map(len) > 1]
    if len(members) < 2:
        return None
    return Note("rank_groups", {"groups": [[int(p) & 0xFFFFFF for p in m] for m in members]})
