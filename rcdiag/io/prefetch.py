"""Reading ahead on a background thread: the next batch is decoded while the current one is
computed on."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def prefetch(items: Iterable[T], depth: int = 2) -> Iterator[T]:
    """Iterate ``items`` on a background thread, ``depth`` items ahead.

    Parquet decoding and the numpy work release the GIL, so reading the next batch overlaps the
    computation on the current one. Exceptions are re-raised in the consumer.
    """
    done = object()
    slots: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                slots.put(item)
            slots.put(done)
        except BaseException as exc:  # handed to the consumer
            slots.put(exc)

    worker = threading.Thread(target=produce, daemon=True)
    worker.start()
    try:
        while True:
            item = slots.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        while worker.is_alive():
            try:
                slots.get_nowait()
            except queue.Empty:
                worker.join(timeout=0.05)
