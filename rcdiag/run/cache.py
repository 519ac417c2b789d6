"""Incremental passes: each file's finished consumers kept in a cache directory, so that a dump
that grows (one shard per training step) is read again only where it changed (``--cache DIR``;
docs/scale.md, "A growing run").

A pass with a cache reads each file into its own consumers, as a Ray task does
(:func:`rcdiag.run.ray.file_pass`), and merges them in file order; a file whose consumers are in the
cache is not read at all (its footer is, for the list of files). The key of a file's entry is a
SHA-256 of everything its consumers depend on: rcdiag's version, the file's resolved path, size and
modification time (nanoseconds), how the dump is read (columns, non-finite policy, step selection),
what the pass computes (the request), and, when the pass draws bootstrap weights or ranks
sequences (both use each row's position in the whole dump), the number of rows before the file. A
changed file, option or version is a new key; nothing stale is ever read. A warm pass equals a
cold pass with the same cache setting exactly, and a pass without a cache up to the order of
floating-point additions (as the Ray engine, docs/scale.md).

The entries are Python pickles that rcdiag writes and reads back: a cache directory is to be
trusted like the code that reads it (only ever one rcdiag wrote), which is why caching is asked
for explicitly. Entries are written atomically; an unreadable entry is computed again.
"""

from __future__ import annotations

import hashlib
import pickle
import re
from dataclasses import dataclass, replace
from pathlib import Path

from rcdiag.io.files import DumpPath
from rcdiag.io.remote import is_remote
from rcdiag.io.writer import atomic_write
from rcdiag.run.consumers import Consumers, Pass, Request
from rcdiag.run.dump import DumpSpec, Progress
from rcdiag.run.ray import FilePass, file_pass
from rcdiag.version import __version__

ENTRY_SUFFIX = ".rcdiag-pass"
"""The file name ending of a cache entry."""
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


@dataclass
class CacheStats:
    """What the last cached pass did: files taken from the cache and files read."""

    hits: int = 0
    misses: int = 0


LAST = CacheStats()
"""The counts of the latest cached pass of this process (for ``rcdiag watch`` and the tests)."""


def _fingerprint(dump: DumpSpec, request: Request) -> str:
    """What every file's consumers depend on besides the file itself (addresses of objects that
    a repr shows are left out: they change from process to process)."""
    reading = (dump.columns, dump.drop_nonfinite, dump.selection)
    return _ADDRESS.sub("", f"{__version__}|{reading!r}|{request!r}")


def entry_key(fingerprint: str, path: DumpPath, offset: int, positional: bool) -> str | None:
    """The cache key of one file (module docstring); None for a remote file (no identity)."""
    if not isinstance(path, Path) or is_remote(path):
        return None
    resolved = path.resolve()
    stat = resolved.stat()
    where = f"|{offset}" if positional else ""
    text = f"{fingerprint}|{resolved}|{stat.st_size}|{stat.st_mtime_ns}{where}"
    return hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()


def _load(entry: Path) -> FilePass | None:
    try:
        with entry.open("rb") as handle:
            part = pickle.load(handle)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None
    return part if isinstance(part, FilePass) else None


def _store(entry: Path, part: FilePass) -> None:
    with atomic_write(entry, "wb") as handle:
        pickle.dump(part, handle, protocol=pickle.HIGHEST_PROTOCOL)


def run_cached(
    dump: DumpSpec, request: Request, cache: Path, progress: Progress | None = None
) -> Pass:
    """The pass of :func:`rcdiag.run.engine.run`, each file's consumers taken from ``cache`` when
    there and put there when computed (module docstring).

    Raises:
        InputError: an unreadable file (the reader's error, as without a cache).
    """
    cache.mkdir(parents=True, exist_ok=True)
    reader = dump.reader(request.profile_top_k is not None)  # footers only: paths and rows
    local = replace(dump, engine="local", cache=None)
    fingerprint = _fingerprint(dump, request)
    positional = request.bootstrap is not None or request.profile_top_k is not None
    stats = CacheStats()
    parts: list[FilePass] = []
    offset, total, done = 0, reader.total_rows, 0
    for dump_file in reader.files:
        key = entry_key(fingerprint, dump_file.path, offset, positional)
        entry = None if key is None else cache / f"{key}{ENTRY_SUFFIX}"
        part = None if entry is None else _load(entry)
        if part is None:
            part = file_pass(local, request, str(dump_file.path), offset)
            stats.misses += 1
            if entry is not None:
                _store(entry, part)
        else:
            stats.hits += 1
        parts.append(part)
        offset += dump_file.rows
        done += dump_file.rows
        if progress is not None:
            progress(done, total)
    LAST.hits, LAST.misses = stats.hits, stats.misses
    consumers = Consumers.for_request(request)
    for part in parts:  # in file order, as the Ray engine merges
        consumers.merge(part.consumers)
        reader.rows_read += part.rows_read
        reader.dropped_nonfinite += part.dropped_nonfinite
        reader.positive_log_probs += part.positive_log_probs
        reader.first_positive = reader.first_positive or part.first_positive
    return consumers.finish(dump, reader)
