"""Consumers fed on two threads: batches dealt in turn to two sets of consumers, merged after.

A pass has three parts that run at once: the reader (its own thread, :mod:`rcdiag.io.prefetch`) and
the consumers of alternate batches, one set on the calling thread and one on a worker thread. The
numpy work releases the interpreter lock, so with the preset comparison, the profile, the
bootstrap or other frameworks' metrics, whose work per batch outweighs the read, both cores
compute (docs/scale.md, "Threads").

Batch k goes to set k mod 2 whatever the timing, and the sets are merged in that order, so a pass
gives the same numbers on every run; they are those of one set fed every batch up to the order of
floating-point sums, as with the Ray engine's workers.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterable, Sequence

from rcdiag.metrics.ragged import RaggedBatch

_DONE = None
"""Tells the worker thread that no batch follows."""


def consumer_threads(analysis_only: bool) -> int:
    """Sets of consumers a pass feeds: two where the process may use two cores or more and the
    pass computes more than the analysis (alone, it costs about what the read does: one set on
    one core keeps up with the reader on the other, and a second set only adds contention)."""
    if analysis_only:
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return 2 if cores >= 2 else 1


def feed(
    batches: Iterable[RaggedBatch],
    consumers: Sequence[Callable[[RaggedBatch], None]],
    after_each: Callable[[], None] | None = None,
) -> None:
    """Hand batch k to ``consumers[k % len(consumers)]``: the first on this thread, a second one
    (if given) on a worker thread, one batch ahead at most. ``after_each()`` runs after each batch
    is handed on. An exception on either thread is raised here once both have stopped."""
    if len(consumers) > 2:
        raise ValueError("feed() runs at most two sets of consumers")
    if len(consumers) == 1:
        for batch in batches:
            consumers[0](batch)
            if after_each is not None:
                after_each()
        return
    handoff: queue.Queue[RaggedBatch | None] = queue.Queue(maxsize=1)
    failures: list[BaseException] = []

    def work() -> None:
        while (batch := handoff.get()) is not _DONE:
            if not failures:  # after a failure, batches are drained so that the feeder never blocks
                try:
                    consumers[1](batch)
                except BaseException as exc:  # raised by the feeding thread
                    failures.append(exc)

    worker = threading.Thread(target=work, name="rcdiag-consumers", daemon=True)
    worker.start()
    try:
        for k, batch in enumerate(batches):
            if failures:
                break
            if k % 2:
                handoff.put(batch)
            else:
                consumers[0](batch)
            if after_each is not None:
                after_each()
    finally:
        handoff.put(_DONE)
        worker.join()
    if failures:
        raise failures[0]
