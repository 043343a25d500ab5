"""Everything device-specific the loop needs, behind one small interface.

The overlap loop talks to a ``Backend`` for streams' events, CUDA graphs, pinned staging
memory and NVTX ranges. ``CudaBackend`` is the real thing; ``CpuBackend`` runs the same loop on
a CPU-only torch (no graphs, no pinned memory, no NVTX), so CI can test the engine's logic and
record the order of its phases.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator, Protocol

import torch


class Event(Protocol):
    def record(self) -> None: ...
    def synchronize(self) -> None: ...


class Backend(Protocol):
    device: torch.device
    dtype: torch.dtype

    def phase(self, name: str) -> contextlib.AbstractContextManager: ...
    def event(self, timing: bool = False) -> Event: ...
    def host_buffer(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor: ...
    def capture(self, fn: Callable[[], None]) -> Callable[[], None]: ...
    def elapsed_ms(self, start: Event, end: Event) -> float: ...
    def synchronize(self) -> None: ...


class CudaBackend:
    """CUDA: graphs replayed on the current stream, pinned staging, NVTX phase ranges."""

    def __init__(self, dtype: torch.dtype = torch.bfloat16) -> None:
        self.device = torch.device("cuda")
        self.dtype = dtype
        self._pool = None

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        torch.cuda.nvtx.range_push(name)
        try:
            yield
        finally:
            torch.cuda.nvtx.range_pop()

    def event(self, timing: bool = False) -> Event:
        return torch.cuda.Event(enable_timing=timing)

    def host_buffer(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return torch.zeros(shape, dtype=dtype, pin_memory=True)

    def capture(self, fn: Callable[[], None]) -> Callable[[], None]:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):  # warm up allocator and kernels outside the graph
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            fn()
        self._pool = graph.pool()
        return graph.replay

    def elapsed_ms(self, start: Event, end: Event) -> float:
        return start.elapsed_time(end)  # type: ignore[attr-defined]

    def synchronize(self) -> None:
        torch.cuda.synchronize()


class _CpuEvent:
    """Work on the CPU is done when it returns, so an event is only a time stamp."""

    def __init__(self) -> None:
        self.t = 0.0

    def record(self) -> None:
        import time
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        pass


class CpuBackend:
    """CPU stand-in: eager calls instead of graphs, plain memory, phases recorded in a list."""

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        self.device = torch.device("cpu")
        self.dtype = dtype
        self.phases: list[str] = []

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.phases.append(name)
        yield

    def event(self, timing: bool = False) -> Event:
        return _CpuEvent()

    def host_buffer(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return torch.zeros(shape, dtype=dtype)

    def capture(self, fn: Callable[[], None]) -> Callable[[], None]:
        return fn

    def elapsed_ms(self, start: Event, end: Event) -> float:
        return (end.t - start.t) * 1e3  # type: ignore[attr-defined]

    def synchronize(self) -> None:
        pass


def make_backend(device: str) -> Backend:
    """``cuda`` when asked and available, else the CPU stand-in."""
    if device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("engine_under_test: --device cuda asked, but torch has no CUDA device")
        return CudaBackend()
    if device == "auto":
        return CudaBackend() if torch.cuda.is_available() else CpuBackend()
    return CpuBackend()
