"""One BLAS thread while a pass runs, in the library as on the command line.

A pass already keeps two cores busy (the reader and two sets of consumers,
:mod:`rcdiag.run.workers`). The matrix products it makes are small (the bootstrap's, a few
milliseconds per batch), and a BLAS library that runs them on several threads leaves those threads
spinning against the pass's own: measured on a 50M-token dump on two cores, ``rcdiag.baseline()``
took 2.50 s with numpy's default (one BLAS thread per core) against 1.70 s with one, and
``rcdiag.report()`` 3.6 s against 2.6 s. The command line asks for one BLAS thread before numpy
loads (``rcdiag._threads``); the library is imported into someone else's process.

So, like the allocator's thresholds (:mod:`rcdiag.run.allocator`), the setting is the pass's only
while it runs: the outermost pass (passes may nest or run in threads) asks OpenBLAS, as numpy's
wheels ship it, for one thread and gives the count it found back at its end. OpenBLAS's thread
count is the process's (even its ``…_local`` setter sets it for every thread), so for that
while the process's other BLAS products run on one thread too. Where OpenBLAS is not loaded
(another BLAS library, or a platform without ``/proc/self/maps``) nothing is changed.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import NamedTuple

from rcdiag.run.held import Undo, WhilePassesRun

_PREFIXES = ("", "scipy_")
_SUFFIXES = ("", "64_")
"""How OpenBLAS builds name their functions: ``openblas_get_num_threads`` plain, or with
numpy's wheels' symbol prefix and suffix (``scipy_openblas_get_num_threads64_``)."""


class _ThreadCount(NamedTuple):
    get: Callable[[], int]
    set: Callable[[int], None]


@functools.cache
def _openblas() -> _ThreadCount | None:
    """OpenBLAS's thread-count getter and setter, when OpenBLAS is loaded in this process."""
    for path in _loaded_openblas():
        try:
            library = ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 0) | os.RTLD_LOCAL)
        except OSError:  # not loaded (RTLD_NOLOAD loads nothing new)
            continue
        for prefix in _PREFIXES:
            for suffix in _SUFFIXES:
                get = getattr(library, f"{prefix}openblas_get_num_threads{suffix}", None)
                put = getattr(library, f"{prefix}openblas_set_num_threads{suffix}", None)
                if get is not None and put is not None:
                    get.argtypes, get.restype = [], ctypes.c_int
                    put.argtypes, put.restype = [ctypes.c_int], None
                    return _ThreadCount(get, put)
    return None


def _loaded_openblas() -> list[str]:
    """Paths of the OpenBLAS libraries numpy may have loaded: those its wheels ship beside it
    (a directory listing), else every OpenBLAS mapped into this process (``/proc/self/maps``,
    ~10 ms to read in a process of many libraries)."""
    import numpy

    shipped = Path(numpy.__file__).parent.parent / "numpy.libs"
    beside = sorted(str(p) for p in shipped.glob("*openblas*")) if shipped.is_dir() else []
    if beside:
        return beside
    try:
        lines = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return []
    return sorted({line.split()[-1] for line in lines if "openblas" in line.lower()})


def _hold() -> Undo | None:
    """One OpenBLAS thread, and how to give the process its count back (None: OpenBLAS is not
    loaded, or runs on one thread already)."""
    openblas = _openblas()
    if openblas is None:
        return None
    before = openblas.get()
    if before == 1:
        return None
    openblas.set(1)
    return lambda: openblas.set(before)


PASSES = WhilePassesRun(_hold)


def one_blas_thread() -> AbstractContextManager[None]:
    """OpenBLAS runs its products on the calling thread while the outermost such block runs; its
    thread count is restored at that block's end (a no-op where OpenBLAS is not loaded)."""
    return PASSES.held()
