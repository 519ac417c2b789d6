"""Incremental passes: each file's finished consumers kept in a cache directory, so that a dump
that grows (one shard per training step) is read again only where it changed (``--cache DIR``;
docs/scale.md, "A growing run").

A pass with a cache reads each file into its own consumers, as a Ray task does
(:func:`rcdiag.run.ray.file_pass`), and merges them in file order; a file whose consumers are in the
cache is not read at all (its footer is, for the list of files). The key of a file's entry is a
SHA-256 of everything its consumers depend on: rcdiag's version and a digest of its code (two
builds of one version may lay out their consumers differently), the file's resolved path, size and
modification time (nanoseconds), how the dump is read (columns, non-finite policy, step selection),
what the pass computes (the request), and, when the pass draws bootstrap weights or ranks
sequences (both use each row's position in the whole dump), the number of rows before the file. A
changed file, option, version or code is a new key; nothing stale is ever read. A warm pass equals a
cold pass with the same cache setting exactly, and a pass without a cache up to the order of
floating-point additions (as the Ray engine, docs/scale.md).

The entries are Python pickles that rcdiag writes and reads back: a cache directory is to be
trusted like the code that reads it (only ever one rcdiag wrote), which is why caching is asked
for explicitly. Entries are written atomically; an unreadable entry is computed again.
"""

from __future__ import annotations

import functools
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
    """What the last cached pass did: files taken from the cache, files read, and cache entries
    loaded (a merged entry stands for many files)."""

    hits: int = 0
    misses: int = 0
    loaded: int = 0


LAST = CacheStats()
"""The counts of the latest cached pass of this process (for ``rcdiag watch`` and the tests)."""


def _fingerprint(dump: DumpSpec, request: Request) -> str:
    """What every file's consumers depend on besides the file itself (addresses of objects that
    a repr shows are left out: they change from process to process)."""
    reading = (dump.columns, dump.drop_nonfinite, dump.selection, dump.input_format)
    return _ADDRESS.sub("", f"{__version__}|{code_digest()}|{reading!r}|{request!r}")


@functools.cache
def code_digest() -> str:
    """SHA-256 of rcdiag's Python sources (their paths and bytes; ~20 ms, once per
    process): a cache entry pickled by other code is never loaded, even of the same version."""
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for source in sorted(package.rglob("*.py")):
        digest.update(source.relative_to(package).as_posix().encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()


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
    """The positions of ``keys`` cut into runs that end where a key's last hex digit is 0 (about
    16 each): the cuts depend on the keys only, so a key added anywhere changes one run, and every
    other run's merged entry is used again.

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


@dataclass(frozen=True)
class Node:
    """A file (``members`` empty: ``index`` is its position) or a run of nodes merged in order;
    ``key`` names its cache entry (None: not cached, a remote file or a run holding one)."""

    key: str | None
    index: int = -1
    members: tuple[Node, ...] = ()


def merge_tree(keys: list[str | None]) -> Node:
    """The order in which the files' consumers are merged: runs of about 16 files
    (:func:`chunked`), runs of about 16 of those runs, and so on up to one root. Every node's key
    is a SHA-256 of its members' keys, so the tree depends on the files alone: a file added or
    changed anywhere changes about one node per level, and a warm pass loads the other members of
    the changed nodes (a few dozen entries for 1,000 files: three levels) instead of every
    file's. With remote files (no identity) the files are merged one by one at the root, and
    nothing merged is cached."""
    files = [Node(key, index) for index, key in enumerate(keys)]
    if not files or any(key is None for key in keys):
        return Node(None, members=tuple(files))
    level = files
    while len(level) > 1:
        runs = chunked([n.key or "" for n in level])
        if len(runs) == len(level):  # no key cut the level short: merge it at once
            runs = [list(range(len(level)))]
        level = [_run([level[i] for i in run]) for run in runs]
    return level[0] if level[0].members else _run(level)


def _run(members: list[Node]) -> Node:
    text = "|".join(["run", *(m.key or "" for m in members)])
    return Node(hashlib.sha256(text.encode()).hexdigest(), members=tuple(members))


def run_cached(
    dump: DumpSpec, request: Request, cache: Path, progress: Progress | None = None
) -> Pass:
    """The pass of :func:`rcdiag.run.engine.run`, each file's consumers taken from ``cache`` when
    there and put there when computed (module docstring). The files are merged as
    :func:`merge_tree` says, each merged node but the root cached too, so a warm pass over 1,000
    files with one new file loads a few dozen entries.

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
    stats, total = CacheStats(), offset

    def files_in(node: Node) -> int:
        return 1 if not node.members else sum(files_in(m) for m in node.members)

    def last_file(node: Node) -> int:
        return node.index if not node.members else last_file(node.members[-1])

    def part_of(node: Node) -> FilePass:
        entry = None if node.key is None else cache / f"{node.key}{ENTRY_SUFFIX}"
        part = None if entry is None else _load(entry)
        if part is not None:
            stats.hits += files_in(node)
            stats.loaded += 1
        else:
            if node.members:
                part = _combined(request, [part_of(m) for m in node.members])
            else:
                path, at = str(reader.files[node.index].path), offsets[node.index]
                part = file_pass(local, request, path, at)
                stats.misses += 1
            if entry is not None:
                _store(entry, part)
        if progress is not None:
            end = last_file(node)
            progress(offsets[end] + reader.files[end].rows, total)
        return part

    root = merge_tree(keys)  # the root itself is not cached: a grown dump changes it each time
    whole = _combined(request, [part_of(m) for m in root.members])
    LAST.hits, LAST.misses, LAST.loaded = stats.hits, stats.misses, stats.loaded
    reader.rows_read += whole.rows_read
    reader.dropped_nonfinite += whole.dropped_nonfinite
    reader.positive_log_probs += whole.positive_log_probs
    reader.first_positive = reader.first_positive or whole.first_positive
    return whole.consumers.finish(dump, reader)
