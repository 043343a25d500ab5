"""What a timeline is drawn from: sorted, windowed views of one analysed trace, the launch to
show (``worst``, ``typical``), the time window around it, and the sentence that explains it.

Timelines stay fast on long traces: each table is sorted by start time once, and only the
rows that overlap the time window shown are selected (``searchsorted`` over a running
maximum of the end times), so a timeline of three steps of a 5000-step trace draws a few
dozen bars.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from ...analysis import Analysis
from ...analysis.nvtx import STEP_PATTERN, nesting_depth
from ...model import LaunchClass
from ...util.units import us_figure as fmt_us
from .style import STALLS, ranges


def pick_launch(launches: pd.DataFrame, which: str = "worst") -> int | None:
    """The launch index ``which`` names: ``"worst"`` is the steady-state stall that left the
    GPU idle longest (or, with no stalls, the longest GPU gap); ``"typical"`` is the steady
    launch whose GPU gap is closest to the median."""
    if launches.empty:
        return None
    steady = launches[launches["steady"] & launches["gpu_idle_ns"].notna()]
    if steady.empty:
        steady = launches[launches["gpu_idle_ns"].notna()]
    if steady.empty:
        return int(launches["launch"].iloc[len(launches) // 2])
    if which == "worst":
        stalls = steady[steady["stall"]]
        pool = stalls if len(stalls) else steady
        return int(pool.loc[pool["gpu_idle_ns"].idxmax(), "launch"])
    if which == "typical":
        idle = steady["gpu_idle_ns"].to_numpy()
        med = np.median(idle)
        return int(steady["launch"].iloc[int(np.argmin(np.abs(idle - med)))])
    raise ValueError(f"which={which!r}: use 'worst' or 'typical'")


def _slice(starts: np.ndarray, end_cummax: np.ndarray, t0: float, t1: float) -> slice:
    """Rows (sorted by start) that may overlap [t0, t1]: started before t1, and not all
    ended before t0 (``end_cummax`` is the running maximum of the end times)."""
    hi = int(np.searchsorted(starts, t1, side="left"))
    lo = int(np.searchsorted(end_cummax, t0, side="right"))
    return slice(lo, max(lo, hi))


@dataclass
class Sorted:
    """A table sorted by start, with the running max of its ends, for window queries."""

    df: pd.DataFrame
    start: np.ndarray
    end_max: np.ndarray

    @classmethod
    def of(cls, df: pd.DataFrame, start: str, end: str) -> Sorted:
        df = df[df[start].notna()].sort_values(start, kind="stable").reset_index(drop=True)
        s = df[start].to_numpy(dtype=np.float64)
        e = df[end].to_numpy(dtype=np.float64)
        return cls(df, s, np.maximum.accumulate(e) if len(e) else e)

    def window(self, t0: float, t1: float, start: str, end: str) -> pd.DataFrame:
        part = self.df.iloc[_slice(self.start, self.end_max, t0, t1)]
        return part[(part[end] > t0) & (part[start] < t1)]




class TraceViews:
    """Sorted, windowed views of one :class:`~nsysscope.analysis.Analysis`, and the choice of
    what a timeline shows."""

    def __init__(self, analysis: Analysis, name: str | None = None) -> None:
        self.analysis = analysis
        path = str(analysis.summary.trace.path)
        self.name = name or path.replace("\\", "/").rsplit("/", 1)[-1]

    # cached, sorted views of the trace ------------------------------------------------------
    @cached_property
    def api_calls(self) -> Sorted:
        api = self.analysis.trace.api.copy()
        api["name"] = api["name"].astype(str)
        b = self.analysis.blocks[["corr_id", "block"]].drop_duplicates("corr_id")
        api = api.merge(b, on="corr_id", how="left")
        api["block"] = api["block"].fillna(-1).astype(np.int64)
        api["wait_class"] = api["block"].map(self.block_class).fillna("")
        api.loc[api["block"] < 0, "wait_class"] = ""
        return Sorted.of(api, "start_ns", "end_ns")

    @cached_property
    def block_class(self) -> pd.Series:
        """block -> the class its colour shows: the stall class of a launch it stalled, else
        ``healthy`` for a wait that the GPU outlasted, else ``unpaired``."""
        L = self.analysis.launches
        paired = L[L["block"] >= 0]
        klass = paired["klass"].astype(str)
        shown = np.where(paired["stall"].to_numpy() & klass.isin(STALLS).to_numpy(), klass,
                         np.where(paired["stall"].to_numpy(), LaunchClass.OTHER_STALL,
                                  LaunchClass.HEALTHY))
        rank = pd.Series(shown).map({k: i for i, k in enumerate((*STALLS, LaunchClass.HEALTHY))}
                                    ).to_numpy()
        df = pd.DataFrame({"block": paired["block"].to_numpy(), "shown": shown, "rank": rank})
        df = df.sort_values("rank", kind="stable").drop_duplicates("block")
        out = pd.Series("unpaired", index=self.analysis.blocks["block"].to_numpy(), dtype=object)
        out.loc[df["block"].to_numpy()] = df["shown"].to_numpy()
        return out

    @cached_property
    def nvtx(self) -> Sorted:
        nv = self.analysis.trace.nvtx.copy()
        nv["depth"] = nesting_depth(nv) if len(nv) else np.zeros(0, dtype=np.int64)
        nv["text"] = nv["text"].astype(str).str.split(", seq = ").str[0].str.split(", op_id").str[0]
        return Sorted.of(nv, "start_ns", "end_ns")

    @cached_property
    def gpu_ops(self) -> Sorted:
        return Sorted.of(self.analysis.trace.gpu_ops, "start_ns", "end_ns")

    @cached_property
    def graphs(self) -> Sorted:
        return Sorted.of(self.analysis.launches, "gpu_start_ns", "gpu_end_ns")

    @cached_property
    def reach(self) -> Sorted:
        """Launches by call time, each reaching to the end of its window, replay or gap."""
        L = self.analysis.launches
        reach = np.nanmax(L[["api_end_ns", "gpu_end_ns", "block_start_ns",
                             "next_gpu_start_ns"]].to_numpy(dtype=float), axis=1) \
            if len(L) else np.zeros(0)
        return Sorted.of(L.assign(reach_ns=reach), "api_start_ns", "reach_ns")

    @cached_property
    def steps(self) -> pd.DataFrame:
        """NVTX ``step N`` ranges on the thread that launches the graphs: step, start, end."""
        nv = self.analysis.trace.nvtx
        L = self.analysis.launches
        if nv.empty or L.empty:
            return pd.DataFrame(columns=["step", "start_ns", "end_ns"])
        tid = L["tid"].mode().iloc[0]
        num = nv["text"].astype(str).str.extract(STEP_PATTERN)[0]
        ok = num.notna() & (nv["tid"] == tid)
        steps = pd.DataFrame({"step": num[ok].astype(np.int64), "start_ns": nv.loc[ok, "start_ns"],
                              "end_ns": nv.loc[ok, "end_ns"]})
        return steps.sort_values("start_ns").drop_duplicates("step").reset_index(drop=True)

    @cached_property
    def thread_names(self) -> dict[int, str]:
        th = self.analysis.trace.threads
        return {int(t): f"{n or 'thread'} ({int(t) & 0xFFFFFF})"
                for t, n in zip(th["tid"], th["thread_name"], strict=True)}

    # choosing the time window ---------------------------------------------------------------
    def step_of(self, t: float) -> int | None:
        st = self.steps
        if st.empty or not np.isfinite(t):
            return None
        i = int(np.searchsorted(st["start_ns"].to_numpy(), t, side="right")) - 1
        if i < 0 or st["end_ns"].iloc[i] <= t:
            return None
        return int(st["step"].iloc[i])

    def _span_of_steps(self, steps: Iterable[int]) -> tuple[float, float] | None:
        st = self.steps
        sel = st[st["step"].isin(list(steps))]
        if sel.empty:
            return None
        return float(sel["start_ns"].min()), float(sel["end_ns"].max())

    def _span_of_launches(self, ids: Sequence[int]) -> tuple[float, float]:
        L = self.analysis.launches
        rows = L[L["launch"].isin(list(ids))]
        if rows.empty:
            raise ValueError(f"no launches {list(ids)[:5]}... in this trace (0..{len(L) - 1})")
        t0 = np.nanmin(rows[["api_start_ns", "gpu_start_ns"]].to_numpy(dtype=float))
        t1 = np.nanmax(rows[["api_end_ns", "gpu_end_ns", "block_end_ns"]].to_numpy(dtype=float))
        return float(t0), float(t1)

    def window_for(self, steps=None, which: str | None = None, launches=None,
                   context: int = 1) -> tuple[float, float, int | None, str]:
        """(t0_ns, t1_ns, focus launch, description) of what :meth:`timeline` would draw."""
        L = self.analysis.launches
        if steps is not None or launches is not None:
            ids = list(launches if launches is not None else steps)
            span = self._span_of_steps(ids) if launches is None else None
            what = "steps" if span is not None else "launches"
            if span is None:
                span = self._span_of_launches(ids)
            label = f"{what} {ranges(ids)}"
            return span[0], span[1], None, label
        which = which or "typical"
        focus = pick_launch(L, which)
        if focus is None:
            raise ValueError("this trace has no graph launches to show")
        row = L.set_index("launch").loc[focus]
        s_this = self.step_of(float(row["api_start_ns"]))
        nxt = row["next_api_start_ns"]
        s_next = self.step_of(float(nxt)) if pd.notna(nxt) else None
        if s_this is not None:
            last = s_next if s_next is not None and s_next >= s_this else s_this
            span = self._span_of_steps(range(s_this - context, last + 1))
        else:
            span = self._span_of_launches(range(max(0, focus - context), focus + 2))
        title = {"worst": "worst stall" if bool(row["stall"]) else "longest GPU gap (no stall)",
                 "typical": "typical launch"}[which]
        return span[0], span[1], focus, title

    def caption(self, launch: int) -> str:
        """One sentence on what happened around ``launch``: what the timeline shows."""
        r = self.analysis.launches.set_index("launch").loc[launch]
        idle = fmt_us(r["gpu_idle_ns"] / 1e3) if pd.notna(r["gpu_idle_ns"]) else "n/a"
        phase = f" in '{r['phase']}'" if isinstance(r["phase"], str) and r["phase"] else ""
        if bool(r["stall"]):
            chain = r["api_chain"] or r["block_name"]
            line = ""
            for site in self.analysis.summary.sites:  # the site's Python line, when sampled
                if site.source and (site.klass, site.phase, site.api_chain) == \
                        (str(r["klass"]), r["phase"], r["api_chain"]):
                    src = site.source
                    text = f" `{src.text.strip()}`" if src.text else ""
                    line = f" at {src.file}:{src.line}{text}"
                    break
            return (f"After launch #{launch} the host ran {fmt_us(r['window_ns'] / 1e3)} of work, "
                    f"then blocked{phase}{line} ({chain}) until graph #{launch} finished; only "
                    f"then could it launch #{launch + 1}: the GPU idled {idle}.")
        if r["klass"] == LaunchClass.LAUNCH_BOUND:
            return (f"No host wait stalled launch #{launch}, but the next launch came {idle} after "
                    f"the GPU ran dry (host busy{phase}): the host is slower than the GPU here.")
        if bool(r["waited"]):
            return (f"The host had {fmt_us(r['window_ns'] / 1e3)} of overlap before it waited on "
                    f"graph #{launch} ({r['block_name']}{phase}); launch #{launch + 1} was "
                    f"already queued, so the GPU went on after a {idle} gap.")
        return f"The host never waited on launch #{launch}; the GPU gap after it was {idle}."

