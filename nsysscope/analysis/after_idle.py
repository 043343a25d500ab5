"""GPU work that runs at another speed after an idle gap than back to back.

A stall leaves the GPU idle; the replay that follows starts on a GPU that has cooled and
re-clocked. On captures from another machine a replay after an idle gap was 9-12 % shorter
than back to back (issue 53); fixing a stall puts the replays back to back, so the fixed
steps' GPU work, measured after idle gaps, would understate it, and the projected gain
overstate. Where a trace holds both kinds of replay of one graph (a stall every N steps:
the replay after a stalled step, and after a healthy one), the ratio is measured there
(:func:`idle_factors`) and the projection corrects for it; on the H200 captures here it is
0.999 (``h200_case1_tolist_every4_300``, 74 replays after a stall, 219 back to back) and
1.000 (``h200_outcopy_case1_every8_200``, 29 and 165): nothing to correct.

Where a trace cannot say (every step stalls: no replay runs back to back), the projection is
given as a range whose upper end assumes no difference and whose lower end assumes the
largest one seen (:data:`SLOWER_BACK_TO_BACK`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .stored import RowStore, steady_parts

#: replays of each kind (after a stalled step, after a healthy one) a ratio is measured from
MIN_REPLAYS = 10
#: a ratio this close to 1 is no difference: healthy captures of one program and session
#: differ by 0.4-1.8 % in their launch rate (17 H200 captures over five sessions)
NOISE = 0.02
#: back to back, a replay takes up to this much longer than after an idle gap: 1/0.88 on
#: the H200 pairs of issue 53 (replays 9-12 % shorter after idle); the lower end of a range
SLOWER_BACK_TO_BACK = 1 / 0.88
_READ = ["proc", "stall", "n_ops", "gpu_start_ns", "gpu_end_ns"]


def idle_factors(rows: RowStore) -> dict[int, float]:
    """Per process where the trace says it: how much longer a replay of its most common
    graph (by kernel count) takes back to back than after a stalled step, the median of
    each; 1.0 within :data:`NOISE`. A process missing here could not be measured."""
    after: dict[int, list[pd.DataFrame]] = {}
    last: dict[int, bool] = {}  # each process's previous steady launch stalled
    for part in steady_parts(rows, _READ):
        proc = part["proc"].to_numpy()
        stall = part["stall"].to_numpy(dtype=bool)
        prev = np.empty(len(part), dtype=object)
        for p, at in part.groupby("proc", sort=False).indices.items():
            prev[at] = np.r_[last.get(int(p)), stall[at][:-1]]
            last[int(p)] = bool(stall[at][-1])
        known = np.array([v is not None for v in prev], dtype=bool)
        replay = (part["gpu_end_ns"] - part["gpu_start_ns"]).to_numpy(dtype=np.float64)
        frame = pd.DataFrame({"proc": proc, "n_ops": part["n_ops"].to_numpy(),
                              "after_stall": prev.astype(bool), "replay": replay})[known]
        for p, rows_of in frame.groupby("proc"):
            after.setdefault(int(p), []).append(rows_of)
    out = {}
    for p, frames in after.items():
        f = pd.concat(frames)
        f = f[f["replay"].notna() & (f["n_ops"] == f["n_ops"].mode().iloc[0])]
        idle, b2b = f.loc[f["after_stall"], "replay"], f.loc[~f["after_stall"], "replay"]
        if len(idle) >= MIN_REPLAYS and len(b2b) >= MIN_REPLAYS:
            ratio = float(np.median(b2b) / np.median(idle))
            out[p] = 1.0 if abs(ratio - 1) < NOISE else ratio
    return out
