"""Give freed memory back to the operating system as soon as it is freed.

glibc serves an allocation of 128 KiB or more with a mapping of its own, returned to the OS
when freed; but each time such a block is freed it raises that threshold (up to 32 MiB), so
later arrays of a few MiB come from the heap, where freed memory stays with the process. An
analysis that frees one time window's arrays before making the next's would then grow by
every window it has freed. A fixed threshold keeps the peak at what is alive.
"""

from __future__ import annotations

import ctypes
import ctypes.util

#: mallopt's parameter for the threshold (glibc's malloc.h), and the threshold: 64 KiB
_M_MMAP_THRESHOLD = -3
_THRESHOLD = 64 * 1024


def return_freed_memory() -> bool:
    """Fix glibc's threshold (module doc); False where the C library is not glibc."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, _THRESHOLD))
    except (OSError, AttributeError, TypeError):
        return False
