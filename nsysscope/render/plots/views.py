"""What a timeline is drawn from: sorted, windowed views of one analysed trace, the time
window around the launch to show (:mod:`.picking` picks it), and the sentence that explains
it.

Timelines stay fast on long traces: each table is sorted by start time once, and only the
rows that overlap the time window shown are selected (``searchsorted`` over a running
maximum of the end times), so a timeline of three steps of a 5000-step trace draws a few
dozen bars.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cached_property

import numpy as np
import pandas as pd

from ...analysis import Analysis
from ...analysis.projection import stall_costs
from ...model import LaunchClass
from ...util.units import us_figure as fmt_us
from .events import Events, EventSource, Sorted
from .picking import pick_launch
from .style import STALLS, ranges

#: the per-launch columns the views read: a timeline's replays, windows, gaps and arrows, its
#: choice of launch and its caption. A long trace's table is read for these, not for all of
#: its columns (0.5 GB at 10^6 launches); the sorted views share them
SHOWN = ["launch", "proc", "tid", "stream", "device", "api_start_ns", "api_end_ns",
         "gpu_start_ns", "gpu_end_ns", "next_gpu_start_ns", "next_api_start_ns",
         "gpu_idle_ns", "block", "block_start_ns", "block_end_ns", "block_name", "window_ns",
         "waited", "stall", "klass", "steady", "phase", "api_chain"]


def _whole(value: object, what: str) -> int:
    """``value`` as an int; for anything else a TypeError naming ``what`` (a string "7" was
    looked up as is: "no launch 7 in this trace (launches 0-299)")."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{what}: a whole number, not {type(value).__name__} {value!r}")
    return int(value)


class TraceViews:
    """Sorted, windowed views of one :class:`~nsysscope.analysis.Analysis`, and the choice of
    what a timeline shows."""

    def __init__(self, analysis: Analysis, name: str | None = None) -> None:
        self.analysis = analysis
        path = str(analysis.summary.trace.path)
        self.name = name or path.replace("\\", "/").rsplit("/", 1)[-1]

    # cached, sorted views of the trace ---------------------------------------------------------
    @cached_property
    def events(self) -> EventSource:
        """The events a timeline draws from (:mod:`.events`)."""
        return EventSource(self.analysis, lambda: self.launches, lambda: self.block_class)

    def events_in(self, t0: float, t1: float) -> Events:
        """The events to draw ``[t0, t1]`` from."""
        return self.events(t0, t1, self.graphs.window(t0, t1))

    @cached_property
    def block_class(self) -> pd.Series:
        """block -> the class its colour shows: the stall class of a launch it stalled, else
        ``healthy`` for a wait that the GPU outlasted, else ``unpaired``."""
        L = self.launches
        paired = L[L["block"] >= 0]
        klass = paired["klass"].astype(str)
        shown = np.where(paired["stall"].to_numpy() & klass.isin(STALLS).to_numpy(), klass,
                         np.where(paired["stall"].to_numpy(), LaunchClass.OTHER_STALL,
                                  LaunchClass.HEALTHY))
        rank = pd.Series(shown).map({k: i for i, k in enumerate((*STALLS, LaunchClass.HEALTHY))}
                                    ).to_numpy()
        df = pd.DataFrame({"block": paired["block"].to_numpy(), "shown": shown, "rank": rank})
        df = df.sort_values("rank", kind="stable").drop_duplicates("block")
        out = pd.Series("unpaired", index=self.events.blocks["block"].to_numpy(), dtype=object)
        out.loc[df["block"].to_numpy()] = df["shown"].to_numpy()
        return out

    @cached_property
    def launches(self) -> pd.DataFrame:
        """The per-launch table's :data:`SHOWN` columns."""
        return self.analysis.launch_table.frame(SHOWN)

    @cached_property
    def graphs(self) -> Sorted:
        return Sorted.of(self.launches, "gpu_start_ns", "gpu_end_ns")

    @cached_property
    def reach(self) -> Sorted:
        """Launches by call time, each reaching to the end of its window, replay or gap."""
        L = self.launches
        reach = np.nanmax(L[["api_end_ns", "gpu_end_ns", "block_start_ns",
                             "next_gpu_start_ns"]].to_numpy(dtype=float), axis=1) \
            if len(L) else np.zeros(0)
        return Sorted.of(L, "api_start_ns", reach)

    def launch_row(self, launch: int) -> pd.Series:
        """The per-launch row of ``launch`` (the table indexed by launch would be a copy of
        it); ValueError where the trace has no such launch."""
        L = self.launches
        at = np.flatnonzero(L["launch"].to_numpy() == launch)
        if not len(at):
            raise ValueError(f"no launch {launch} in this trace (launches 0-{len(L) - 1})")
        return L.iloc[int(at[0])]

    @cached_property
    def all_steps(self) -> pd.DataFrame:
        """NVTX ``step N`` ranges on every thread that launches graphs (each process numbers
        its own steps): tid, step, start, end, by thread and start."""
        steps = self.analysis.step_ranges()
        steps = steps[steps["tid"].isin(self.launches["tid"].unique())]
        return steps.sort_values(["tid", "start_ns"], kind="stable") \
            .drop_duplicates(["tid", "step"]).reset_index(drop=True)

    def proc_of(self, pid: int) -> int:
        """The process key of ``pid``; ValueError naming the pids that launched graphs."""
        pid = _whole(pid, "pid")
        procs = self.analysis.trace.processes
        launching = procs[procs["proc"].isin(self.launches["proc"].unique())]
        own = launching.loc[launching["pid"] == pid, "proc"]
        if own.empty:
            known = ", ".join(str(int(p)) for p in sorted(launching["pid"]))
            raise ValueError(f"no graph launches of pid {pid} in this trace (pids {known})")
        return int(own.iloc[0])

    def launching_tid(self, pid: int | None = None) -> int | None:
        """The thread that launched most graphs (of process ``pid``, when given)."""
        if pid is None:
            return self._main_tid
        L = self.launches
        L = L[L["proc"] == self.proc_of(pid)]
        return int(L["tid"].mode().iloc[0]) if len(L) else None

    @cached_property
    def _main_tid(self) -> int | None:
        """The thread that launched most graphs of the trace (asked for by every step
        lookup without a thread)."""
        L = self.launches
        return int(L["tid"].mode().iloc[0]) if len(L) else None

    def steps_of(self, tid: int | None = None) -> pd.DataFrame:
        """:attr:`all_steps` of thread ``tid`` (default: :meth:`launching_tid`): step, start,
        end, by start."""
        tid = self._main_tid if tid is None else tid
        st = self.all_steps
        return st[st["tid"] == tid].drop(columns="tid").reset_index(drop=True)

    @cached_property
    def thread_names(self) -> dict[int, str]:
        th = self.analysis.trace.threads
        return {int(t): f"{n or 'thread'} ({int(t) & 0xFFFFFF})"
                for t, n in zip(th["tid"], th["thread_name"], strict=True)}

    # choosing the time window ---------------------------------------------------------------
    def step_of(self, t: float, tid: int | None = None) -> int | None:
        """The ``step N`` range of thread ``tid`` (:meth:`steps_of`) at time ``t``."""
        st = self.steps_of(tid)
        if st.empty or not np.isfinite(t):
            return None
        i = int(np.searchsorted(st["start_ns"].to_numpy(), t, side="right")) - 1
        if i < 0 or st["end_ns"].iloc[i] <= t:
            return None
        return int(st["step"].iloc[i])

    def _span_of_steps(self, steps: Iterable[int],
                       tid: int | None = None) -> tuple[float, float] | None:
        st = self.steps_of(tid)
        sel = st[st["step"].isin(list(steps))]
        if sel.empty:
            return None
        return float(sel["start_ns"].min()), float(sel["end_ns"].max())

    def _span_of_launches(self, ids: Sequence[int]) -> tuple[float, float]:
        L = self.launches
        rows = L[L["launch"].isin(list(ids))]
        if rows.empty:
            raise ValueError(f"no launches {ranges(ids)} in this trace (launches 0-{len(L) - 1})")
        t0 = np.nanmin(rows[["api_start_ns", "gpu_start_ns"]].to_numpy(dtype=float))
        t1 = np.nanmax(rows[["api_end_ns", "gpu_end_ns", "block_end_ns"]].to_numpy(dtype=float))
        return float(t0), float(t1)

    def window_for(self, steps: Iterable[int] | None = None, which: str | None = None,
                   launches: Iterable[int] | None = None,
                   context: int = 1, pid: int | None = None) -> tuple[float, float, int | None,
                                                                      str]:
        """(t0_ns, t1_ns, focus launch, description) of what :meth:`timeline` would draw
        (``pid``: whose ``steps``, with several processes)."""
        L = self.launches
        chosen = launches if launches is not None else steps
        if chosen is not None:
            ids = [_whole(i, "launches" if launches is not None else "steps") for i in chosen]
            tid = self.launching_tid(pid)
            if launches is None and not self.steps_of(tid).empty:
                span = self._span_of_steps(ids, tid)
                if span is None:
                    st = self.steps_of(tid)["step"]
                    raise ValueError(f"no NVTX steps {ranges(ids)} in this trace (its 'step N' "
                                     f"ranges run from {int(st.min())} to {int(st.max())}); "
                                     "pass launches=... for launch indices")
                whose = f" of pid {pid}" if pid is not None else ""
                return span[0], span[1], None, f"steps {ranges(ids)}{whose}"
            try:
                span = self._span_of_launches(ids)
            except ValueError as e:
                if launches is None:  # steps= on a trace without step ranges
                    raise ValueError(f"this trace has no NVTX 'step N' ranges, so steps= are "
                                     f"taken as launch indices: {e}") from None
                raise
            return span[0], span[1], None, f"launches {ranges(ids)}"
        which = which or "typical"
        focus = pick_launch(L, which, None if pid is None else self.proc_of(pid))
        if focus is None:
            raise ValueError("this trace has no graph launches to show")
        row = self.launch_row(focus)
        tid = int(row["tid"])  # the focus launch's own thread and steps
        s_this = self.step_of(float(row["api_start_ns"]), tid)
        nxt = row["next_api_start_ns"]
        s_next = self.step_of(float(nxt), tid) if pd.notna(nxt) else None
        if s_this is not None:
            last = s_next if s_next is not None and s_next >= s_this else s_this
            found = self._span_of_steps(range(s_this - context, last + 1), tid)
            assert found is not None  # s_this is one of tid's steps
            span = found
        else:
            own = L.loc[L["proc"] == row["proc"], "launch"].to_numpy()  # in issue order
            pos = int(np.searchsorted(own, focus))
            span = self._span_of_launches([*own[max(0, pos - context):pos + 1],
                                           *self._next_launch(focus)])
        title = {"worst": "worst stall" if bool(row["stall"]) else "longest GPU gap (no stall)",
                 "typical": "typical launch"}[which]
        return span[0], span[1], focus, title

    def caption(self, launch: int) -> str:
        """One sentence on what happened around ``launch``: what the timeline shows."""
        r = self.launch_row(_whole(launch, "launch"))
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
                    line = f" at {src.location}{text}"
                    break
            text = (f"After launch #{launch} the host ran {fmt_us(r['window_ns'] / 1e3)} of "
                    f"work, then blocked{phase}{line} ({chain}) until graph #{launch} finished; "
                    f"only then could it launch {self._next_name(launch, 'the next graph')}: "
                    f"the GPU idled {idle}.")
            return text + self._slow_host(launch)
        if r["klass"] == LaunchClass.LAUNCH_BOUND:
            return (f"No host wait stalled launch #{launch}, but the next launch came {idle} after "
                    f"the GPU ran dry (host busy{phase}): the host is slower than the GPU here.")
        if bool(r["waited"]):
            return (f"The host had {fmt_us(r['window_ns'] / 1e3)} of overlap before it waited on "
                    f"graph #{launch} ({r['block_name']}{phase}); "
                    f"{self._next_name(launch, 'the next launch', 'launch ')} was already "
                    f"queued, so the GPU went on after a {idle} gap.")
        return f"The host never waited on launch #{launch}; the GPU gap after it was {idle}."

    def _next_launch(self, launch: int) -> list[int]:
        """The launch after ``launch`` on its process and stream (its ``next_api_start_ns``),
        as a list of none or one: in a trace of several processes, ``launch + 1`` is often
        another process's."""
        L = self.launches
        r = self.launch_row(launch)
        nxt = L[(L["proc"] == r["proc"]) & (L["api_start_ns"] == r["next_api_start_ns"])]
        return [int(nxt["launch"].iloc[0])] if len(nxt) else []

    def _next_name(self, launch: int, none: str, prefix: str = "") -> str:
        """``#184`` (after ``prefix``), or ``none`` where the trace has no launch after it."""
        nxt = self._next_launch(launch)
        return f"{prefix}#{nxt[0]}" if nxt else none

    @cached_property
    def costs(self) -> pd.DataFrame:
        """:func:`stall_costs` of this trace's launches, indexed by launch."""
        L = self.launches
        return stall_costs(L).set_index(L["launch"].to_numpy())

    def _slow_host(self, launch: int) -> str:
        """The part of a stall's GPU idle time that is the host's own slowness, when it is a
        real part (over 20 % of the gap and 100 µs), and where the host spent it."""
        c = self.costs.loc[launch]
        slow, cost = float(c["slow_host_ns"]), float(c["stall_cost_ns"])
        if not np.isfinite(slow) or slow < max(1e5, 0.2 * (slow + cost)):
            return ""
        r = self.launch_row(launch)
        where = self._busiest_phase(int(r["tid"]), float(r["block_end_ns"]),
                                    float(r["next_api_start_ns"]))
        return (f" Of that, {fmt_us(cost / 1e3)} is the stall (the host's usual "
                f"{fmt_us(float(c['usual_after_ns']) / 1e3)} of work after such a wait) and "
                f"{fmt_us(slow / 1e3)} the host running slower than usual{where}, which a "
                "healthy capture has too.")

    def _busiest_phase(self, tid: int, t0: float, t1: float) -> str:
        """`` in 'launch' of step 184``: the NVTX phase holding most of [t0, t1] on ``tid``."""
        nv = self.events_in(t0, t1).nvtx.window(t0, t1)
        nv = nv[(nv["tid"] == tid) & (nv["depth"] == 1)]
        if nv.empty:
            return ""
        overlap = np.minimum(nv["end_ns"], t1) - np.maximum(nv["start_ns"], t0)
        best = nv.loc[overlap.idxmax()]
        step = self.step_of(float(best["start_ns"]), tid)
        return f" in '{best['text']}'" + (f" of step {step}" if step is not None else "")

