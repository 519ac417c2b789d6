"""glibc's allocator kept from returning a pass's memory to the kernel between batches.

A pass allocates arrays of the same few sizes for every batch. With glibc's default thresholds a
freed block above 128 KiB (rising with use, to at most 32 MiB) goes back to the kernel, so every
batch page-faults its temporaries afresh: measured, that cost the library ~0.9 s of system time per
pass on a 21M-token dump, 1.35× the command line, which set the thresholds at start-up. The pass
therefore raises both thresholds while it runs (:func:`reused_memory`): blocks up to 1 GiB come
from the heap, and freed memory stays there for the next batch; memory stays bounded by the
largest batch.

In someone else's process (the Python API, a Ray worker) the setting should not outlive the pass.
glibc has no call that reads the thresholds back, so at the end of the outermost pass they are set
to the values glibc's own dynamic rule reaches in any process that has freed a 32 MiB block
(mmap threshold 32 MiB, trim threshold 64 MiB), and ``malloc_trim(0)`` returns what the pass freed
to the kernel. Where glibc is absent (macOS, musl) this is a no-op.
"""

from __future__ import annotations

import ctypes
from contextlib import AbstractContextManager
from typing import Any

from rcdiag.run.held import Undo, WhilePassesRun

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
"""glibc's mallopt parameters (malloc.h)."""
DURING_PASS = {M_MMAP_THRESHOLD: 1 << 30, M_TRIM_THRESHOLD: (1 << 31) - 1}
AFTER_PASS = {M_MMAP_THRESHOLD: 32 << 20, M_TRIM_THRESHOLD: 64 << 20}
"""glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems, and twice it (its dynamic rule)."""

_for_process = False
_libc: Any = None


def _glibc() -> Any:
    """glibc, or None where the C library is another one."""
    global _libc
    if _libc is None:
        try:
            libc = ctypes.CDLL("libc.so.6")
            _libc = libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else False
        except OSError:
            _libc = False
    return _libc or None


def keep_freed_memory() -> None:
    """Set the pass's thresholds for the rest of the process: the command line, which exits after
    its work, calls this at start-up; passes then leave the thresholds as they are."""
    global _for_process
    _for_process = True
    _set(DURING_PASS)


def _set(thresholds: dict[int, int]) -> None:
    libc = _glibc()
    if libc is not None:
        for parameter, value in thresholds.items():
            libc.mallopt(parameter, value)


def _hold() -> Undo | None:
    """The pass's thresholds, and how to set them back (None: the command line, or not glibc)."""
    libc = _glibc()
    if libc is None or _for_process:
        return None
    _set(DURING_PASS)

    def undo() -> None:
        _set(AFTER_PASS)
        libc.malloc_trim(0)

    return undo


PASSES = WhilePassesRun(_hold)


def reused_memory() -> AbstractContextManager[None]:
    """Freed memory is reused between batches while the block runs; at the end of the outermost
    block (passes may nest or run in threads) the thresholds are lowered again and the freed
    memory returned to the kernel."""
    return PASSES.held()
