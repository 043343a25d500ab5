"""Continuous batching: requests wait in a queue, take the lowest free slot, and leave it
when the host learns they finished. Every occupied slot still owing tokens runs every step."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .workload import Request


@dataclass(frozen=True)
class Row:
    """One batch row of a launched step: which request it fed, and whether it yields a token."""

    slot: int
    request: Request
    emits: bool


class Scheduler:
    def __init__(self, slots: int, graph_batch_sizes: tuple[int, ...]) -> None:
        self._slots: list[Request | None] = [None] * slots
        self.batch_sizes = tuple(sorted(s for s in graph_batch_sizes if s <= slots))
        if not self.batch_sizes or self.batch_sizes[-1] != slots:
            self.batch_sizes += (slots,)
        self.waiting: deque[Request] = deque()

    def admit(self, arrivals: list[Request]) -> None:
        self.waiting.extend(arrivals)
        for i, occupant in enumerate(self._slots):
            if not self.waiting:
                break
            if occupant is None:
                self._slots[i] = self.waiting.popleft()

    def release_finished(self) -> None:
        self._slots = [r if r is not None and not r.done else None for r in self._slots]

    def next_batch(self) -> list[Row]:
        """Rows for the next step: every occupied slot whose request still owes tokens."""
        rows = []
        for slot, req in enumerate(self._slots):
            if req is None or req.done or req.planned_outputs >= req.max_new_tokens:
                continue
            rows.append(Row(slot, req, emits=req.fed >= len(req.prompt) - 1))
        return rows

    def padded_size(self, rows: list[Row]) -> int:
        """The smallest captured batch size that holds the highest used slot."""
        need = rows[-1].slot + 1 if rows else 1
        return next(s for s in self.batch_sizes if s >= need)

    def compact(self) -> list[tuple[int, int]]:
        """Keep the running requests in the lowest slots (``--buckets``): each free slot below
        an occupied one takes the highest occupied slot's request. Returns the moves
        ``(from, to)``; the runner moves their KV cache rows and last tokens on the device."""
        moves = []
        for free in range(len(self._slots)):
            if self._slots[free] is not None:
                continue
            top = max((i for i, r in enumerate(self._slots) if r is not None), default=-1)
            if top <= free:
                break
            self._slots[free], self._slots[top] = self._slots[top], None
            moves.append((top, free))
        return moves

    @property
    def running(self) -> int:
        """Occupied slots (requests admitted and not yet released)."""
        return sum(r is not None for r in self._slots)
