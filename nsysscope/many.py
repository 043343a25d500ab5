"""Analyse many traces at once (say, one per GPU rank) and compare them.

``nsysscope report DIR_OR_GLOB...`` expands folders and globs to trace files, analyses each
in its own worker process (``--jobs``), or on an existing Dask distributed cluster
(``--scheduler ADDRESS``; the workers must see the same paths), and prints one row per trace,
an aggregate row, and the rank that stalls most. A trace that cannot be analysed gets a row
with its error; the others are still reported.

Each worker runs exactly what ``nsysscope report TRACE`` runs (:func:`nsysscope.load` then
:func:`nsysscope.analyze`) and sends back the :class:`~nsysscope.model.Summary` plus the
steady-state per-launch overlap windows and GPU idle gaps, so the aggregate percentiles are
exact over all launches of all traces.
"""

from __future__ import annotations

import glob
import json
import os
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

from .errors import NsysscopeError, UnreadableInput
from .progress import progress

#: what a trace file's name ends with
TRACE_SUFFIXES = (".sqlite", ".sqlite.xz", ".sqlite.gz", ".nsys-rep", ".qdrep")
_CACHE_SUFFIX = ".nsysscope-cache.sqlite"
_RANK = re.compile(r"(?:^|[^a-z])(?:rank|rk|proc|gpu|dev(?:ice)?|node)[_\-.=]?(\d+)", re.I)
_GLOB = re.compile(r"[*?\[]")


# -- which files ---------------------------------------------------------------------------------

def is_trace_name(name: str) -> bool:
    n = name.lower()
    return n.endswith(TRACE_SUFFIXES) and not n.endswith(_CACHE_SUFFIX)


def names_many(spec: str) -> bool:
    """Whether one command-line argument stands for several traces: a folder or a glob."""
    p = Path(spec)
    return p.is_dir() or (bool(_GLOB.search(spec)) and not p.exists())


def expand(specs: Iterable[str]) -> list[Path]:
    """Trace files named by ``specs``: files as given, folders' trace files (not recursive,
    sorted), and glob patterns (``**`` recurses). Duplicates are dropped; a folder or glob
    with no trace in it is an error."""
    out: list[Path] = []
    seen: set[str] = set()

    def add(p: Path) -> None:
        key = os.path.abspath(p)
        if key not in seen:
            seen.add(key)
            out.append(p)

    for spec in specs:
        p = Path(spec)
        if p.is_dir():
            found = sorted(q for q in p.iterdir() if q.is_file() and is_trace_name(q.name))
            if not found:
                raise UnreadableInput(f"{spec}: no trace files in this folder "
                                      f"({', '.join(TRACE_SUFFIXES)})")
            for q in _natural(found):
                add(q)
        elif _GLOB.search(spec) and not p.exists():
            found = [Path(q) for q in glob.glob(spec, recursive=True)]
            found = [q for q in found if q.is_file() and is_trace_name(q.name)]
            if not found:
                raise UnreadableInput(f"{spec}: no trace file matches")
            for q in _natural(found):
                add(q)
        else:
            add(p)  # a missing or unreadable file gets its error row from the worker
    return out


def _natural(paths: Iterable[Path]) -> list[Path]:
    """rank2 before rank10."""
    def key(p: Path):
        return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", str(p))]
    return sorted(paths, key=key)


def rank_of(path: str | Path) -> int | None:
    """The rank a trace's file name names (``rank3``, ``gpu_3``, ``proc-3``...), if any."""
    m = None
    for m in _RANK.finditer(Path(path).name):
        pass
    return int(m.group(1)) if m else None


# -- one trace -----------------------------------------------------------------------------------

@dataclass
class TraceResult:
    """What one worker sends back: the summary, or the error that stopped the analysis."""

    path: str
    rank: int | None
    summary: object | None = None  # nsysscope.model.Summary
    error: str | None = None
    exit_code: int = 0
    seconds: float = 0.0
    lost_us: float = 0.0  # GPU idle time after the steady-state stalls
    window_us: np.ndarray = field(default_factory=lambda: np.empty(0, np.float32))
    gpu_idle_us: np.ndarray = field(default_factory=lambda: np.empty(0, np.float32))

    @property
    def ok(self) -> bool:
        return self.summary is not None

    @property
    def stalled(self) -> int:
        return sum(self.summary.stalls.values()) if self.ok else 0

    @property
    def stall_share(self) -> float:
        n = self.summary.steady_launches if self.ok else 0
        return self.stalled / n if n else 0.0

    @property
    def label(self) -> str:
        return str(self.rank) if self.rank is not None else "-"


def analyse_one(path: str, config=None, nsys: str | None = None) -> TraceResult:
    """Load and analyse one trace; never raises for a bad trace (the error goes in the
    result). Runs in a worker process or on a Dask worker."""
    from .analysis import analyze
    from .trace import load

    t0 = time.perf_counter()
    result = TraceResult(path=str(path), rank=rank_of(path))
    try:
        a = analyze(load(path, nsys=nsys), config)
    except NsysscopeError as e:
        result.error, result.exit_code = str(e), e.exit_code
    except Exception as e:  # noqa: BLE001 - one broken trace must not sink the others
        result.error, result.exit_code = f"internal error: {type(e).__name__}: {e}", 70
    else:
        steady = a.launches[a.launches["steady"]]
        result.summary = a.summary
        result.window_us = (steady["window_ns"].to_numpy(dtype=np.float64) / 1e3).astype(np.float32)
        result.gpu_idle_us = (steady["gpu_idle_ns"].to_numpy(dtype=np.float64) / 1e3).astype(np.float32)
        stalled = steady[steady["stall"]]
        result.lost_us = float(stalled["gpu_idle_ns"].clip(lower=0).sum() / 1e3)
    result.seconds = round(time.perf_counter() - t0, 3)
    return result


def _init_worker(threads: int) -> None:
    os.environ["NSYSSCOPE_THREADS"] = str(threads)
    os.environ["NSYSSCOPE_PROGRESS"] = "0"


# -- many traces ---------------------------------------------------------------------------------

def run_local(paths: list[Path], jobs: int | None = None, config=None,
              nsys: str | None = None) -> list[TraceResult]:
    """Analyse ``paths`` in ``jobs`` worker processes (default: one per CPU, at most one per
    trace). ``jobs=1`` runs them one after the other in this process."""
    from .trace.load import cpu_count
    cpus = cpu_count()
    jobs = max(1, min(jobs or cpus, len(paths)))
    results: dict[int, TraceResult] = {}
    with progress("analysing traces", total=len(paths)) as bar:
        if jobs == 1:
            for i, p in enumerate(paths):
                results[i] = analyse_one(str(p), config, nsys)
                bar.advance()
        else:
            import multiprocessing as mp
            method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
            ctx = mp.get_context(method)
            if method == "forkserver":
                ctx.set_forkserver_preload(["nsysscope.many", "nsysscope.analysis",
                                            "nsysscope.trace"])
            with ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_init_worker,
                                     initargs=(max(1, cpus // jobs),)) as pool:
                futures = {pool.submit(analyse_one, str(p), config, nsys): i
                           for i, p in enumerate(paths)}
                for f in as_completed(futures):
                    results[futures[f]] = f.result()
                    bar.advance()
    return [results[i] for i in range(len(paths))]


def run_dask(paths: list[Path], address: str, config=None, nsys: str | None = None,
             client=None) -> list[TraceResult]:
    """Analyse ``paths`` on the Dask distributed cluster at ``address`` (the workers must
    see the same files). ``client``: an existing ``dask.distributed.Client`` instead."""
    try:
        from dask.distributed import Client, as_completed as dask_completed
    except ImportError as e:
        raise UnreadableInput(f"--scheduler needs dask.distributed ({e}): "
                              "pip install 'nsysscope[dask]'") from None
    own = client is None
    if own:
        try:
            client = Client(address, timeout="30s")
        except (OSError, TimeoutError) as e:
            raise UnreadableInput(f"--scheduler {address}: cannot reach the Dask scheduler "
                                  f"({e})") from None
    try:
        names = [os.path.abspath(p) for p in paths]  # not resolved: a symlink's name is its rank
        futures = client.map(analyse_one, names, config=config, nsys=nsys, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        results: dict[int, TraceResult] = {}
        with progress(f"analysing traces on {address}", total=len(paths)) as bar:
            for f in dask_completed(futures):
                r = f.result()
                r.path = str(paths[index[f.key]])
                r.rank = rank_of(r.path)
                results[index[f.key]] = r
                bar.advance()
        return [results[i] for i in range(len(paths))]
    finally:
        if own:
            client.close()


# -- the comparison ------------------------------------------------------------------------------

@dataclass
class Aggregate:
    traces: int
    analysed: int
    failed: int
    launches: int
    steady_launches: int
    stalls: dict[str, int]
    stall_share: float
    lost_us: float
    window_p50_us: float | None
    gpu_idle_p50_us: float | None
    gpu_busy_mean: float | None
    launches_per_s_mean: float | None
    worst: TraceResult | None  # the trace that stalls most


def _p50(arrays: list[np.ndarray]) -> float | None:
    v = np.concatenate(arrays) if arrays else np.empty(0)
    v = v[~np.isnan(v)]
    return round(float(np.percentile(v, 50)), 2) if len(v) else None


def _mean(values: list) -> float | None:
    v = [x for x in values if x is not None]
    return round(float(np.mean(v)), 4) if v else None


def aggregate(results: list[TraceResult]) -> Aggregate:
    ok = [r for r in results if r.ok]
    stalls: dict[str, int] = {}
    for r in ok:
        for k, v in r.summary.stalls.items():
            stalls[k] = stalls.get(k, 0) + v
    steady = sum(r.summary.steady_launches for r in ok)
    worst = max(ok, key=lambda r: (r.stall_share, r.lost_us), default=None)
    if worst is not None and worst.stalled == 0 and worst.lost_us == 0:
        worst = None
    return Aggregate(
        traces=len(results), analysed=len(ok), failed=len(results) - len(ok),
        launches=sum(r.summary.launches for r in ok), steady_launches=steady,
        stalls=stalls, stall_share=round(sum(stalls.values()) / steady, 4) if steady else 0.0,
        lost_us=round(sum(r.lost_us for r in ok), 1),
        window_p50_us=_p50([r.window_us for r in ok]),
        gpu_idle_p50_us=_p50([r.gpu_idle_us for r in ok]),
        gpu_busy_mean=_mean([r.summary.gpu_busy for r in ok]),
        launches_per_s_mean=_mean([r.summary.launches_per_s for r in ok]), worst=worst)


def worst_line(agg: Aggregate) -> str:
    w = agg.worst
    if w is None:
        return ("No trace stalls in steady state." if agg.analysed else "No trace could be analysed.")
    who = f"rank {w.rank} ({Path(w.path).name})" if w.rank is not None else Path(w.path).name
    s = w.summary
    kind = max(s.stalls, key=s.stalls.get) if w.stalled else "launch_bound"
    top = next((x for x in s.sites if x.klass == kind), None)
    where = f" at {top.where}" if top else ""
    return (f"{who} stalls most: {w.stalled}/{s.steady_launches} steady launches "
            f"({w.stall_share:.1%}, {kind}{where}), {_ms(w.lost_us)} GPU idle after stalls.")


def _ms(us: float | None) -> str:
    if us is None:
        return "-"
    return f"{us / 1e3:.1f} ms" if us < 1e6 else f"{us / 1e6:.2f} s"


def _num(x, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


_HEAD = ["rank", "trace", "launches", "steady", "stalls", "stall %", "window p50 us",
         "GPU idle p50 us", "GPU busy", "launches/s", "verdict"]


def _rows(results: list[TraceResult], agg: Aggregate) -> list[list[str]]:
    rows = []
    for r in results:
        name = Path(r.path).name
        if not r.ok:
            rows.append([r.label, name, "-", "-", "-", "-", "-", "-", "-", "-",
                         f"error: {r.error}"])
            continue
        s = r.summary
        rows.append([r.label, name, str(s.launches), str(s.steady_launches), str(r.stalled),
                     f"{r.stall_share:.1%}", _num(s.window_us.p50), _num(s.gpu_gap_us.p50),
                     _num(s.gpu_busy, "{:.1%}"), _num(s.launches_per_s),
                     s.verdict.split(":")[0]])
    rows.append(["all", f"{agg.analysed} of {agg.traces} traces", str(agg.launches),
                 str(agg.steady_launches), str(sum(agg.stalls.values())),
                 f"{agg.stall_share:.1%}", _num(agg.window_p50_us), _num(agg.gpu_idle_p50_us),
                 _num(agg.gpu_busy_mean, "{:.1%}") + " mean",
                 _num(agg.launches_per_s_mean) + " mean",
                 "OVERLAP BROKEN somewhere" if any(r.ok and not r.summary.overlap_ok
                                                  for r in results) else
                 ("overlap ok" if agg.analysed else "")])
    return rows


def render_text(results: list[TraceResult], agg: Aggregate, how: str = "") -> str:
    rows = _rows(results, agg)
    widths = [max(len(_HEAD[j]), *(len(r[j]) for r in rows)) for j in range(len(_HEAD) - 1)]
    right = {0, 2, 3, 4, 5, 6, 7, 8, 9}

    def fmt(cells: list[str]) -> str:
        out = [c.rjust(widths[j]) if j in right else c.ljust(widths[j])
               for j, c in enumerate(cells[:-1])]
        return "  ".join(out + [cells[-1]]).rstrip()

    lines = [f"nsysscope report: {agg.traces} traces{how}", "", fmt(_HEAD),
             fmt(["-" * w for w in widths] + ["-" * 7])]
    lines += [fmt(r) for r in rows[:-1]]
    lines += [fmt(["-" * w for w in widths] + ["-" * 7]), fmt(rows[-1]), "", worst_line(agg)]
    if agg.failed:
        lines.append(f"{agg.failed} trace(s) could not be analysed (see their rows).")
    return "\n".join(lines) + "\n"


def render_markdown(results: list[TraceResult], agg: Aggregate, how: str = "") -> str:
    rows = _rows(results, agg)
    esc = lambda c: c.replace("|", "\\|")  # noqa: E731
    lines = [f"## nsysscope report: {agg.traces} traces{how}", "",
             "| " + " | ".join(_HEAD) + " |", "|" + "---|" * len(_HEAD)]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows[:-1]]
    lines += ["| " + " | ".join(f"**{esc(c)}**" for c in rows[-1]) + " |", "",
              worst_line(agg), ""]
    return "\n".join(lines)


def render_json(results: list[TraceResult], agg: Aggregate) -> str:
    traces = []
    for r in results:
        d = {"path": r.path, "rank": r.rank, "seconds": r.seconds}
        if r.ok:
            d.update(stall_share=round(r.stall_share, 4), lost_us=round(r.lost_us, 1),
                     summary=r.summary.to_dict())
        else:
            d.update(error=r.error, exit_code=r.exit_code)
        traces.append(d)
    w = agg.worst
    out = {"schema": "nsysscope.many/1", "traces": traces, "aggregate": {
        k: v for k, v in agg.__dict__.items() if k != "worst"} | {
        "worst": None if w is None else {"path": w.path, "rank": w.rank,
                                         "stall_share": round(w.stall_share, 4),
                                         "lost_us": round(w.lost_us, 1)},
        "worst_line": worst_line(agg)}}
    return json.dumps(out, indent=2) + "\n"


def report(specs: Iterable[str], fmt: str = "text", jobs: int | None = None,
           scheduler: str | None = None, config=None, nsys: str | None = None
           ) -> tuple[str, int]:
    """Expand, analyse and render; returns the text and the exit code (0 when every trace
    was analysed, else the first failed trace's code)."""
    paths = expand(specs)
    if not paths:
        raise UnreadableInput("no traces given")
    if fmt not in ("text", "json", "markdown"):
        raise UnreadableInput(f"--format {fmt} shows one trace; for many traces use text, "
                              "json or markdown")
    t0 = time.perf_counter()
    if scheduler:
        results = run_dask(paths, scheduler, config, nsys)
        how = f" on the Dask cluster at {scheduler}"
    else:
        results = run_local(paths, jobs, config, nsys)
        from .trace.load import cpu_count
        n = max(1, min(jobs or cpu_count(), len(paths)))
        how = f" ({n} worker process{'es' if n > 1 else ''})" if n > 1 else ""
    how += f", {time.perf_counter() - t0:.1f} s"
    agg = aggregate(results)
    text = {"text": lambda: render_text(results, agg, how),
            "markdown": lambda: render_markdown(results, agg, how),
            "json": lambda: render_json(results, agg)}[fmt]()
    failed = [r for r in results if not r.ok]
    return text, (failed[0].exit_code if failed else 0)


if __name__ == "__main__":  # python -m nsysscope.many TRACES...
    out, code = report(sys.argv[1:])
    sys.stdout.write(out)
    sys.exit(code)
