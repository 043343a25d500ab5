"""Ranks waiting for ranks: time spent inside collectives beyond the latest-arriving rank.

When one tensor-parallel rank stalls, its peers do not go idle: they launch the next step on
time and then spin inside its first collective (an NCCL kernel in their graph) until the
late rank arrives. Their own launches look healthy; the time is lost in the collective.

A collective's kernels end together on every rank (none can finish before all have
arrived), so kernels of different processes whose ends lie within ``match_ns`` of each other
are one collective (a process's second kernel in such a group starts a new one). In each
collective the rank whose kernel started last is the one the others waited for; each other
rank's wait is that start minus its own (at most its kernel's duration).

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

COLUMNS = ["proc", "corr_id", "start_ns", "end_ns", "wait_ns", "waited_for", "op"]
_OP = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)")


def op_name(kernel: str) -> str:
    """``ncclDevKernel_AllReduce_Sum_bf16_RING_LL`` -> ``all-reduce``."""
    m = _OP.match(kernel)
    if not m:
        return "collective"
    return re.sub(r"(?<!^)(?=[A-Z])", "-", m.group(1)).lower()


def collective_waits(collectives: pd.DataFrame, match_ns: int = MATCH_NS) -> pd.DataFrame:
    """Per collective kernel of a multi-process trace: how long it waited for a peer."""
    c = collectives
    if c.empty or c["proc"].nunique() < 2:
        return pd.DataFrame({k: pd.Series(dtype="int64" if k != "op" else object)
                             for k in COLUMNS})
    c = c.sort_values(["end_ns", "proc"], kind="stable").reset_index(drop=True)
    end = c["end_ns"].to_numpy()
    group = np.cumsum(np.r_[True, np.diff(end) > match_ns])
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
    ops = pd.Series(c["name"].astype(str)).map(op_name)
    return pd.DataFrame({"proc": c["proc"].to_numpy(), "corr_id": c["corr_id"].to_numpy(),
                         "start_ns": start, "end_ns": end, "wait_ns": wait.astype(np.int64),
                         "waited_for": waited_for.astype(np.int64), "op": ops.to_numpy()})


def attach_waits(launches: pd.DataFrame, waits: pd.DataFrame) -> pd.DataFrame:
    """``collective_wait_ns`` (the collective wait inside each launch's replay, whose kernels
    carry its correlation id), ``waited_for`` (the peer it waited for longest, -1: none) and
    ``waited_in`` (the collective it waited in longest, e.g. ``all-reduce``)."""
    df = launches.copy()
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
