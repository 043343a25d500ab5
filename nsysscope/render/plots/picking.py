"""Which launch a timeline shows: ``worst`` (the stall that cost the GPU most idle time of its
own: :func:`~nsysscope.analysis.projection.stall_costs`) and ``typical`` (a steady launch among
ordinary neighbours)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...analysis.projection import stall_costs

#: the per-launch columns a pick reads (:func:`stall_costs` too)
PICKED = ["launch", "proc", "steady", "stall", "klass", "gpu_idle_ns", "block_end_ns",
          "next_api_start_ns"]


def pick_launch(launches: pd.DataFrame, which: str = "worst",
                proc: int | None = None) -> int | None:
    """The launch index ``which`` names, of process ``proc`` when given.

    ``"worst"``: the steady-state stall that cost the GPU most idle time, counting the stall
    itself and not the host's own slowness after it (:func:`stall_costs`; a stall the host also
    slowed down ranks lower); with no stalls, the longest GPU gap. ``"typical"``: a steady
    launch whose GPU gap is close to the median and whose neighbours (drawn beside it) are
    typical too: same class as most steady launches, steady, gaps near the median. Typical
    is judged within one process (by default the one with most steady launches): two
    engines' gaps pooled have a median neither has, and a launch's neighbours in issue order
    are the other engine's."""
    launches = launches[launches.columns.intersection(PICKED, sort=False)]  # the rows
    # selected below copy these columns, not all
    if proc is not None:
        launches = launches[launches["proc"] == proc]
    elif which == "typical" and launches["proc"].nunique() > 1:
        steady = launches.loc[launches["steady"], "proc"]
        main = (steady if len(steady) else launches["proc"]).value_counts().index[0]
        launches = launches[launches["proc"] == main]
    if launches.empty:
        return None
    steady = launches[launches["steady"] & launches["gpu_idle_ns"].notna()]
    if steady.empty:
        steady = launches[launches["gpu_idle_ns"].notna()]
    if steady.empty:
        return int(launches["launch"].iloc[len(launches) // 2])
    if which == "worst":
        stalls = steady[steady["stall"]]
        if len(stalls):
            c = stall_costs(launches).loc[stalls.index]
            # the stall's own cost; of two alike, the one the host did not also slow down
            score = c["stall_cost_ns"] - c["slow_host_ns"]
            return int(stalls.loc[score.idxmax(), "launch"])
        return int(steady.loc[steady["gpu_idle_ns"].idxmax(), "launch"])
    if which == "typical":
        return _typical(launches, steady)
    raise ValueError(f"which={which!r}: use 'worst' or 'typical'")


def _typical(launches: pd.DataFrame, steady: pd.DataFrame) -> int:
    """The steady launch with the most typical neighbourhood (itself, the two before it, whose
    gaps its timeline shows, and the one after): each launch's distance from the median gap in
    units of the gaps' spread, plus a penalty for a neighbour that is warm-up, the last launch
    or of another class than most steady launches."""
    idle = launches["gpu_idle_ns"].to_numpy(dtype=float)
    med = float(np.median(steady["gpu_idle_ns"].to_numpy(dtype=float)))
    spread = float(np.median(np.abs(steady["gpu_idle_ns"].to_numpy(dtype=float) - med)))
    dev = np.abs(idle - med) / max(spread, 1000.0)
    dev[~np.isfinite(dev)] = 50.0
    klass = launches["klass"].astype(str).to_numpy()
    usual = steady["klass"].astype(str).mode().iloc[0]
    odd = (~launches["steady"].to_numpy(dtype=bool)) | (klass != usual)
    cost = np.minimum(dev, 50.0) + np.where(odd, 50.0, 0.0)

    def shifted(k: int) -> np.ndarray:  # cost of launch i - k (100 beyond either end)
        out = np.full(len(cost), 100.0)
        if k > 0:
            out[k:] = cost[:-k]
        else:
            out[:k] = cost[-k:]
        return out

    # the timeline of launch i shows the gaps after i - 2 (left edge), i - 1 and i; the
    # launch after it matters less (mostly off the right edge)
    score = cost + np.maximum(shifted(2), shifted(1)) + 0.5 * shifted(-1)
    rows = launches.index.get_indexer(steady.index)
    best = rows[int(np.argmin(score[rows]))]
    return int(launches["launch"].iloc[best])
