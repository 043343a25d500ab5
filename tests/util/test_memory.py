"""Freed memory goes back to the OS (``nsysscope.util.memory``): arrays freed inside the heap
(as the windows' rows are when joined) stay with the process until
:func:`release_free_pages` hands their pages back."""

from __future__ import annotations

import ctypes.util
import sys

import numpy as np
import pytest

from nsysscope.util.memory import release_free_pages, return_freed_memory

glibc = pytest.mark.skipif(not sys.platform.startswith("linux") or
                           "libc.so" not in (ctypes.util.find_library("c") or ""),
                           reason="glibc's malloc_trim")


def resident_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6


@glibc
def test_arrays_freed_inside_the_heap_are_handed_back():
    assert return_freed_memory()
    # 200 MB of 32 KB arrays (below the mapping threshold: from the heap), each followed by
    # a small object that stays, so that no freed stretch is at the heap's top
    kept, arrays = [], []
    for _ in range(6400):
        arrays.append(np.ones(4096))
        kept.append(np.ones(2))
    before = resident_mb()
    del arrays
    freed = resident_mb()
    assert freed > before - 50  # still the process's: holes in the heap
    assert release_free_pages()
    assert resident_mb() < freed - 150  # handed back: most of the 200 MB
    assert len(kept) == 6400
