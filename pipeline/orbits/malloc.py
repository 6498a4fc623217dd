"""glibc's malloc told to keep freed memory for reuse: a process-wide setting, applied by the orbit experiment's
entry points (``python -m pipeline orbits [search]``, the search's dask workers, the sweep's workers), never by
the library functions they call.

A training step allocates and frees the same large tensors every epoch: the context penalty's (contexts, heads,
24, 24) intermediates are 7 MB for one seed and K times that for K seeds in ``batch.train_batch``. Under glibc's
defaults, blocks above the mmap threshold (at most 32 MB) are mmap'ed and unmapped on every free, and the heap's
top is trimmed, so each epoch faults the same memory in again page by page and the kernel zeroes it: on one core
this was a third of a single seed's step and more than half of a step of 32 seeds (``docs/orbits_search.md``, "CPU
throughput"). With mmap off (M_MMAP_MAX 0) and trimming off (M_TRIM_THRESHOLD -1), freed blocks stay in the heap
and the next epoch reuses them. The process keeps its peak memory until it ends; nothing else changes (the same
operations on the same values, so the results are bit-equal).

Why the entry points: the setting holds for the whole process and every library in it, so only code that owns the
process may choose it (a notebook or a test calling ``train`` keeps its own malloc). The profiles pipeline does not
set it: a profile task may run in a user's dask worker, whose memory policy is dask's
(``pipeline.profile.span.span_work``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

_STATE: list[str] = []  # what keep_freed_memory did in this process (set once)
M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # glibc's malloc.h


def keep_freed_memory() -> str:
    """Have glibc keep freed memory for reuse instead of handing it back to the kernel (once per process; module
    docstring). Returns ``"kept"``, or ``"unavailable"`` where the C library is not glibc (macOS, musl)."""
    if _STATE:
        return _STATE[0]
    state = "unavailable"
    if sys.platform.startswith("linux"):
        try:
            mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
        except (OSError, AttributeError):
            mallopt = None
        if mallopt is not None and mallopt(M_MMAP_MAX, 0) == 1 and mallopt(M_TRIM_THRESHOLD, -1) == 1:
            state = "kept"
    _STATE.append(state)
    return state
