"""Pictures of an analysed trace: an nsys-like timeline, distributions, per-launch series,
and a baseline/candidate comparison.

Everything returns a :class:`matplotlib.figure.Figure` built without pyplot (no global
state; a notebook shows the returned figure once, a script saves it). Times on the axes are
microseconds or milliseconds, whichever reads better; colours come from the Okabe-Ito
palette, which stays distinguishable for colour-blind readers.

Timelines stay fast on long traces: each table is sorted by start time once, and only the
rows that overlap the time window shown are selected (``searchsorted`` over a running
maximum of the end times), so a timeline of three steps of a 5000-step trace draws a few
dozen bars. Series with many launches are thinned to an evenly spaced sample plus a binned
median/min/max envelope.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from .analysis import Analysis
from .analysis.nvtx import _STEP, nesting_depth
from .model import Summary
from .trace.load import LAUNCH_APIS, is_copy_api

__all__ = ["TracePlots", "CLASS_COLORS", "OKABE_ITO", "compare_figure", "distributions_figure",
           "series_figure", "timeline_figure", "pick_launch"]

class NsysscopeFigure(Figure):
    """A plain :class:`~matplotlib.figure.Figure` that also shows itself in Jupyter when
    pyplot (and so the inline backend's formatters) was never imported."""

    def _repr_png_(self) -> bytes:
        import io
        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=90, facecolor="white")
        return buf.getvalue()


#: Okabe & Ito (2008), "Color Universal Design": safe for the common colour-vision deficiencies
OKABE_ITO = {
    "black": "#000000", "orange": "#E69F00", "sky_blue": "#56B4E9", "bluish_green": "#009E73",
    "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00", "reddish_purple": "#CC79A7",
}

#: one colour per launch class; a host block takes the class of the launch it waited on
CLASS_COLORS = {
    "healthy": OKABE_ITO["bluish_green"],
    "gpu_to_cpu": OKABE_ITO["vermillion"],
    "cpu_to_gpu": OKABE_ITO["orange"],
    "other_stall": OKABE_ITO["reddish_purple"],
    "launch_bound": OKABE_ITO["black"],
    "last": "#999999",
    "no_gpu_work": "#999999",
}
CLASS_LABELS = {
    "healthy": "healthy",
    "gpu_to_cpu": "gpu_to_cpu stall (readback)",
    "cpu_to_gpu": "cpu_to_gpu stall (pageable upload)",
    "other_stall": "other stall",
    "launch_bound": "launch-bound gap",
    "last": "last launch",
    "no_gpu_work": "no GPU work",
}
BLOCK_LABELS = {
    "healthy": "wait, GPU still busy after it",
    "gpu_to_cpu": "wait: gpu_to_cpu stall",
    "cpu_to_gpu": "wait: cpu_to_gpu stall",
    "other_stall": "wait: other stall",
}
_STALLS = ("gpu_to_cpu", "cpu_to_gpu", "other_stall")
GRAPH_COLOR = OKABE_ITO["blue"]
EAGER_COLOR = OKABE_ITO["sky_blue"]
COPY_CALL_COLOR = OKABE_ITO["sky_blue"]
OTHER_CALL_COLOR = "#C8C8C8"
UNPAIRED_WAIT_COLOR = "#7F7F7F"
NVTX_COLORS = ("#E4E4E4", "#F1F1F1")
IDLE_COLOR = "#7F7F7F"

_BAR_H = 0.72
_MAX_NVTX_ROWS = 4
_MAX_THREADS = 6
_SERIES_POINTS = 2500  # per class, before thinning
_SERIES_BINS = 600


# -- units -------------------------------------------------------------------------------------

def fmt_us(v: float) -> str:
    """``2.26 ms``, ``182 µs``, ``1.2 s``: one time, readable."""
    if v is None or not np.isfinite(v):
        return "n/a"
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:.2f} s"
    if a >= 1e3:
        return f"{v / 1e3:.2f} ms"
    if a >= 10:
        return f"{v:.0f} µs"
    return f"{v:.1f} µs"


def _us_axis_formatter():
    def f(v, _pos):
        if v <= 0:
            return "0"
        if v >= 1e6:
            return f"{v / 1e6:g} s"
        if v >= 1e3:
            return f"{v / 1e3:g} ms"
        return f"{v:g} µs"
    return FuncFormatter(f)


def _use_log(values: np.ndarray) -> bool:
    """Log scale when the values span more than about a decade and a half."""
    v = values[np.isfinite(values) & (values > 0)]
    return len(v) > 1 and v.max() / max(v.min(), 1.0) > 30


# -- picking what to show ----------------------------------------------------------------------

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
class _Sorted:
    """A table sorted by start, with the running max of its ends, for window queries."""

    df: pd.DataFrame
    start: np.ndarray
    end_max: np.ndarray

    @classmethod
    def of(cls, df: pd.DataFrame, start: str, end: str) -> "_Sorted":
        df = df[df[start].notna()].sort_values(start, kind="stable").reset_index(drop=True)
        s = df[start].to_numpy(dtype=np.float64)
        e = df[end].to_numpy(dtype=np.float64)
        return cls(df, s, np.maximum.accumulate(e) if len(e) else e)

    def window(self, t0: float, t1: float, start: str, end: str) -> pd.DataFrame:
        part = self.df.iloc[_slice(self.start, self.end_max, t0, t1)]
        return part[(part[end] > t0) & (part[start] < t1)]


# -- the plots ---------------------------------------------------------------------------------

class TracePlots:
    """Plots of one :class:`~nsysscope.analysis.Analysis` (``t.plot`` in a notebook)."""

    def __init__(self, analysis: Analysis, name: str | None = None) -> None:
        self.analysis = analysis
        path = str(analysis.summary.trace.path)
        self.name = name or path.replace("\\", "/").rsplit("/", 1)[-1]

    # cached, sorted views of the trace ------------------------------------------------------
    @cached_property
    def _api(self) -> _Sorted:
        api = self.analysis.trace.api.copy()
        api["name"] = api["name"].astype(str)
        b = self.analysis.blocks[["corr_id", "block"]].drop_duplicates("corr_id")
        api = api.merge(b, on="corr_id", how="left")
        api["block"] = api["block"].fillna(-1).astype(np.int64)
        api["wait_class"] = api["block"].map(self._block_class).fillna("")
        api.loc[api["block"] < 0, "wait_class"] = ""
        return _Sorted.of(api, "start_ns", "end_ns")

    @cached_property
    def _block_class(self) -> pd.Series:
        """block -> the class its colour shows: the stall class of a launch it stalled, else
        ``healthy`` for a wait that the GPU outlasted, else ``unpaired``."""
        L = self.analysis.launches
        paired = L[L["block"] >= 0]
        klass = paired["klass"].astype(str)
        shown = np.where(paired["stall"].to_numpy() & klass.isin(_STALLS).to_numpy(), klass,
                         np.where(paired["stall"].to_numpy(), "other_stall", "healthy"))
        rank = pd.Series(shown).map({"gpu_to_cpu": 0, "cpu_to_gpu": 1, "other_stall": 2,
                                     "healthy": 3}).to_numpy()
        df = pd.DataFrame({"block": paired["block"].to_numpy(), "shown": shown, "rank": rank})
        df = df.sort_values("rank", kind="stable").drop_duplicates("block")
        out = pd.Series("unpaired", index=self.analysis.blocks["block"].to_numpy(), dtype=object)
        out.loc[df["block"].to_numpy()] = df["shown"].to_numpy()
        return out

    @cached_property
    def _nvtx(self) -> _Sorted:
        nv = self.analysis.trace.nvtx.copy()
        nv["depth"] = nesting_depth(nv) if len(nv) else np.zeros(0, dtype=np.int64)
        nv["text"] = nv["text"].astype(str).str.split(", seq = ").str[0].str.split(", op_id").str[0]
        return _Sorted.of(nv, "start_ns", "end_ns")

    @cached_property
    def _gpu_ops(self) -> _Sorted:
        return _Sorted.of(self.analysis.trace.gpu_ops, "start_ns", "end_ns")

    @cached_property
    def _graphs(self) -> _Sorted:
        return _Sorted.of(self.analysis.launches, "gpu_start_ns", "gpu_end_ns")

    @cached_property
    def _reach(self) -> _Sorted:
        """Launches by call time, each reaching to the end of its window, replay or gap."""
        L = self.analysis.launches
        reach = np.nanmax(L[["api_end_ns", "gpu_end_ns", "block_start_ns",
                             "next_gpu_start_ns"]].to_numpy(dtype=float), axis=1) \
            if len(L) else np.zeros(0)
        return _Sorted.of(L.assign(reach_ns=reach), "api_start_ns", "reach_ns")

    @cached_property
    def _steps(self) -> pd.DataFrame:
        """NVTX ``step N`` ranges on the thread that launches the graphs: step, start, end."""
        nv = self.analysis.trace.nvtx
        L = self.analysis.launches
        if nv.empty or L.empty:
            return pd.DataFrame(columns=["step", "start_ns", "end_ns"])
        tid = L["tid"].mode().iloc[0]
        num = nv["text"].astype(str).str.extract(_STEP)[0]
        ok = num.notna() & (nv["tid"] == tid)
        steps = pd.DataFrame({"step": num[ok].astype(np.int64), "start_ns": nv.loc[ok, "start_ns"],
                              "end_ns": nv.loc[ok, "end_ns"]})
        return steps.sort_values("start_ns").drop_duplicates("step").reset_index(drop=True)

    @cached_property
    def _thread_names(self) -> dict[int, str]:
        th = self.analysis.trace.threads
        return {int(t): f"{n or 'thread'} ({int(t) & 0xFFFFFF})"
                for t, n in zip(th["tid"], th["thread_name"])}

    # choosing the time window ---------------------------------------------------------------
    def _step_of(self, t: float) -> int | None:
        st = self._steps
        if st.empty or not np.isfinite(t):
            return None
        i = int(np.searchsorted(st["start_ns"].to_numpy(), t, side="right")) - 1
        if i < 0 or st["end_ns"].iloc[i] <= t:
            return None
        return int(st["step"].iloc[i])

    def _span_of_steps(self, steps: Iterable[int]) -> tuple[float, float] | None:
        st = self._steps
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
            label = f"{what} {_ranges(ids)}"
            return span[0], span[1], None, label
        which = which or "typical"
        focus = pick_launch(L, which)
        if focus is None:
            raise ValueError("this trace has no graph launches to show")
        row = L.set_index("launch").loc[focus]
        s_this = self._step_of(float(row["api_start_ns"]))
        nxt = row["next_api_start_ns"]
        s_next = self._step_of(float(nxt)) if pd.notna(nxt) else None
        if s_this is not None:
            last = s_next if s_next is not None and s_next >= s_this else s_this
            span = self._span_of_steps(range(s_this - context, last + 1))
        else:
            span = self._span_of_launches(range(max(0, focus - context), focus + 2))
        title = {"worst": "worst stall" if bool(row["stall"]) else "longest GPU gap (no stall)",
                 "typical": "typical launch"}[which]
        return span[0], span[1], focus, title

    # timeline ---------------------------------------------------------------------------------
    def timeline(self, steps=None, which: str | None = None, ax=None, *, launches=None,
                 context: int = 1, title: str | None = None) -> Figure:
        """An nsys-like timeline of a few steps.

        ``steps``: NVTX step numbers (``range(100, 103)``), or launch indices when the trace
        has no ``step N`` ranges; ``launches``: launch indices; ``which``: ``"worst"`` (the
        stall that left the GPU idle longest) or ``"typical"`` (the launch with the median GPU
        gap, the default), shown with ``context`` steps before it. ``ax``: draw into this
        axes instead of a new figure.
        """
        t0, t1, focus, what = self.window_for(steps, which, launches, context)
        pad = 0.015 * (t1 - t0)
        t0, t1 = t0 - pad, t1 + pad
        fig, ax, own = _fig_ax(ax, figsize=(13, 4))
        info = self._draw_timeline(ax, t0, t1, focus)
        if title is None:
            title = f"{self.name}: {what}"
            if focus is not None:
                r = self.analysis.launches.set_index("launch").loc[focus]
                title += f" - launch {focus}"
                step = self._step_of(float(r["api_start_ns"]))
                if step is not None:
                    title += f" (step {step})"
                title += f", {r['klass']}"
                title += "\n" + "\n".join(textwrap.wrap(self.caption(focus), 150))
        ax.set_title(title, loc="left", fontsize=10)
        if own:
            n_leg = -(-len(info["legend"]) // 4)
            height = 1.3 + 0.36 * info["rows"] + 0.2 * n_leg + 0.2 * title.count("\n")
            fig.set_size_inches(13, height)
            fig.legend(handles=list(info["legend"].values()), loc="lower center", ncol=4,
                       fontsize=7.5, frameon=False)
            fig.tight_layout(rect=(0, (0.22 * n_leg + 0.05) / height, 1, 1))
        return fig

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
        if r["klass"] == "launch_bound":
            return (f"No host wait stalled launch #{launch}, but the next launch came {idle} after "
                    f"the GPU ran dry (host busy{phase}): the host is slower than the GPU here.")
        if bool(r["waited"]):
            return (f"The host had {fmt_us(r['window_ns'] / 1e3)} of overlap before it waited on "
                    f"graph #{launch} ({r['block_name']}{phase}); launch #{launch + 1} was "
                    f"already queued, so the GPU went on after a {idle} gap.")
        return f"The host never waited on launch #{launch}; the GPU gap after it was {idle}."

    def _draw_timeline(self, ax, t0: float, t1: float, focus: int | None = None) -> dict:
        span = t1 - t0
        scale = 1e3 if span < 3e6 else 1e6  # ns per axis unit: µs or ms
        unit = "µs" if scale == 1e3 else "ms"
        x = lambda ns: (np.asarray(ns, dtype=float) - t0) / scale  # noqa: E731
        width_chars = _axes_width_chars(ax)

        api = self._api.window(t0, t1, "start_ns", "end_ns")
        nv = self._nvtx.window(t0, t1, "start_ns", "end_ns")
        ops = self._gpu_ops.window(t0, t1, "start_ns", "end_ns")
        graphs = self._graphs.window(t0, t1, "gpu_start_ns", "gpu_end_ns")
        L = self.analysis.launches
        # launches whose call, window, replay or following gap shows in the window
        near = self._reach.window(t0, t1, "api_start_ns", "reach_ns")

        rows: list[str] = []
        y: dict[str, float] = {}

        def add_row(key: str, label: str) -> float:
            y[key] = len(rows)
            rows.append(label)
            return y[key]

        # host lanes: the launching thread first, then the busiest others
        tids = pd.Index(pd.concat([api["tid"], nv["tid"]]).unique())
        main = L["tid"].mode()
        counts = pd.concat([api["tid"], nv["tid"]]).value_counts()
        order = sorted(tids, key=lambda t: (0 if len(main) and t == main.iloc[0] else 1, -counts.get(t, 0)))
        order = order[:_MAX_THREADS]
        separators = []
        for tid in order:
            name = self._thread_names.get(int(tid), f"thread ({int(tid) & 0xFFFFFF})")
            if separators or rows:
                separators.append(len(rows) - 0.5)
            depths = sorted(nv.loc[nv["tid"] == tid, "depth"].unique())[:_MAX_NVTX_ROWS]
            for k, d in enumerate(depths):
                add_row(f"nvtx:{tid}:{d}", f"{name}\nNVTX" if k == 0 else "NVTX")
            if (api["tid"] == tid).any() or (near["tid"] == tid).any():
                add_row(f"api:{tid}", "CUDA API" if depths else f"{name}\nCUDA API")
                mine = near[(near["tid"] == tid) & near["waited"]]
                if len(mine):
                    add_row(f"win:{tid}", "overlap window")
                    # windows that overlap in time (a deep queue) alternate over two rows
                    if (mine["block_start_ns"].to_numpy()[:-1] > mine["api_end_ns"].to_numpy()[1:]).any():
                        add_row(f"win2:{tid}", "")
        # GPU lanes: one per stream with work in the window
        streams = sorted(set(graphs["stream"].tolist()) | set(ops["stream"].tolist()))
        for s in streams:
            separators.append(len(rows) - 0.5)
            dev = graphs.loc[graphs["stream"] == s, "device"]
            dev = dev.iloc[0] if len(dev) else ops.loc[ops["stream"] == s, "device"].iloc[0]
            add_row(f"gpu:{s}", f"GPU {int(dev)}\nstream {int(s)}")

        legend: dict[str, object] = {}

        def bars(key: str, x0, x1, color, label: str | None, *, edge=None, hatch=None, lw=0.4,
                 gid=None, h=_BAR_H, alpha=1.0, z=2):
            x0, x1 = np.atleast_1d(x0), np.atleast_1d(x1)
            if not len(x0):
                return None
            # a call far shorter than a pixel still shows as a hairline
            w = np.maximum(x1 - x0, (t1 - t0) / scale / 2500)
            coll = ax.broken_barh(list(zip(x0, w)), (y[key] - h / 2, h), facecolors=color,
                                  edgecolors=edge or color, linewidth=lw, hatch=hatch,
                                  alpha=alpha, zorder=z)
            coll.set_gid(gid)
            if label and label not in legend:
                legend[label] = Patch(facecolor=color, edgecolor=edge or color, hatch=hatch,
                                      alpha=alpha, label=label)
            return coll

        def labels(key: str, x0, x1, texts, *, color="black", min_chars=4, box=None):
            for a, b, t in zip(np.atleast_1d(x0), np.atleast_1d(x1), texts):
                a, b = max(a, 0.0), min(b, (t1 - t0) / scale)
                n = int((b - a) / ((t1 - t0) / scale) * width_chars)
                if n < min_chars:
                    continue
                t = t if len(t) <= n else t[: max(n - 1, 1)] + "…"
                ax.text((a + b) / 2, y[key], t, ha="center", va="center", fontsize=7.5,
                        color=color, clip_on=True, zorder=6,
                        bbox=None if box is None else dict(facecolor=box, edgecolor="none",
                                                           pad=1.0, alpha=0.9))

        # GPU idle gaps: shaded on the GPU lane and faintly across the host lanes
        gap_rows = near[near["gpu_idle_ns"].notna() & (near["gpu_end_ns"] < t1) &
                        (near["next_gpu_start_ns"] > t0)]
        shown = (gap_rows["gpu_idle_ns"] > 0.004 * span) | gap_rows["stall"] | \
            (gap_rows["klass"].astype(str) == "launch_bound")
        gap_rows = gap_rows[shown & (gap_rows["gpu_idle_ns"] > 0)]
        for r in gap_rows.itertuples():
            klass = str(r.klass)
            color = CLASS_COLORS.get(klass, IDLE_COLOR) if klass != "healthy" else IDLE_COLOR
            a, b = x(r.gpu_end_ns), x(r.next_gpu_start_ns)
            ax.axvspan(a, b, color=color, alpha=0.07, lw=0, zorder=0)
            key = f"gpu:{r.stream}"
            if key in y:
                bars(key, a, b, "white", "GPU idle (shaded: coloured by the stall that caused it)",
                     edge=color, hatch="////", lw=0.8, gid="gpu-idle", z=1)
                legend["GPU idle (shaded: coloured by the stall that caused it)"] = Patch(
                    facecolor="white", edgecolor=IDLE_COLOR, hatch="////",
                    label="GPU idle (hatched, tinted by the stall that caused it)")
                labels(key, a, b, [f"GPU idle {fmt_us(r.gpu_idle_ns / 1e3)}"], color=color,
                       min_chars=14, box="white")

        # NVTX ranges
        for tid in order:
            part = nv[nv["tid"] == tid]
            for d in part["depth"].unique():
                key = f"nvtx:{tid}:{d}"
                if key not in y:
                    continue
                p = part[part["depth"] == d]
                a, b = x(p["start_ns"]), x(p["end_ns"])
                bars(key, a, b, NVTX_COLORS[int(d) % 2], "NVTX range (step, phase, op)",
                     edge="#8C8C8C", gid="nvtx")
                labels(key, a, b, p["text"].tolist(), min_chars=3)

        # CUDA API calls: launches, copies, waits by class, the rest
        for tid in order:
            key = f"api:{tid}"
            if key not in y:
                continue
            part = api[api["tid"] == tid]
            is_launch = part["name"].isin(LAUNCH_APIS)
            is_wait = part["block"] >= 0
            is_copy = part["name"].map(is_copy_api).astype(bool) & ~is_wait
            other = part[~is_launch & ~is_wait & ~is_copy]
            bars(key, x(other["start_ns"]), x(other["end_ns"]), OTHER_CALL_COLOR,
                 "other CUDA call (event record...)", gid="api:other")
            cp = part[is_copy]
            bars(key, x(cp["start_ns"]), x(cp["end_ns"]), COPY_CALL_COLOR, "cudaMemcpyAsync call",
                 gid="api:copy")
            ln = part[is_launch]
            bars(key, x(ln["start_ns"]), x(ln["end_ns"]), GRAPH_COLOR, "cudaGraphLaunch call / graph replay",
                 gid="api:launch")
            labels(key, x(ln["start_ns"]), x(ln["end_ns"]), ["launch"] * len(ln), color="white")
            waits = part[is_wait]
            for klass in ("healthy", *_STALLS, "unpaired"):
                w = waits[waits["wait_class"] == klass]
                if w.empty:
                    continue
                color = CLASS_COLORS.get(klass, UNPAIRED_WAIT_COLOR)
                bars(key, x(w["start_ns"]), x(w["end_ns"]), color,
                     BLOCK_LABELS.get(klass, "wait, not on a graph launch"), gid=f"block:{klass}",
                     edge="black" if klass in _STALLS else None, lw=0.8 if klass in _STALLS else 0.4)
                text_color = "white" if klass in ("gpu_to_cpu", "unpaired", "other_stall") else "black"
                labels(key, x(w["start_ns"]), x(w["end_ns"]),
                       [f"{n.replace('cuda', '')} {fmt_us((e - s) / 1e3)}" for n, s, e in
                        zip(w["name"], w["start_ns"], w["end_ns"])], color=text_color)

        # overlap windows: a bracket from the end of the launch call to the start of its block
        for tid in order:
            key = f"win:{tid}"
            if key not in y:
                continue
            part = near[(near["tid"] == tid) & near["waited"] & (near["block_start_ns"] > t0) &
                        (near["api_end_ns"] < t1)]
            two = f"win2:{tid}" in y
            for r in part.itertuples():
                color = CLASS_COLORS.get(str(r.klass), CLASS_COLORS["healthy"]) if r.stall else \
                    CLASS_COLORS["healthy"]
                base = y[f"win2:{tid}"] if two and r.launch % 2 else y[key]
                yy = base + 0.22  # the bracket's bar; its ends rise towards the row's top
                a, b = float(x(r.api_end_ns)), float(x(r.block_start_ns))
                ax.plot([a, a, b, b], [yy - 0.3, yy, yy, yy - 0.3], color=color, lw=1.6,
                        solid_capstyle="butt", zorder=4, gid="window")
                vis = (min(b, (t1 - t0) / scale) - max(a, 0)) / ((t1 - t0) / scale) * width_chars
                txt = f"#{r.launch} window {fmt_us(r.window_ns / 1e3)}"
                if vis < len(txt) + 2:
                    txt = fmt_us(r.window_ns / 1e3)
                if vis >= len(txt) + 2:
                    ax.text((max(a, 0) + min(b, (t1 - t0) / scale)) / 2, yy - 0.06, txt,
                            ha="center", va="bottom", fontsize=7, color=color, clip_on=True,
                            zorder=6)
                else:  # too narrow for the text inside: put it to the right of the bracket
                    ax.text(b + (t1 - t0) / scale * 0.004, yy - 0.06, txt, ha="left", va="bottom",
                            fontsize=7, color=color, clip_on=True, zorder=6)
            if len(part):
                stalled = part["stall"].to_numpy()
                color = CLASS_COLORS.get(str(part.loc[part["stall"], "klass"].iloc[0]), "#555555") \
                    if stalled.all() else CLASS_COLORS["healthy"] if not stalled.any() else "#555555"
                legend["overlap window: launch call end to the wait that blocks on it"] = Line2D(
                    [], [], color=color, lw=1.6,
                    label="overlap window (launch end to its wait; class colour)")

        # GPU streams: graph replays and eager work
        for s in streams:
            key = f"gpu:{s}"
            g = graphs[graphs["stream"] == s]
            if len(g):
                edge = np.where(g["launch"].to_numpy() == (focus if focus is not None else -1),
                                "black", GRAPH_COLOR)
                bars(key, x(g["gpu_start_ns"]), x(g["gpu_end_ns"]), GRAPH_COLOR,
                     "cudaGraphLaunch call / graph replay", edge=list(edge), gid="graph", lw=1.2)
                labels(key, x(g["gpu_start_ns"]), x(g["gpu_end_ns"]),
                       [f"graph #{n}  {fmt_us((e - s_) / 1e3)}" for n, s_, e in
                        zip(g["launch"], g["gpu_start_ns"], g["gpu_end_ns"])], color="white")
            o = ops[ops["stream"] == s]
            if len(o):
                bars(key, x(o["start_ns"]), x(o["end_ns"]), EAGER_COLOR,
                     "eager kernel / copy on the GPU", gid="eager", h=_BAR_H * 0.6, z=3)

        # a dotted line from each launch call to its replay on the GPU
        for r in near.itertuples():
            key = f"gpu:{r.stream}"
            if key in y and f"api:{r.tid}" in y and np.isfinite(r.gpu_start_ns) and \
                    t0 <= r.api_start_ns < t1 and t0 < r.gpu_start_ns < t1:
                ax.annotate("", xy=(x(r.gpu_start_ns), y[key] - _BAR_H / 2),
                            xytext=(x(r.api_start_ns), y[f"api:{r.tid}"] + _BAR_H / 2),
                            arrowprops=dict(arrowstyle="->", color=GRAPH_COLOR, lw=0.7,
                                            ls=(0, (2, 2)), shrinkA=0, shrinkB=0), zorder=5)

        for s_ in separators:
            ax.axhline(s_, color="#555555", lw=0.8, zorder=1)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(rows, fontsize=8)
        ax.set_xlim(0, (t1 - t0) / scale)
        ax.set_xlabel(f"time ({unit}) since t0 = {t0 / 1e9:.6f} s into the capture")
        ax.grid(axis="x", color="#DDDDDD", lw=0.5, zorder=0)
        ax.tick_params(axis="y", length=0)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        ax.nsysscope_rows = dict(y)  # row key -> y position, for tests and callers
        ax.nsysscope_window = (t0, t1, scale)
        return {"rows": len(rows), "legend": legend}

    # distributions ----------------------------------------------------------------------------
    def distributions(self, kind: str = "cdf") -> Figure:
        """Overlap windows and GPU idle gaps of the steady-state launches, per class."""
        return distributions_figure(self.analysis, kind=kind, name=self.name)

    def series(self, max_points: int = _SERIES_POINTS) -> Figure:
        """Per-launch GPU gap, overlap window and launch interval over the capture."""
        return series_figure(self.analysis, max_points=max_points, name=self.name)

    def compare(self, other, labels: tuple[str, str] | None = None) -> Figure:
        """This trace (baseline) next to ``other`` (candidate)."""
        other = getattr(other, "analysis", other)
        return compare_figure(self.analysis, other, labels=labels)

    def _repr_html_(self) -> str:
        return ("<p>Plots of <code>%s</code>: <code>.timeline(steps=..., which='worst'|'typical')"
                "</code>, <code>.distributions()</code>, <code>.series()</code>, "
                "<code>.compare(other)</code></p>" % self.name)


def timeline_figure(analysis: Analysis, **kw) -> Figure:
    """Shorthand for ``TracePlots(analysis).timeline(**kw)``."""
    return TracePlots(analysis).timeline(**kw)


# -- distributions ---------------------------------------------------------------------------------

def _dist_data(source) -> pd.DataFrame:
    """Steady-state ``window_us``, ``gpu_idle_us``, ``klass`` from an Analysis or a Summary
    (its ``distributions``)."""
    if isinstance(source, Analysis):
        s = source.launches[source.launches["steady"]]
        return pd.DataFrame({"window_us": s["window_ns"].to_numpy(dtype=float) / 1e3,
                             "gpu_idle_us": s["gpu_idle_ns"].to_numpy(dtype=float) / 1e3,
                             "klass": s["klass"].astype(str).to_numpy()})
    summary = getattr(source, "summary", source)
    if callable(summary):
        summary = summary()
    d = getattr(summary, "distributions", None)
    if d is None:
        return pd.DataFrame({"window_us": [], "gpu_idle_us": [], "klass": []})
    def floats(values) -> np.ndarray:  # None (no value) becomes NaN
        return np.array([np.nan if v is None else v for v in values], dtype=float)

    return pd.DataFrame({"window_us": floats(d.window_us), "gpu_idle_us": floats(d.gpu_idle_us),
                         "klass": list(d.klass)})


def _class_order(klasses) -> list[str]:
    present = set(klasses)
    return [k for k in ("gpu_to_cpu", "cpu_to_gpu", "other_stall", "launch_bound", "healthy")
            if k in present]


def _cdf(ax, v: np.ndarray, log: bool, total: int | None = None, **kw):
    """Empirical CDF; with ``total``, scaled so it ends at ``len(v) / total``."""
    v = np.sort(v[np.isfinite(v)])
    if not len(v):
        return None
    if log:
        v = np.maximum(v, 1.0)
    p = np.arange(1, len(v) + 1) / (total or len(v))
    return ax.step(np.concatenate([[v[0]], v]), np.concatenate([[0], p]), where="post", **kw)


def _dist_axes(ax, data: pd.DataFrame, col: str, title: str, kind: str,
               threshold_us: float | None = None) -> None:
    vals = data[col].to_numpy(dtype=float)
    log = _use_log(vals)
    finite = vals[np.isfinite(vals)]
    if kind == "cdf" and len(finite) and data["klass"].nunique() > 1:
        _cdf(ax, finite, log, total=len(data), color="#888888", lw=1, ls="--",
             label=f"all steady launches (n={len(finite)})")
    for klass in _class_order(data["klass"]):
        v = data.loc[data["klass"] == klass, col].to_numpy(dtype=float)
        v = v[np.isfinite(v)]
        if not len(v):
            continue
        label = f"{CLASS_LABELS[klass]} (n={len(v)}, p50 {fmt_us(np.median(v))})"
        color = CLASS_COLORS[klass]
        if kind == "hist":
            pos = finite[finite > 0]
            lo, hi = (max(pos.min(), 1.0), pos.max()) if len(pos) else (1.0, 10.0)
            bins = np.geomspace(lo, hi * 1.01, 50) if log else np.linspace(finite.min(), hi, 50)
            ax.hist(np.maximum(v, lo) if log else v, bins=bins, histtype="stepfilled",
                    alpha=0.35, color=color, label=label, edgecolor=color, linewidth=1.2)
        else:  # each class ends at its share of the steady launches
            _cdf(ax, v, log, total=len(data), color=color, lw=2, label=label)
    if log:
        ax.set_xscale("log")
    ax.xaxis.set_major_formatter(_us_axis_formatter())
    if threshold_us is not None:
        ax.axvline(threshold_us, color="#555555", ls=":", lw=1)
        ax.annotate(f"launch-bound threshold {fmt_us(threshold_us)}", (threshold_us, 0.02),
                    xycoords=("data", "axes fraction"), fontsize=7.5, color="#555555",
                    rotation=90, ha="right", va="bottom")
    ax.set_title(title, loc="left", fontsize=10)
    ax.set_ylabel("fraction of steady launches ≤ x" if kind == "cdf" else "launches")
    if kind == "cdf":
        ax.set_ylim(0, 1.02)
    ax.grid(True, color="#E5E5E5", lw=0.6)
    if not len(finite):
        ax.text(0.5, 0.5, "no values", transform=ax.transAxes, ha="center", color="#777777")
    elif ax.get_legend_handles_labels()[0]:  # below the axes: never over a curve
        ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(0.0, -0.16), frameon=False,
                  ncol=2)


def distributions_figure(source, kind: str = "cdf", name: str | None = None) -> Figure:
    """CDFs (or histograms, ``kind="hist"``) of the overlap window and the GPU idle gap of
    the steady-state launches, one curve per class. ``source``: an Analysis, or a Summary
    carrying ``distributions``."""
    if kind not in ("cdf", "hist"):
        raise ValueError("kind must be 'cdf' or 'hist'")
    data = _dist_data(source)
    n_leg = -(-(data["klass"].nunique() + 1) // 2)
    fig = NsysscopeFigure(figsize=(13, 4.0 + 0.2 * n_leg))
    ax1, ax2 = fig.subplots(1, 2)
    threshold = None
    summary = getattr(source, "summary", source)
    if isinstance(summary, Summary):
        threshold = summary.config.get("launch_bound_gap_us")
    _dist_axes(ax1, data, "window_us",
               "Overlap window: launch call end → the wait on it (longer is better)", kind)
    _dist_axes(ax2, data, "gpu_idle_us",
               "GPU idle after each replay, until the next one (shorter is better)", kind,
               threshold_us=threshold)
    ax1.set_xlabel("overlap window")
    ax2.set_xlabel("GPU idle gap")
    if name:
        fig.suptitle(f"{name}: steady-state distributions ({len(data)} launches)", x=0.01,
                     ha="left", fontsize=11)
    fig.tight_layout()
    return fig


# -- series ----------------------------------------------------------------------------------------

def _thin(idx: np.ndarray, n: int) -> np.ndarray:
    if len(idx) <= n:
        return idx
    return idx[np.linspace(0, len(idx) - 1, n).astype(int)]


def series_figure(analysis: Analysis, max_points: int = _SERIES_POINTS, name: str | None = None) -> Figure:
    """Per-launch values over the capture: GPU idle gap, overlap window and launch interval,
    coloured by class; warm-up shaded. Long traces are thinned (every class keeps up to
    ``max_points`` evenly spaced launches) and get a binned median and min/max band."""
    L = analysis.launches
    fig = NsysscopeFigure(figsize=(13, 7.2))
    axes = fig.subplots(3, 1, sharex=True)
    if L.empty:
        return fig
    t_first = float(L["api_start_ns"].min())
    t = (L["api_start_ns"].to_numpy(dtype=float) - t_first) / 1e9
    klass = L["klass"].astype(str).to_numpy()
    interval = np.diff(L["api_start_ns"].to_numpy(dtype=float), append=np.nan) / 1e3
    interval[L["tid"].to_numpy() != np.roll(L["tid"].to_numpy(), -1)] = np.nan
    panels = [("gpu_idle_us", L["gpu_idle_ns"].to_numpy(dtype=float) / 1e3, "GPU idle",
               "GPU idle after each replay, until the next one (shorter is better)"),
              ("window_us", L["window_ns"].to_numpy(dtype=float) / 1e3, "overlap window",
               "Overlap window: launch call end → the host's wait on it (longer is better)"),
              ("interval_us", interval, "launch interval",
               "Launch-to-launch interval (≈ step time)")]
    warm = int(analysis.summary.warmup_launches)
    thinned = len(L) > max_points
    for ax, (col, v, label, title) in zip(axes, panels):
        if warm > 0 and warm < len(L):
            ax.axvspan(t[0], t[min(warm, len(t) - 1)], color="#BBBBBB", alpha=0.3, lw=0, zorder=0)
        if thinned:  # binned envelope so nothing is hidden by thinning
            ok = np.isfinite(v)
            if ok.sum() > 1:
                bins = np.linspace(t[ok].min(), t[ok].max() + 1e-9, _SERIES_BINS + 1)
                which = np.digitize(t[ok], bins) - 1
                df = pd.DataFrame({"b": which, "v": v[ok]}).groupby("b")["v"].agg(["min", "median", "max"])
                mid = (bins[df.index.to_numpy()] + bins[df.index.to_numpy() + 1]) / 2
                ax.fill_between(mid, np.maximum(df["min"], 1.0), df["max"], color="#999999",
                                alpha=0.25, lw=0, step="mid", label="min-max per bin", zorder=1)
                ax.plot(mid, np.maximum(df["median"], 1.0), color="#444444", lw=0.8,
                        drawstyle="steps-mid", label="median per bin", zorder=2)
        for k in _class_order(klass) + [k for k in ("last", "no_gpu_work") if k in set(klass)]:
            idx = np.flatnonzero((klass == k) & np.isfinite(v))
            idx = _thin(idx, max_points)
            if not len(idx):
                continue
            stall = k in _STALLS
            ax.scatter(t[idx], np.maximum(v[idx], 1.0), s=14 if stall else 7,
                       color=CLASS_COLORS[k], label=CLASS_LABELS[k], zorder=4 if stall else 3,
                       marker="o" if k != "launch_bound" else "D", linewidths=0)
        vals = v[np.isfinite(v) & (v > 0)]
        # log when a few outliers (warm-up, intermittent stalls) would flatten the rest
        if len(vals) > 1 and (_use_log(vals) or vals.max() / np.median(vals) > 8):
            ax.set_yscale("log")
        ax.yaxis.set_major_formatter(_us_axis_formatter())
        if col == "gpu_idle_us":
            thr = analysis.summary.config.get("launch_bound_gap_us")
            if thr:
                ax.axhline(thr, color="#555555", ls=":", lw=1, zorder=2)
                ax.annotate(f"launch-bound threshold {fmt_us(thr)}", (1.0, thr),
                            xycoords=("axes fraction", "data"), ha="right", va="bottom",
                            fontsize=7.5, color="#555555")
        ax.set_ylabel(label, fontsize=8.5)
        ax.set_title(title, loc="left", fontsize=9.5)
        ax.grid(True, color="#E5E5E5", lw=0.6)
    h, lab = [], []
    for ax in axes:  # every class that shows in any panel, once
        for hh, ll in zip(*ax.get_legend_handles_labels()):
            if ll not in lab:
                h.append(hh)
                lab.append(ll)
    if warm:
        h.append(Patch(color="#BBBBBB", alpha=0.5))
        lab.append(f"warm-up ({warm} launches, not judged)")
    fig.legend(h, lab, fontsize=8, loc="lower center", ncol=min(len(h), 4), frameon=False,
               markerscale=1.8)
    axes[-1].set_xlabel("time since the first graph launch (s)")
    title = f"{name or ''}: per-launch series, {len(L)} launches".lstrip(": ")
    if thinned:
        title += f" (thinned to ≤{max_points} points per class, plus a binned median and min-max band)"
    fig.suptitle(title, x=0.01, ha="left", fontsize=11)
    n_leg = -(-len(h) // 4)
    fig.tight_layout(rect=(0, (0.25 * n_leg + 0.1) / 7.2, 1, 1))
    return fig


# -- comparison ------------------------------------------------------------------------------------

def _name_of(source, default: str) -> str:
    summary = getattr(source, "summary", source)
    if callable(summary):
        summary = summary()
    path = getattr(getattr(summary, "trace", None), "path", None)
    return str(path).replace("\\", "/").rsplit("/", 1)[-1] if path else default


def _summary_of(source) -> Summary | None:
    s = getattr(source, "summary", source)
    if callable(s):
        s = s()
    return s if isinstance(s, Summary) else None


def compare_figure(a, b, labels: tuple[str, str] | None = None, timelines: bool = True,
                   which: tuple[str, str] = ("typical", "worst")) -> Figure:
    """Baseline ``a`` next to candidate ``b`` (each an Analysis, an OpenTrace or a Summary
    with ``distributions``): CDFs of both traces' overlap windows and GPU gaps on shared
    axes, the share of steady launches per class, and, when both are analyses, a timeline
    of each on the same time scale (by default the baseline's typical launch above the
    candidate's worst stall; ``which`` picks)."""
    a = getattr(a, "analysis", a)
    b = getattr(b, "analysis", b)
    labels = labels or (f"baseline: {_name_of(a, 'a')}", f"candidate: {_name_of(b, 'b')}")
    da, db = _dist_data(a), _dist_data(b)
    both_traces = timelines and isinstance(a, Analysis) and isinstance(b, Analysis)
    sa, sb = _summary_of(a), _summary_of(b)
    head = 0.45 if (sa and sb) else 0.1  # inches for the verdict lines on top
    height = (10.8 if both_traces else 4.6) + head
    fig = NsysscopeFigure(figsize=(14, height))
    if both_traces:
        gs = fig.add_gridspec(3, 3, height_ratios=[1.15, 1.45, 1.45])
        top = [fig.add_subplot(gs[0, i]) for i in range(3)]
    else:
        top = list(fig.subplots(1, 3))
    styles = [dict(color="#555555", ls="--"), dict(color=OKABE_ITO["blue"], ls="-")]
    for ax, col, title in ((top[0], "window_us", "Overlap window (longer is better)"),
                           (top[1], "gpu_idle_us", "GPU idle gap (shorter is better)")):
        allv = np.concatenate([da[col].to_numpy(dtype=float), db[col].to_numpy(dtype=float)])
        log = _use_log(allv)
        for d, lab, st in ((da, labels[0], styles[0]), (db, labels[1], styles[1])):
            v = d[col].to_numpy(dtype=float)
            v = v[np.isfinite(v)]
            if len(v):
                _cdf(ax, v, log, lw=2, label=f"{lab.split(':')[0]}: p50 {fmt_us(np.median(v))}, "
                                             f"p90 {fmt_us(np.percentile(v, 90))}", **st)
        if log:
            ax.set_xscale("log")
        ax.xaxis.set_major_formatter(_us_axis_formatter())
        ax.set_ylim(0, 1.02)
        ax.set_title(title, loc="left", fontsize=10)
        ax.set_ylabel("fraction of steady launches ≤ x", fontsize=8.5)
        ax.grid(True, color="#E5E5E5", lw=0.6)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(0, -0.12), frameon=False)
    # class shares: baseline hatched and pale, candidate solid
    ax = top[2]
    klasses = _class_order(list(da["klass"]) + list(db["klass"])) or ["healthy"]
    pos = np.arange(len(klasses))
    for i, d in enumerate((da, db)):
        n = max(len(d), 1)
        share = np.array([(d["klass"] == k).sum() / n for k in klasses])
        yy = pos + (i - 0.5) * 0.4
        ax.barh(yy, share, height=0.38, color=[CLASS_COLORS[k] for k in klasses],
                alpha=0.4 if i == 0 else 1.0, edgecolor="black", linewidth=0.6,
                hatch="//" if i == 0 else None)
        for p_, s_ in zip(yy, share):
            ax.text(s_ + 0.01, p_, f"{s_:.0%}" if s_ >= 0.005 else "0", va="center", fontsize=7)
    ax.set_yticks(pos)
    ax.set_yticklabels(klasses, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.15)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:.0%}" if v <= 1 else ""))
    ax.set_title("Share of steady launches per class", loc="left", fontsize=10)
    ax.legend(handles=[Patch(facecolor="#DDDDDD", edgecolor="black", hatch="//",
                             label=f"{labels[0].split(':')[0]} (upper bar, hatched)"),
                       Patch(facecolor="#555555", edgecolor="black",
                             label=f"{labels[1].split(':')[0]} (lower bar)")],
              fontsize=7.5, loc="upper left", bbox_to_anchor=(0, -0.12), frameon=False)
    ax.grid(True, axis="x", color="#E5E5E5", lw=0.6)
    bottom = 0.0
    if both_traces:
        pa, pb = TracePlots(a), TracePlots(b)
        wa, wb = pa.window_for(which=which[0]), pb.window_for(which=which[1])
        width = max(wa[1] - wa[0], wb[1] - wb[0]) * 1.03
        legend: dict = {}
        for row, (p, w, lab) in enumerate(((pa, wa, labels[0]), (pb, wb, labels[1]))):
            axt = fig.add_subplot(gs[1 + row, :])
            t0 = w[0] - 0.015 * width
            info = p._draw_timeline(axt, t0, t0 + width, w[2])
            legend.update(info["legend"])
            axt.set_title(f"{lab} - {w[3]} (launch {w[2]}, {p.analysis.launches.loc[w[2], 'klass']}); "
                          "both timelines on the same time scale", loc="left", fontsize=10)
        fig.legend(handles=list(legend.values()), loc="lower center", ncol=4, fontsize=7.5,
                   frameon=False)
        bottom = (0.22 * -(-len(legend) // 4) + 0.05) / height
    if sa and sb:
        fig.suptitle(f"{labels[0]}: {sa.verdict}\n{labels[1]}: {sb.verdict}", x=0.01, y=0.995,
                     ha="left", va="top", fontsize=9.5)
    fig.tight_layout(rect=(0, bottom, 1, 1))  # tight_layout makes room for the suptitle
    return fig


# -- helpers ---------------------------------------------------------------------------------------

def _fig_ax(ax, figsize):
    if ax is not None:
        return ax.figure, ax, False
    fig = NsysscopeFigure(figsize=figsize)
    return fig, fig.add_subplot(1, 1, 1), True


def _axes_width_chars(ax) -> float:
    """About how many 7.5 pt characters fit across the axes."""
    fig = ax.figure
    w_in = fig.get_figwidth() * ax.get_position().width
    return max(20.0, w_in * 72 / (7.5 * 0.6))


def _ranges(ids: Sequence[int]) -> str:
    ids = sorted(set(int(i) for i in ids))
    if not ids:
        return "(none)"
    if ids == list(range(ids[0], ids[-1] + 1)) and len(ids) > 2:
        return f"{ids[0]}-{ids[-1]}"
    return ", ".join(map(str, ids[:8])) + ("..." if len(ids) > 8 else "")
