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
    reading = (dump.columns, dump.drop_nonfinite, dump.selection, dump.input_format)
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


def _combined(request: Request, parts: list[FilePass]) -> FilePass:
    """The consumers and counts of several consecutive files, merged in file order."""
    consumers = Consumers.for_request(request)
    for part in parts:
        consumers.merge(part.consumers)
    return FilePass(
        consumers,
        sum(p.rows_read for p in parts),
        sum(p.dropped_nonfinite for p in parts),
        sum(p.positive_log_probs for p in parts),
        next((p.first_positive for p in parts if p.first_positive), None),
    )


def chunked(keys: list[str]) -> list[list[int]]:
    """The files' positions cut into runs that end where a key's last hex digit is 0 (about 16
    files each): the cuts depend on the files' own keys only, so a file added anywhere changes
    one run, and every other run's merged entry is used again.

    Example:
        >>> chunked(["a1", "b0", "c3", "d4", "e0", "f5"])
        [[0, 1], [2, 3, 4], [5]]
    """
    runs: list[list[int]] = [[]]
    for index, key in enumerate(keys):
        runs[-1].append(index)
        if key.endswith("0"):
            runs.append([])
    return [r for r in runs if r]


def run_cached(
    dump: DumpSpec, request: Request, cache: Path, progress: Progress | None = None
) -> Pass:
    """The pass of :func:`rcdiag.run.engine.run`, each file's consumers taken from ``cache`` when
    there and put there when computed (module docstring). The files are merged in runs of about
    16 (:func:`chunked`), each run's merge cached too, so a warm pass over 1,000 files loads and
    merges about 70 entries.

    Raises:
        InputError: an unreadable file (the reader's error, as without a cache).
    """
    cache.mkdir(parents=True, exist_ok=True)
    reader = dump.reader(request.profile_top_k is not None)  # footers only: paths and rows
    local = replace(dump, engine="local", cache=None)
    fingerprint = _fingerprint(dump, request)
    positional = request.bootstrap is not None or request.profile_top_k is not None
    offsets, offset = [], 0
    for dump_file in reader.files:
        offsets.append(offset)
        offset += dump_file.rows
    keys = [
        entry_key(fingerprint, f.path, at, positional)
        for f, at in zip(reader.files, offsets, strict=True)
    ]
    stats = CacheStats()

    def file_part(index: int) -> FilePass:
        key = keys[index]
        entry = None if key is None else cache / f"{key}{ENTRY_SUFFIX}"
        part = None if entry is None else _load(entry)
        if part is None:
            path = str(reader.files[index].path)
            part = file_pass(local, request, path, offsets[index])
            stats.misses += 1
            if entry is not None:
                _store(entry, part)
        else:
            stats.hits += 1
        return part

    if any(k is None for k in keys):  # remote files: no identity, nothing to cache
        runs = [[i] for i in range(len(keys))]
    else:
        runs = chunked([k for k in keys if k is not None])
    parts, total = [], offset
    for run in runs:
        members = [keys[i] or "" for i in run]
        merged_key = hashlib.sha256("|".join(["run", *members]).encode()).hexdigest()
        entry = cache / f"{merged_key}{ENTRY_SUFFIX}"
        part = _load(entry) if all(members) else None
        if part is None:
            part = _combined(request, [file_part(i) for i in run])
            if all(members):
                _store(entry, part)
        else:
            stats.hits += len(run)
        parts.append(part)
        if progress is not None:
            progress(offsets[run[-1]] + reader.files[run[-1]].rows, total)
    LAST.hits, LAST.misses = stats.hits, stats.misses
    whole = _combined(request, parts)
    reader.rows_read += whole.rows_read
    reader.dropped_nonfinite += whole.dropped_nonfinite
    reader.positive_log_probs += whole.positive_log_probs
    reader.first_positive = reader.first_positive or whole.first_positive
    return whole.consumers.finish(dump, reader)
