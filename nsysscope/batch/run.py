"""Analyse many traces: in local worker processes, or on a Dask distributed cluster.

Each worker runs what ``nsysscope report TRACE`` runs
(:func:`~nsysscope.analysis.pipeline.analyze_file`: a long trace in windows) and sends back a
:class:`~nsysscope.model.TraceResult`: the summary plus the steady-state per-launch overlap
windows and GPU idle gaps, so the aggregate percentiles are exact over all launches of all
traces. A trace that cannot be analysed gets its error in its result; the others are still
analysed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pandas as pd

from ..analysis import Analysis, AnalysisConfig
from ..analysis.config import config_of
from ..analysis.job import analyze_job, pairs_up
from ..errors import UnreadableInput
from ..export.db import append_parts, write_db
from ..model import BatchResult, TraceResult, registry
from ..trace.arrays import cpu_count
from ..util.progress import progress
from .aggregate import aggregate
from .dask import run_dask_parts
from .expand import expand, rank_of
from .one import Done, analyze_part, part_of


@contextlib.contextmanager
def _parts_beside(db: str | None, n: int) -> Iterator[list[str] | None]:
    """``n`` part file names in a temporary folder beside ``db`` (a Dask worker sees it when
    it sees the traces' folder), removed afterwards."""
    if not db:
        yield None
        return
    folder = Path(db).resolve().parent
    if not folder.is_dir():
        raise UnreadableInput(f"--per-launch {db}: no such folder '{Path(db).parent}'")
    try:
        tmp = tempfile.mkdtemp(prefix=f".{Path(db).name}.", suffix=".parts", dir=folder)
    except OSError as e:
        raise UnreadableInput(f"--per-launch {db}: cannot write there: "
                              f"{e.strerror or e}") from None
    try:
        yield [os.path.join(tmp, f"{i:06d}.db") for i in range(n)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


#: whether this worker process is analysing a trace (:func:`_analyse_in_worker`), and
#: whether it is already stopping (:func:`_stop_worker`)
_busy = _stopping = False
#: seconds a worker stopped mid-trace has for its clean-up before it leaves regardless
STOP_GRACE_S = 5.0


def worker_args(jobs: int) -> tuple[int, bool, str, registry.Words | None]:
    """What :func:`init_worker` gives each of ``jobs`` workers from this process: its share
    of the CPUs, whether Ctrl-C stops it, how this process's pandas holds text (a worker
    starts a fresh interpreter: the command line's Python strings, ``cli/app.py``, would be
    pandas' default there), and the words that say results' sentences (a trace's row of
    ``--db`` is written in the worker)."""
    return (max(1, cpu_count() // jobs), signal.getsignal(signal.SIGINT) is not signal.SIG_IGN,
            pd.get_option("mode.string_storage"), registry.registered_words())


def init_worker(threads: int, interruptible: bool, string_storage: str,
                words: registry.Words | None = None) -> None:
    if words is not None:
        registry.register_words(words)
    os.environ["NSYSSCOPE_THREADS"] = str(threads)
    os.environ["NSYSSCOPE_PROGRESS"] = "0"
    pd.set_option("mode.string_storage", string_storage)
    if interruptible:  # Ctrl-C reaches the terminal's whole group; a run started with it
        # ignored (`nohup`, a background job of a script) keeps its workers going too
        signal.signal(signal.SIGINT, _stop_worker)
    signal.signal(signal.SIGTERM, _stop_worker)  # the parent stopping the batch
    # blocked in the fork server, which the worker was forked from (_start_fork_server)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _stop_worker(signum: int, frame: object) -> None:
    """Ctrl-C or SIGTERM in a worker: a trace being analysed stops through its clean-up (a
    half-written cache file is removed: :func:`_analyse_in_worker`), an idle worker at once;
    either way the worker leaves without a word (each printed a KeyboardInterrupt traceback;
    the parent says it was interrupted). A second signal (Ctrl-C, then the parent's
    SIGTERM) is ignored: it would cut that clean-up short."""
    global _stopping
    if _stopping:
        return
    _stopping = True
    if _busy:
        # the clean-up's deadline: an interrupt that lands where the analysis turns it into
        # something else, or between two lines of the clean-up, must not leave a worker
        # waiting for work the parent will never send (the batch then never ended)
        deadline = threading.Timer(STOP_GRACE_S, os._exit, args=(130,))
        deadline.daemon = True
        deadline.start()
        raise KeyboardInterrupt
    os._exit(130)


def _analyse_in_worker(path: str, config: AnalysisConfig | None, nsys: str | None,
                       part: str | None, job: bool | None = False) -> Done:
    global _busy
    _busy = True
    try:
        return analyze_part(path, config, nsys, part, job=job)
    except KeyboardInterrupt:  # its clean-up done on the way here: leave, not wait for work
        os._exit(130)
    finally:
        _busy = False
        if _stopping:  # stopped, though the analysis ended otherwise (an interrupted read
            # can end as the trace's error): leave all the same
            os._exit(130)


def workers_for(paths: list[Path], jobs: int | None) -> int:
    """Local worker processes for ``paths``: ``jobs`` (default one per CPU), at most one per
    trace."""
    return max(1, min(jobs or cpu_count(), len(paths)))


def run_local(paths: list[Path], jobs: int | None = None, config: AnalysisConfig | None = None,
              nsys: str | None = None, parts: list[str] | None = None,
              owns_process: bool = False) -> list[TraceResult]:
    """Analyse ``paths`` in ``jobs`` worker processes (default: one per CPU, at most one per
    trace). ``jobs=1`` runs them one after the other in this process. ``owns_process``: this
    process is the ``nsysscope`` program, which may start multiprocessing's fork server, a
    process-wide one, ignoring Ctrl-C (:func:`_start_fork_server`)."""
    return [r for r, _ in _run_local(paths, jobs, config, nsys, parts, owns_process)]


def _run_local(paths: list[Path], jobs: int | None = None,
               config: AnalysisConfig | None = None, nsys: str | None = None,
               parts: list[str] | None = None, owns_process: bool = False,
               job: bool | None = False) -> list[Done]:
    """:func:`run_local`, each trace's part of a job too (:func:`analyze_part`)."""
    jobs = workers_for(paths, jobs)
    results: dict[int, Done] = {}
    with progress("analysing traces", total=len(paths)) as bar:
        if jobs == 1:
            for i, p in enumerate(paths):
                results[i] = analyze_part(str(p), config, nsys, part_of(parts, i), job=job)
                bar.advance()
        else:
            import multiprocessing as mp
            method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
            ctx = mp.get_context(method)
            if method == "forkserver":
                ctx.set_forkserver_preload(["nsysscope.batch", "nsysscope.analysis",
                                            "nsysscope.trace"])
                if owns_process:
                    _start_fork_server()
            with ProcessPoolExecutor(jobs, mp_context=ctx, initializer=init_worker,
                                     initargs=worker_args(jobs)) as pool:
                try:
                    with _signals_held(signal.SIGINT, signal.SIGTERM):
                        futures = {pool.submit(_analyse_in_worker, str(p), config, nsys,
                                               part_of(parts, i), job): i
                                   for i, p in enumerate(paths)}
                    for f in as_completed(futures):
                        i = futures[f]
                        try:
                            results[i] = f.result()
                        except BrokenProcessPool:  # a worker was killed: the traces it and
                            # the others had not finished say so; those done keep their rows
                            results[i] = (TraceResult(
                                path=str(paths[i]), rank=rank_of(paths[i]), exit_code=70,
                                error="a worker process died before this trace was done (out "
                                      "of memory, or killed); analyse it alone (-j 1) to see "
                                      "why"), None)
                        bar.advance()
                except BaseException:  # Ctrl-C, SIGTERM: stop the batch, not finish it first
                    _stop_pool(pool)
                    raise
    return [results[i] for i in range(len(paths))]


def _start_fork_server() -> None:
    """Start multiprocessing's fork server with Ctrl-C blocked, which it inherits (a process
    started from this thread keeps its signal mask, across ``exec`` too): it imports its
    preload modules, a second, before it protects itself from Ctrl-C, and a Ctrl-C then
    printed its traceback; blocked, it waits until the server ignores it. The workers it
    forks inherit the block, until :func:`init_worker` lifts it, so do any other pool's in
    this process: so only the program does this, never a library user's Python. This
    process keeps its handler: a Ctrl-C meanwhile is taken by another thread, or held until
    the block is lifted here (the server was started with Ctrl-C ignored, and one that came
    then was lost: the batch ran to its end)."""
    from multiprocessing import forkserver, resource_tracker

    if threading.current_thread() is not threading.main_thread():  # signals: main thread's
        forkserver.ensure_running()
        return
    # the resource tracker first: starting it unblocks Ctrl-C (it blocks it for its own start)
    resource_tracker.ensure_running()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        forkserver.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a Ctrl-C held meanwhile: now


@contextlib.contextmanager
def _signals_held(*signals: signal.Signals) -> Iterator[None]:
    """``signals`` held back while the pool's workers start, then delivered: one that came
    while a worker was being started left that worker unknown to the pool, so not stopped,
    and it printed a traceback once the pool's semaphores were gone. (Signals are handled by
    the main thread only: from any other, nothing is held.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    # an ignored signal stays ignored: a worker started meanwhile inherits that (spawn)
    before = {sig: signal.signal(sig, lambda signum, _: held.append(signum)) for sig in signals
              if signal.getsignal(sig) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        if held:
            signal.raise_signal(held[0])


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """Stop the workers (:func:`_stop_worker`) and cancel the traces not started: leaving the
    pool otherwise waits for every queued trace to be analysed."""
    workers = list((getattr(pool, "_processes", None) or {}).values())  # public in 3.14 only
    for worker in workers:
        with contextlib.suppress(OSError, ValueError):
            worker.terminate()
    pool.shutdown(wait=False, cancel_futures=True)


def run_batch(specs: Iterable[str | Path], jobs: int | None = None, scheduler: str | None = None,
              config: AnalysisConfig | None = None, nsys: str | None = None,
              timed: bool = False, per_launch_db: str | None = None,
              owns_process: bool = False) -> BatchResult:
    """Expand ``specs`` (files, folders, globs), analyse every trace and aggregate them.
    ``timed`` keeps the wall times in what renderers write (off: the same traces give the
    same output). ``per_launch_db``: also add every trace's per-launch tables to this SQLite
    database (each worker writes its trace to a part file beside it; the parts are merged in
    the order of the traces, so the same traces give the same database). ``owns_process``:
    the caller is the ``nsysscope`` program, not a library user's Python
    (:func:`run_local`)."""
    return run_traces(specs, jobs, scheduler, config, nsys, timed, per_launch_db,
                      owns_process)[0]


def run_traces(specs: Iterable[str | Path], jobs: int | None = None,
               scheduler: str | None = None, config: AnalysisConfig | None = None,
               nsys: str | None = None, timed: bool = False, per_launch_db: str | None = None,
               owns_process: bool = False, job: bool | None = False,
               ) -> tuple[BatchResult, Analysis | None]:
    """:func:`run_batch`, and the traces analysed as one job of several files
    (:mod:`nsysscope.analysis.job`) where ``job`` says so: True, always (the traces that
    could be analysed); None, where their collectives pair up across the files; False,
    never. A job's per-launch database holds the job (its ranks' waits are the job's)."""
    paths = expand(specs)
    if not paths:
        raise UnreadableInput("no traces given")
    t0 = time.perf_counter()
    with _parts_beside(per_launch_db, len(paths)) as parts:
        if scheduler:
            done = run_dask_parts(paths, scheduler, config, nsys, parts=parts, job=job)
            workers = 1
        else:
            done = _run_local(paths, jobs, config, nsys, parts=parts,
                              owns_process=owns_process, job=job)
            workers = workers_for(paths, jobs)
        results = [r for r, _ in done]
        pieces = [p for _, p in done if p is not None]
        together = None
        if job or (job is None and pairs_up(pieces)):
            if len(pieces) < 2:
                raise UnreadableInput(f"--job: {len(pieces)} of {len(paths)} traces could be "
                                      "analysed; a job needs two or more")
            together = analyze_job(pieces, config_of(config))
        if per_launch_db and together is not None:
            write_db(per_launch_db, together, trace=together.trace.meta.path)
        elif per_launch_db and parts:
            append_parts(per_launch_db, parts)
    return BatchResult(traces=results, aggregate=aggregate(results), workers=workers,
                       scheduler=scheduler, seconds=round(time.perf_counter() - t0, 1),
                       timed=timed), together
