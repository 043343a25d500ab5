"""Give freed memory back to the operating system as soon as it is freed.

glibc serves an allocation of 128 KiB or more with a mapping of its own, returned to the OS
when freed; but each time such a block is freed it raises that threshold (up to 32 MiB), so
later arrays of a few MiB come from the heap, where freed memory stays with the process. An
analysis that frees one time window's arrays before making the next's would then grow by
every window it has freed. A fixed threshold keeps the peak at what is alive
(:func:`return_freed_memory`).

A fixed threshold is not all: an array still comes from the heap where a freed stretch of it
is large enough, and the heap gives pages back only from its top. The windows' rows (one
window's columns, a few hundred KB each) are freed as they are joined into the whole trace's
columns (several MB each, mapped anew): at 10^6 launches the join grew the process by
170 MB it had freed. :func:`release_free_pages` hands such stretches back (glibc's
``malloc_trim``, ~2 ms on a 1 GB process).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import cache
from typing import Any

#: mallopt's parameter for the threshold (glibc's malloc.h), and the threshold: 64 KiB
_M_MMAP_THRESHOLD = -3
_THRESHOLD = 64 * 1024


@cache
def _glibc() -> Any:
    """The C library where it is glibc (it has ``mallopt`` and ``malloc_trim``), else None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.mallopt, libc.malloc_trim  # noqa: B018 - glibc has both
    except (OSError, AttributeError, TypeError):
        return None
    return libc


def return_freed_memory() -> bool:
    """Fix glibc's threshold (module doc); False where the C library is not glibc."""
    libc = _glibc()
    return libc is not None and bool(libc.mallopt(_M_MMAP_THRESHOLD, _THRESHOLD))


def release_free_pages() -> bool:
    """Hand the heap's free pages back to the OS (module doc); False where the C library is
    not glibc, or it had none to give."""
    libc = _glibc()
    return libc is not None and bool(libc.malloc_trim(0))
