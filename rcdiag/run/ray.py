"""The Ray engine: one pass over a dump, its files spread over a Ray cluster (docs/scale.md).

The driver lists the dump's files exactly as the local engine does (sorted paths, footers read for
the row counts) and gives each file to a Ray task with the number of rows before it. Each task reads
its file with the local reader and feeds the same :class:`~rcdiag.run.consumers.Consumers` the local
engine uses; the driver merges the returned consumers in file order. Every statistic is a sum, an
extreme, a moment or a count per step, so the merged result is the local one up to the order of
floating-point additions (docs/scale.md, "Identical results"); rows keep their position in the whole
dump (``stream_rows``), so the bootstrap's weights and the profile's ties do not depend on the
split.

Ray is imported only here, and only when ``--engine ray`` is asked for (``pip install
'rcdiag[ray]'``). A task that fails on a corrupt file raises the reader's own one-line error; a
worker lost mid-run is retried by Ray (the task is a pure function of its file).
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rcdiag.errors import InputError, UsageError
from rcdiag.io.prefetch import prefetch
from rcdiag.run.allocator import reused_memory
from rcdiag.run.blas import one_blas_thread
from rcdiag.run.consumers import Consumers, Pass, Request
from rcdiag.run.dump import DumpSpec, Progress

TASK_RETRIES = 3
"""How often Ray runs a file's task again after its worker died (not after an input error)."""

KILL_ONCE_VARIABLE = "RCDIAG_TEST_KILL_WORKER_ONCE"
"""Fault injection for the tests: when set to a path that does not exist yet, the first task to
see it creates it and kills its own worker, so that Ray's retry is exercised."""


@dataclass
class FilePass:
    """What a task returns: the consumers of one file and the reader's counts."""

    consumers: Consumers
    rows_read: int
    dropped_nonfinite: int
    positive_log_probs: int
    first_positive: str | None


def file_pass(dump: DumpSpec, request: Request, path: str, stream_offset: int) -> FilePass:
    """Read one file of ``dump`` (whose rows start at ``stream_offset`` in the whole dump) into
    fresh consumers: the work of one Ray task, also callable without Ray."""
    _maybe_die_for_a_test()
    consumers = Consumers.for_request(request)
    reader = dump.reader(consumers.profile is not None, [path], stream_offset)
    with reused_memory(), one_blas_thread():
        for batch in prefetch(reader.batches()):
            consumers.update(batch)
    return FilePass(
        consumers,
        reader.rows_read,
        reader.dropped_nonfinite,
        reader.positive_log_probs,
        reader.first_positive,
    )


def _maybe_die_for_a_test() -> None:
    marker = os.environ.get(KILL_ONCE_VARIABLE)
    if marker:
        try:
            Path(marker).touch(exist_ok=False)
        except FileExistsError:
            return
        os._exit(1)  # the worker dies as a lost node would; Ray retries the task elsewhere


def run_on_ray(dump: DumpSpec, request: Request, progress: Progress | None = None) -> Pass:
    """The pass of :func:`rcdiag.run.engine.run` with the dump's files read by Ray tasks.

    Raises:
        UsageError: Ray is not installed, or the cluster cannot be reached.
        InputError: an unreadable file (the reader's error, as the local engine gives it).
    """
    ray = _import_ray()
    reader = dump.reader(request.profile_top_k is not None)  # footers only: paths and rows
    local = replace(dump, engine="local")
    started = _connect(ray, dump.ray_address)
    try:
        task = ray.remote(max_retries=TASK_RETRIES)(file_pass)
        dump_ref, request_ref = ray.put(local), ray.put(request)  # sent once, not once per file
        futures: dict[Any, int] = {}
        offset = 0
        for index, dump_file in enumerate(reader.files):
            futures[task.remote(dump_ref, request_ref, str(dump_file.path), offset)] = index
            offset += dump_file.rows
        parts: list[FilePass | None] = [None] * len(reader.files)
        total, done_rows = reader.total_rows, 0
        pending = list(futures)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            part = _result(ray, ready[0])
            parts[futures[ready[0]]] = part
            done_rows += part.rows_read
            if progress is not None:
                progress(done_rows, total)
    finally:
        if started:
            ray.shutdown()
    consumers = Consumers.for_request(request)
    for maybe in parts:  # in file order: the same additions whatever finished first
        assert maybe is not None
        part = maybe
        consumers.merge(part.consumers)
        reader.rows_read += part.rows_read
        reader.dropped_nonfinite += part.dropped_nonfinite
        reader.positive_log_probs += part.positive_log_probs
        reader.first_positive = reader.first_positive or part.first_positive
    return consumers.finish(dump, reader)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError(
            "--engine ray needs Ray: pip install 'rcdiag[ray]' (or use the local engine)"
        ) from None
    return ray


def _connect(ray: Any, address: str | None) -> bool:
    """Join the cluster at ``address`` (else ``RAY_ADDRESS``, else start a local one); returns
    whether this call started Ray (and so must stop it)."""
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address is not None:
        _check_reachable(address)
    try:
        ray.init(
            address=address,
            include_dashboard=False,
            log_to_driver=False,  # the tasks print nothing worth a user's screen
            logging_level=logging.ERROR,
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = address or "a local Ray"
        raise UsageError(f"--engine ray: cannot start or reach {where} ({exc})") from None
    return True


CONNECT_SECONDS = 5.0
"""How long to wait for a cluster's port to answer before giving up (Ray itself retries for
minutes, printing warnings)."""


def _check_reachable(address: str) -> None:
    """Refuse at once a ``host:port`` (or ``ray://host:port``) where nothing listens; other forms
    (``auto``, ``local``) are left to Ray."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_SECONDS).close()
    except OSError as exc:
        raise UsageError(
            f"--ray-address {address}: no Ray cluster answers there ({exc.strerror or exc})"
        ) from None


def _result(ray: Any, ref: Any) -> FilePass:
    """A task's result, its input error raised as the local engine raises it."""
    try:
        part: FilePass = ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, (InputError, UsageError)):
            raise cause from None
        raise
    return part
