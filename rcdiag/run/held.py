"""A process-wide setting held while passes run: applied when the first pass starts and undone when
the last one ends (passes may nest, or run at once on several threads of one process).

The pass sets two such things for itself in someone else's process (the Python API, a Ray
worker): glibc's allocator thresholds (:mod:`rcdiag.run.allocator`) and OpenBLAS's thread count
(:mod:`rcdiag.run.blas`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Undo = Callable[[], None]


class WhilePassesRun:
    """Holds a setting while any pass runs.

    Args:
        apply: applies the setting and returns how to undo it, or None when there is nothing to
            undo (nothing was changed).

    Example:
        >>> log = []
        >>> setting = WhilePassesRun(lambda: log.append("set") or (lambda: log.append("undone")))
        >>> with setting.held(), setting.held():
        ...     log.append("pass")
        >>> log
        ['set', 'pass', 'undone']
    """

    def __init__(self, apply: Callable[[], Undo | None]) -> None:
        self._apply = apply
        self._lock = threading.Lock()
        self._depth = 0
        self._undo: Undo | None = None

    @contextmanager
    def held(self) -> Iterator[None]:
        """The setting applies while the block runs, and after it while another block does."""
        with self._lock:
            self._depth += 1
            if self._depth == 1:
                self._undo = self._apply()
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0 and self._undo is not None:
                    undo, self._undo = self._undo, None
                    undo()
