"""Start-up: the launches a server makes before it serves, recognised and left out.

A profile of a server from its launch holds its start-up: weights loaded, eager warm-up
passes, and one CUDA graph captured per batch-size bucket (sglang captures ~20-36 sizes, vLLM
up to ~67), often each replayed once and synchronised right away to check it. Those check
replays stall by construction (the host waits on each one before capturing the next graph),
and a fixed number of warm-up launches does not cover them: 35 check replays are more than
2 % of a short capture.

A launch is start-up when the host waited on it before launching anything else with a plain
sync, no copy behind the wait (class ``other_stall``: a check, not a readback), and either a
graph of its process is instantiated after it (``cudaGraphInstantiate*``,
``cuGraphInstantiate*``: graphs are still being built) or, once they are all built, it is
the first replay of its graph exec. Start-up is a prefix: the process's first launch that is
not such a check ends it. So a server that captures a graph lazily in the middle of serving
loses nothing (its serving launches before it break the prefix), nor does a case-1 server
without check replays (its first launch's wait is a readback). A trace without the
instantiation calls (a capture range that starts after start-up) has no start-up.

From every instantiation of the trace (:func:`graph_builds`, of each window of a long one;
:func:`building_by_part`): whether a graph of the launch's process is instantiated after the
launch call (``graphs_building``) and whether one was before it (``graphs_built``). Then
(:func:`startup_by_part`) the ``startup`` column, the launches warm-up and the steady state
leave out (:mod:`.processes`).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd

from ..trace.apis import INSTANTIATE_APIS
from ..trace.load import Trace
from .stored import RowStore

#: the launch table's columns start-up is found from
READ = ["proc", "graph_exec", "klass", "graphs_building", "graphs_built"]


def graph_builds(trace: Trace) -> pd.DataFrame:
    """The graph instantiation calls of ``trace`` (or of the part of it read): ``proc``,
    ``start_ns``, ``end_ns``."""
    api = trace.api
    made = api.loc[api["name"].isin(INSTANTIATE_APIS), ["proc", "start_ns", "end_ns"]]
    return made.reset_index(drop=True)


def building_by_part(launches: RowStore,
                     builds: pd.DataFrame) -> Iterator[dict[str, np.ndarray]]:
    """Per part of ``launches``: ``graphs_building`` (a graph of the launch's process is
    instantiated after its call starts) and ``graphs_built`` (one was before it), from every
    instantiation of the trace (``builds``: :func:`graph_builds`, of every window)."""
    for part in launches.chunks(["proc", "api_start_ns"]):
        building = np.zeros(len(part), dtype=bool)
        built = np.zeros(len(part), dtype=bool)
        proc = part["proc"].to_numpy()
        start = part["api_start_ns"].to_numpy()
        for p, own in (builds.groupby("proc") if len(builds) else []):  # a few processes
            rows = np.flatnonzero(proc == p)
            begins = np.sort(own["start_ns"].to_numpy())
            ends = np.sort(own["end_ns"].to_numpy())
            building[rows] = np.searchsorted(begins, start[rows], side="right") < len(begins)
            built[rows] = np.searchsorted(ends, start[rows], side="right") > 0
        yield {"graphs_building": building, "graphs_built": built}


def startup_by_part(launches: RowStore) -> Iterator[dict[str, np.ndarray]]:
    """Per part of ``launches`` (:meth:`~.stored.RowStore.update_parts`), whether each launch
    is start-up (the module's doc): a prefix of each process's launches, followed from part
    to part (a process's execs replayed so far, and whether its prefix still holds)."""
    going: dict[int, bool] = {}
    seen: dict[int, set[int]] = {}
    for part in launches.chunks(READ):
        proc = part["proc"].to_numpy()
        execs = part["graph_exec"].to_numpy()
        check = (part["klass"] == "other_stall").to_numpy(dtype=bool)
        building = part["graphs_building"].to_numpy(dtype=bool)
        built = part["graphs_built"].to_numpy(dtype=bool)
        out = np.zeros(len(part), dtype=bool)
        for p, at in pd.Series(np.arange(len(part))).groupby(proc).indices.items():
            p = int(p)
            known = seen.setdefault(p, set())
            ex = execs[at]
            first = ~pd.Series(ex).duplicated().to_numpy() & ~np.isin(ex, list(known)) & \
                (ex >= 0)
            known.update(ex.tolist())
            ok = check[at] & (building[at] | (built[at] & first))
            held = np.logical_and.accumulate(ok) & going.get(p, True)
            out[at] = held
            going[p] = bool(held[-1]) if len(held) else going.get(p, True)
        yield {"startup": out}
