"""Everything device-specific the loop needs, behind one small interface.

The overlap loop talks to a ``Backend`` for streams and their events, CUDA graphs, pinned
staging memory and NVTX ranges. ``CudaBackend`` is the real thing; ``CpuBackend`` runs the same
loop on a CPU-only torch (no graphs, no pinned memory, no NVTX, a no-op stand-in for side
streams), so CI can test the engine's logic and record the order of its phases.

With ``annotate = True`` (``--torch-profile``) every phase is also a
``torch.profiler.record_function`` range of the same name. ``Waiter`` is how the host waits on
an event: ``sync`` (``event.synchronize()``), ``poll`` (a tight ``event.query()`` loop) or
``poll-async`` (``await asyncio.sleep(0)`` between queries, on one persistent event loop).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Callable, Iterator, Protocol

import torch


class Event(Protocol):
    def record(self, stream: Any = None) -> None: ...
    def synchronize(self) -> None: ...
    def query(self) -> bool: ...


class Backend(Protocol):
    device: torch.device
    dtype: torch.dtype

    annotate: bool
    nvtx: bool
    check_replays: bool

    def phase(self, name: str) -> contextlib.AbstractContextManager: ...
    def event(self, timing: bool = False) -> Event: ...
    def stream(self) -> Any: ...
    def current_stream(self) -> Any: ...
    def use_stream(self, stream: Any) -> contextlib.AbstractContextManager: ...
    def host_buffer(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor: ...
    def capture(self, fn: Callable[[], None]) -> Callable[[], None]: ...
    def release_graphs(self) -> None: ...
    def elapsed_ms(self, start: Event, end: Event) -> float: ...
    def synchronize(self) -> None: ...


def _record_function(name: str) -> contextlib.AbstractContextManager:
    return torch.profiler.record_function(name)


class CudaBackend:
    """CUDA: graphs replayed on the current stream, pinned staging, NVTX phase ranges."""

    def __init__(self, dtype: torch.dtype = torch.bfloat16, index: int | None = None) -> None:
        if index is not None:
            torch.cuda.set_device(index)
        self.device = torch.device("cuda", torch.cuda.current_device() if index is None else index)
        self.dtype = dtype
        self.annotate = False
        self.nvtx = True  # --no-nvtx: no NVTX ranges (as most servers run)
        self.check_replays = False  # --startup-check: replay and sync each graph once captured
        self._pool = None
        self._graphs: list[torch.cuda.CUDAGraph] = []

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if self.nvtx:
            torch.cuda.nvtx.range_push(name)
        try:
            if self.annotate:
                with _record_function(name):
                    yield
            else:
                yield
        finally:
            if self.nvtx:
                torch.cuda.nvtx.range_pop()

    def event(self, timing: bool = False) -> Event:
        return torch.cuda.Event(enable_timing=timing)

    def stream(self) -> Any:
        return torch.cuda.Stream(self.device)

    def current_stream(self) -> Any:
        return torch.cuda.current_stream(self.device)

    def use_stream(self, stream: Any) -> contextlib.AbstractContextManager:
        return torch.cuda.stream(stream)

    def host_buffer(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return torch.zeros(shape, dtype=dtype, pin_memory=True)

    def capture(self, fn: Callable[[], None]) -> Callable[[], None]:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):  # warm up allocator and kernels outside the graph
                fn()
        torch.cuda.current_stream().wait_stream(side)
        # no work may be in flight when a capture starts: with NCCL, the process group's
        # watchdog still polls the warm-up collectives' events
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            fn()
        self._pool = graph.pool()
        self._graphs.append(graph)
        if self.check_replays:  # a server's check of the new graph: replay it, wait for it
            graph.replay()
            torch.cuda.synchronize()
        return graph.replay

    def release_graphs(self) -> None:
        """Free every captured graph. A live graph holding NCCL work makes
        ``destroy_process_group()`` hang, so this must run before it."""
        torch.cuda.synchronize()
        for graph in self._graphs:
            graph.reset()
        self._graphs.clear()
        self._pool = None
        torch.cuda.synchronize()

    def elapsed_ms(self, start: Event, end: Event) -> float:
        return start.elapsed_time(end)  # type: ignore[attr-defined]

    def synchronize(self) -> None:
        torch.cuda.synchronize()


class _CpuEvent:
    """Work on the CPU is done when it returns, so an event is only a time stamp."""

    def __init__(self) -> None:
        self.t = 0.0

    def record(self, stream: Any = None) -> None:
        import time
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True


class _CpuStream:
    """Side-stream stand-in: the CPU runs everything in order, so waits are no-ops."""

    def wait_stream(self, other: Any) -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass


class CpuBackend:
    """CPU stand-in: eager calls instead of graphs, plain memory, phases recorded in a list."""

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        self.device = torch.device("cpu")
        self.dtype = dtype
        self.annotate = False
        self.nvtx = True
        self.check_replays = False
        self.phases: list[str] = []
        self.captured = 0  # graphs "captured" (each a plain call here)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.phases.append(name)
        if self.annotate:
            with _record_function(name):
                yield
        else:
            yield

    def event(self, timing: bool = False) -> Event:
        return _CpuEvent()

    def stream(self) -> Any:
        return _CpuStream()

    def current_stream(self) -> Any:
        return _CpuStream()

    def use_stream(self, stream: Any) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def host_buffer(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return torch.zeros(shape, dtype=dtype)

    def capture(self, fn: Callable[[], None]) -> Callable[[], None]:
        self.captured += 1
        if self.check_replays:
            self.phases.append("check_replay")
            fn()
        return fn

    def release_graphs(self) -> None:
        pass

    def elapsed_ms(self, start: Event, end: Event) -> float:
        return (end.t - start.t) * 1e3  # type: ignore[attr-defined]

    def synchronize(self) -> None:
        pass


class Waiter:
    """How the host waits until an event has completed (``--wait``)."""

    def __init__(self, how: str = "sync") -> None:
        self.how = how
        self._loop: asyncio.AbstractEventLoop | None = None  # one for the whole run

    def wait(self, event: Event) -> None:
        if self.how == "sync":
            event.synchronize()
        elif self.how == "poll":
            while not event.query():
                pass
        else:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self._poll(event))

    @staticmethod
    async def _poll(event: Event) -> None:
        while not event.query():
            await asyncio.sleep(0)

    def close(self) -> None:
        if self._loop is not None:
            self._loop.close()
            self._loop = None


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``cpu``."""
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("engine_under_test: --device cuda asked, but torch has no CUDA device")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def make_backend(device: str, index: int | None = None) -> Backend:
    """``cuda`` when asked and available (on GPU ``index``), else the CPU stand-in."""
    if resolve_device(device) == "cuda":
        return CudaBackend(index=index)
    return CpuBackend()
