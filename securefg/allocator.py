"""Keep freed large buffers in the process instead of handing them back to the kernel.

A protected FedSage+ step seals, sends and opens megabyte-sized generated batches M(M-1) times,
and every such buffer is a fresh allocation. glibc serves blocks above its mmap threshold (at
most 32 MB, adapting) with a new ``mmap`` and unmaps them on free, and it trims the heap top
above 128 KB; so each fresh buffer is paid again in page faults and kernel zeroing. Measured on
a short FedSage+ run (Cora, 20 owners, docs/performance.md): a third of the CPU time was system
time, and four million minor faults. Raising the thresholds lets freed blocks be reused.

The setting is process-wide, so the library never changes it on import: the ``securefg``
command applies it at start (:func:`keep_large_buffers`), and an embedding application may call
it itself. ``SECUREFG_ALLOCATOR=system`` leaves glibc's defaults. On a C library other than glibc
(macOS, musl) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

#: mallopt parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3

#: Blocks below this come from the heap and are reused after free.
MMAP_THRESHOLD = 1 << 30
#: Free memory at the heap's top kept before it is returned to the kernel.
TRIM_THRESHOLD = 1 << 31
#: Extra memory asked for whenever the heap grows, so it grows in fewer, larger steps.
TOP_PAD = 1 << 26

#: Environment variable: ``system`` keeps the C library's defaults.
ENV = "SECUREFG_ALLOCATOR"


def keep_large_buffers() -> bool:
    """Raise glibc's mmap and trim thresholds for this process; True when they were set.

    False (nothing changed) when ``SECUREFG_ALLOCATOR=system`` or the C library is not glibc.
    """
    if os.environ.get(ENV, "").strip().lower() == "system":
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018 -- present only in glibc
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return all(mallopt(param, value) == 1 for param, value in (
        (_M_MMAP_THRESHOLD, MMAP_THRESHOLD), (_M_TRIM_THRESHOLD, TRIM_THRESHOLD), (_M_TOP_PAD, TOP_PAD)))
