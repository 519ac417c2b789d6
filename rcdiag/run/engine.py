"""The one place a pass over a dump is started: here (the local read loop) or on a Ray cluster
(:mod:`rcdiag.run.ray`), as the dump's ``engine`` asks."""

from __future__ import annotations

from rcdiag.io.prefetch import prefetch
from rcdiag.io.reader import BATCH_TOKENS, DumpReader
from rcdiag.run.allocator import reused_memory
from rcdiag.run.blas import one_blas_thread
from rcdiag.run.consumers import Consumers, Pass, Request
from rcdiag.run.dump import DumpSpec, Progress
from rcdiag.run.workers import consumer_threads, feed


def stream(
    dump: DumpSpec,
    consumers: list[Consumers],
    progress: Progress | None,
    row_details: bool = False,
    batch_tokens: int = BATCH_TOKENS,
) -> DumpReader:
    """Read the dump once in batches of about ``batch_tokens`` tokens, dealing them in turn to
    ``consumers`` (each set on its own thread, :mod:`rcdiag.run.workers`); returns the exhausted
    reader. ``progress(rows_read, total_rows)`` is called once before the first batch (a bar
    shows the total at once) and after each batch: per batch, never per row."""
    reader = dump.reader(row_details, batch_tokens=batch_tokens)
    total = reader.total_rows
    if progress is not None:
        progress(0, total)

    def after_each() -> None:
        if progress is not None:
            progress(reader.rows_read, total)

    feed(prefetch(reader.batches()), [c.update for c in consumers], after_each)
    return reader


def run(dump: DumpSpec, request: Request | None = None, progress: Progress | None = None) -> Pass:
    """Read ``dump`` once for the analysis and every consumer ``request`` asks for, here or on a
    Ray cluster (``dump.engine``).

    Raises:
        InputError: unreadable input (the reader's errors, naming file, row, step and column).
    """
    request = request or Request()
    if dump.engine == "ray":
        from rcdiag.run.ray import run_on_ray

        return run_on_ray(dump, request, progress)
    if dump.cache is not None:
        from rcdiag.run.cache import run_cached

        with reused_memory(), one_blas_thread():
            return run_cached(dump, request, dump.cache, progress)
    # freed batches reused and BLAS on one thread, in the API and Ray tasks too (allocator.py, blas.py)
    with reused_memory(), one_blas_thread():
        threads = consumer_threads(request.analysis_only)
        parts = [Consumers.for_request(request) for _ in range(threads)]
        row_details = request.profile_top_k is not None
        reader = stream(dump, parts, progress, row_details, batch_tokens(request, threads))
        consumers = parts[0]
        for part in parts[1:]:  # in the order batches were dealt: the same sums on every run
            consumers.merge(part)
        return consumers.finish(dump, reader)


def batch_tokens(request: Request, threads: int) -> int:
    """Tokens per batch: :data:`~rcdiag.io.reader.BATCH_TOKENS`, halved when two sets of
    consumers that compute other frameworks' metrics or modes run at once. Those hold the most
    per token: in full batches the pass peaked at 1.05 GB and fresh memory's page faults cost
    more than the calls smaller batches add (halved: 605 MB and 27% faster, docs/scale.md),
    while verl's comparison alone is 10% slower in batches of half the size."""
    return BATCH_TOKENS // 2 if threads > 1 and request.other_frameworks else BATCH_TOKENS
