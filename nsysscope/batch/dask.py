"""Analyse many traces on a Dask distributed cluster (``--scheduler``): each worker runs what
a local worker runs (:func:`.run.analyze_part`) and sends its result back."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..analysis import AnalysisConfig
from ..errors import UnreadableInput
from ..model import TraceResult, registry
from ..util.progress import progress
from .expand import rank_of
from .one import Done, analyze_part, part_of

#: how long to wait for a Dask scheduler that accepts connections but does not answer
CONNECT_TIMEOUT_S = 10.0


def _probe(address: str, timeout: float = 3.0) -> None:
    """Fail in seconds, with one line, when nothing listens at a ``tcp://host:port`` address
    (Dask itself retries for its whole timeout)."""
    import socket
    from urllib.parse import urlsplit
    if "://" not in address:
        address = "tcp://" + address
    u = urlsplit(address)
    if u.scheme not in ("tcp", "tls") or not u.hostname:
        return  # inproc://, ucx://...: left to Dask
    try:
        port = u.port or 8786
    except ValueError:
        raise UnreadableInput(f"--scheduler {address}: not a host:port address") from None
    try:
        with socket.create_connection((u.hostname, port), timeout=timeout):
            pass
    except OSError as e:
        why = "timed out" if isinstance(e, TimeoutError) else (e.strerror or str(e))
        raise UnreadableInput(f"--scheduler {address}: cannot reach the Dask scheduler "
                              f"({u.hostname}:{port}: {why})") from None


def run_dask(paths: list[Path], address: str, config: AnalysisConfig | None = None,
             nsys: str | None = None, client: Any = None,
             parts: list[str] | None = None) -> list[TraceResult]:
    """Analyse ``paths`` on the Dask distributed cluster at ``address`` (the workers must
    see the same files). ``client``: an existing ``dask.distributed.Client`` instead."""
    return [r for r, _ in run_dask_parts(paths, address, config, nsys, client, parts)]


def run_dask_parts(paths: list[Path], address: str, config: AnalysisConfig | None = None,
              nsys: str | None = None, client: Any = None, parts: list[str] | None = None,
              job: bool | None = False) -> list[Done]:
    """:func:`run_dask`, each trace's part of a job too (:func:`analyze_part`)."""
    try:
        from dask.distributed import Client
        from dask.distributed import as_completed as dask_completed
    except ImportError as e:
        raise UnreadableInput(f"--scheduler needs dask.distributed ({e}): "
                              "pip install 'nsysscope[dask]'") from None
    own = client is None
    if own:
        _probe(address)
        try:
            client = Client(address, timeout=f"{CONNECT_TIMEOUT_S:g}s")
        except (OSError, TimeoutError) as e:
            raise UnreadableInput(f"--scheduler {address}: cannot reach the Dask scheduler "
                                  f"({' '.join(str(e).split())})") from None
        except Exception as e:  # noqa: BLE001 - something listens there, but not Dask
            raise UnreadableInput(f"--scheduler {address}: something answers there, but not "
                                  f"like a Dask scheduler ({type(e).__name__})") from None
    try:
        names = [os.path.abspath(p) for p in paths]  # not resolved: a symlink's name is its rank
        futures = client.map(_analyze_on_dask, names,
                             [part_of(parts, i) for i in range(len(names))],
                             [str(p) for p in paths], config=config, nsys=nsys, job=job,
                             words=registry.registered_words(), pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        results: dict[int, Done] = {}
        with progress(f"analysing traces on {address}", total=len(paths)) as bar:
            for f in dask_completed(futures):
                r, part = f.result()
                r.path = str(paths[index[f.key]])
                r.rank = rank_of(r.path, len(r.summary.processes) if r.summary else 1)
                results[index[f.key]] = (r, part)
                bar.advance()
        return [results[i] for i in range(len(paths))]
    finally:
        if own:
            client.close()


def _analyze_on_dask(path: str, part: str | None, label: str,
                     config: AnalysisConfig | None = None, nsys: str | None = None,
                     job: bool | None = False, words: registry.Words | None = None) -> Done:
    """:func:`analyze_part` on a Dask worker, which says results' sentences with the words
    of the process that sent the work (a trace's row of ``--db`` is written there)."""
    if words is not None:
        registry.register_words(words)
    return analyze_part(path, config, nsys, part, label, job)
