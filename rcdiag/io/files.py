"""A dump's files: discovery (files, globs, directories, remote stores), the columns each role reads,
and opening a file's footer (docs: README.md, "The dump").

Every problem is raised as :class:`~rcdiag.errors.InputError` naming the file and the column.
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import glob
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rcdiag.errors import InputError, UsageError
from rcdiag.io.footer import mask_is_all_true, values_at_most
from rcdiag.io.native.names import companions, dump_files
from rcdiag.io.paths import file_kind
from rcdiag.io.remote import RemotePath, discover_remote, is_remote, local_path, remote_failure

DEFAULT_NAMES: dict[str, tuple[str, ...]] = {
    "rollout": ("rollout_log_probs", "rollout_log_prob"),
    "training": ("old_log_probs", "old_log_prob", "training_log_probs"),
    "mask": ("response_mask",),
    "step": ("step",),
    "uid": ("uid",),
    "lag": ("policy_lag",),
}
"""Column names tried in order for each role when the user names none (README.md)."""

POSITIVE_LOG_PROB = 0.01
"""A log-prob above this is no log-prob (logits, or a column holding something else): warned about."""

INT64_MIN, INT64_MAX = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)
"""Steps are 64-bit signed integers."""

_FLAG = {"rollout": "--rollout-col", "training": "--training-col", "mask": "--mask-col"}
_FLAG["step"] = "--step-col"
_FLAG["uid"] = "--uid-col"


@dataclass(frozen=True)
class ColumnNames:
    """User-chosen column names; ``None`` means the defaults and aliases of :data:`DEFAULT_NAMES`."""

    rollout: str | None = None
    training: str | None = None
    mask: str | None = None
    step: str | None = None


@dataclass(frozen=True)
class StepSelection:
    """Steps to keep: an explicit set and/or an inclusive range ``[start, stop]`` (open ends allowed).

    Example:
        >>> StepSelection.parse(steps="3:5").contains(np.array([2, 3, 5, 6]))
        array([False,  True,  True, False])
    """

    only: frozenset[int] = field(default_factory=frozenset)
    start: int | None = None
    stop: int | None = None

    @classmethod
    def parse(cls, step: Sequence[int] = (), steps: str | None = None) -> StepSelection:
        start = stop = None
        if steps is not None:
            match = re.fullmatch(r"\s*(-?\d*)\s*:\s*(-?\d*)\s*", steps)
            if not match:
                raise UsageError(
                    f"--steps {steps!r}: expected A:B (inclusive; A or B may be empty)"
                )
            start = int(match[1]) if match[1] else None
            stop = int(match[2]) if match[2] else None
            if start is not None and stop is not None and start > stop:
                raise UsageError(f"--steps {steps!r}: the first step is after the last one")
            if any(v is not None and not INT64_MIN <= v <= INT64_MAX for v in (start, stop)):
                raise UsageError(f"--steps {steps!r}: a step is a 64-bit signed integer")
        for value in step:
            if not INT64_MIN <= value <= INT64_MAX:
                raise UsageError(f"--step {value}: a step is a 64-bit signed integer")
        return cls(frozenset(step), start, stop)

    @property
    def is_everything(self) -> bool:
        return not self.only and self.start is None and self.stop is None

    def contains(self, steps: np.ndarray) -> np.ndarray:
        in_range = np.ones(steps.shape, dtype=bool)
        if self.start is not None:
            in_range &= steps >= self.start
        if self.stop is not None:
            in_range &= steps <= self.stop
        if self.only:
            listed = np.isin(steps, np.fromiter(self.only, dtype=np.int64))
            return listed | in_range if (self.start, self.stop) != (None, None) else listed
        return in_range


DumpPath = Path | RemotePath
"""A file of a dump: local, or remote (:class:`~rcdiag.io.remote.RemotePath`)."""


def discover(
    paths: Sequence[str | Path], storage_options: Mapping[str, Any] | None = None
) -> list[DumpPath]:
    """Expand files, globs and directories (recursively) into a sorted, de-duplicated file list;
    URLs (``s3://bucket/run/``) are listed through their file system, with ``storage_options``.
    """
    if not paths:
        raise UsageError("no input given: pass a parquet file, several, a glob or a directory")
    found: list[DumpPath] = []
    for given in paths:
        if is_remote(given):
            found.extend(discover_remote(str(given), storage_options))
            continue
        raw = local_path(given)
        path = Path(raw)
        if path.is_dir():
            inside = dump_files(path)  # parquet files, and the files of other trainers' dumps
            if not inside:
                raise InputError(
                    f"{path}: directory holds no parquet file (*.parquet, *.pq) and no other "
                    "trainer's dump rcdiag reads (docs/formats.md)"
                )
            found.extend(inside)
        elif path.is_file():
            found.append(path)
            found.extend(companions(path))  # the rest of a slime step named by one of its files
        elif file_kind(path) is not None:
            raise InputError(f"{path}: is {file_kind(path)}, not a parquet file")
        elif glob.has_magic(str(raw)):
            matches = sorted(Path(p) for p in glob.glob(str(raw), recursive=True))
            files = [p for p in matches if p.is_file()]
            if not files:
                raise InputError(f"{raw}: no file matches this pattern")
            found.extend(files)
        else:
            raise InputError(f"{path}: no such file or directory")
    # The same file named twice (a path and a glob, say) is read once, spelled as first given.
    seen: set[Path | str] = set()
    unique: list[DumpPath] = []
    for item in found:
        identity = item.url if isinstance(item, RemotePath) else item.resolve()
        if identity not in seen:
            seen.add(identity)
            unique.append(item)
    return unique


def _hive_step(path: DumpPath, step_column: str) -> int | None:
    """The step a ``STEP_COLUMN=N`` directory (the innermost one) gives the file, if any."""
    value = None
    for part in path.parent.parts:
        key, sep, raw = part.partition("=")
        if sep and key == step_column:
            if not re.fullmatch(r"[+-]?[0-9]+", raw) or not INT64_MIN <= int(raw) <= INT64_MAX:
                raise InputError(
                    f"{path}: partition directory {part!r} does not hold an integer step "
                    "(a 64-bit signed integer)"
                )
            value = int(raw)
    return value


def _resolve(schema: pa.Schema, path: DumpPath, role: str, chosen: str | None) -> str | None:
    """The column playing ``role`` in this file, or None for an optional role that is absent."""
    names = schema.names
    candidates = (chosen,) if chosen else DEFAULT_NAMES[role]
    for name in candidates:
        if name in names:
            return name
    if role in ("mask", "step", "uid", "lag") and chosen is None:
        return None
    wanted = " or ".join(repr(c) for c in candidates)
    # never suggest the column another role reads: comparing a column with itself shows no mismatch
    others = {n for r, aliases in DEFAULT_NAMES.items() if r != role for n in aliases}
    close = difflib.get_close_matches(
        candidates[0], [n for n in names if n not in others], n=1, cutoff=0.5
    )
    hint = f"; did you mean {close[0]!r} ({_FLAG[role]} {close[0]})?" if close else ""
    raise InputError(
        f"{path}: no column {wanted}; columns are: {', '.join(names) or '(none)'}{hint}"
    )


def row_of(offsets: np.ndarray, token: int) -> int:
    return int(np.searchsorted(offsets, token, side="right") - 1)


@dataclass
class FileColumns:
    rollout: str
    training: str
    mask: str | None
    step: str | None
    hive_step: int | None
    uid: str | None
    lag: str | None


@dataclass
class DumpFile:
    """One parquet file of a dump: its footer read and its columns resolved; the file itself is
    closed until :meth:`open` (a dump of thousands of files never holds thousands of handles)."""

    path: DumpPath
    metadata: pq.FileMetaData
    columns: FileColumns

    @property
    def rows(self) -> int:
        return int(self.metadata.num_rows)

    @contextlib.contextmanager
    def open(self) -> Iterator[pq.ParquetFile]:
        """The file opened again for scanning (its footer not read twice), closed on exit."""
        with _opened(self.path, self.metadata) as handle:
            yield handle

    def mask_is_all_true(self) -> bool:
        """Whether the footer proves the mask True at every position (:mod:`rcdiag.io.footer`):
        the reader then does not decode it."""
        mask = self.columns.mask
        if mask is None or mask in (self.columns.rollout, self.columns.training):
            return False
        values = (self.columns.rollout, self.columns.training)
        return mask_is_all_true(self.metadata, self.metadata.schema.to_arrow_schema(), mask, values)

    def log_probs_at_most(self, bound: float) -> bool:
        """Whether the footer shows both log-prob columns ≤ ``bound`` everywhere
        (:mod:`rcdiag.io.footer`)."""
        return values_at_most(self.metadata, (self.columns.rollout, self.columns.training), bound)

    def mean_row_length(self) -> float:
        meta = self.metadata
        leaf = f"{self.columns.rollout}."
        values = 0
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for c in range(group.num_columns):
                col = group.column(c)
                if col.path_in_schema.startswith(leaf):
                    values += col.num_values
        return values / max(1, meta.num_rows)


_ROLE_WORDS = {
    "rollout": "rollout log-probs",
    "training": "training log-probs",
    "mask": "response mask",
    "step": "step",
}


def _check_distinct(columns: FileColumns, names: ColumnNames, path: DumpPath) -> None:
    """Each role reads its own column: a log-prob column compared with itself would show no
    mismatch at all, a mask equal to a log-prob column would mask by the log-probs."""
    seen: dict[str, str] = {}
    for role in _ROLE_WORDS:
        name = getattr(columns, role)
        if name is None:
            continue
        if name in seen:
            first = seen[name]
            given = [f"{_FLAG[r]} {name}" for r in (first, role) if getattr(names, r) is not None]
            flags = f" ({', '.join(given)})" if given else ""
            raise InputError(
                f"{path}: column {name!r} would be read as both the {_ROLE_WORDS[first]} and the "
                f"{_ROLE_WORDS[role]}{flags}; each needs its own column"
            )
        seen[name] = role


def _source(path: Path) -> str | pa.NativeFile:
    """What pyarrow opens: the path, or the file opened by its bytes when the path is not valid
    UTF-8 (a name with undecodable bytes, which pyarrow cannot take as a path)."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return pa.OSFile(os.fsencode(path))
    return str(path)


@contextlib.contextmanager
def _opened(path: DumpPath, metadata: pq.FileMetaData | None = None) -> Iterator[pq.ParquetFile]:
    """The parquet file opened (its footer read unless ``metadata`` is given), local or remote;
    every handle is closed on exit."""
    source: Any
    if isinstance(path, RemotePath):
        if metadata is None and path.size() == 0:
            raise InputError(f"{path}: file is empty (0 bytes), not a parquet file")
        source = path.open()
    else:
        if metadata is None and path.stat().st_size == 0:
            raise InputError(f"{path}: file is empty (0 bytes), not a parquet file")
        if not os.access(path, os.R_OK):
            raise InputError(f"{path}: cannot read the file (permission denied)")
        source = _source(path)
    try:
        handle = pq.ParquetFile(source, metadata=metadata, buffer_size=1 << 20, pre_buffer=False)
        try:
            yield handle
        finally:
            handle.close()
    finally:
        if not isinstance(source, str):
            source.close()


def open_failure(path: DumpPath, exc: BaseException) -> InputError:
    """The error for a file that cannot be opened: a resource the process ran out of (file
    handles, memory) is named as such, not blamed on the file."""
    if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
        return InputError(
            f"{path}: cannot open the file: too many open files (the limit of open files, "
            "`ulimit -n`, is reached)"
        )
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "Too many open files" in reason:
        return InputError(
            f"{path}: cannot open the file: too many open files (the limit of open files, "
            "`ulimit -n`, is reached)"
        )
    return InputError(f"{path}: not a readable parquet file ({reason})")


def open_file(path: DumpPath, names: ColumnNames) -> DumpFile:
    """Read a file's footer and resolve its columns; raises InputError on anything unusable."""
    try:
        with _opened(path) as handle:
            schema, metadata = handle.schema_arrow, handle.metadata
    except (InputError, MemoryError):
        raise
    except (pa.ArrowInvalid, pa.ArrowException, OSError) as exc:
        raise open_failure(path, exc) from exc
    except Exception as exc:  # a remote store's own errors (credentials, network)
        if not isinstance(path, RemotePath):
            raise
        raise remote_failure(path, exc, "cannot read the file") from exc
    step_name = names.step or DEFAULT_NAMES["step"][0]
    hive = _hive_step(path, step_name)
    # a directory step=N stands for an absent step column, also one named by --step-col
    absent_step = names.step is not None and hive is not None and names.step not in schema.names
    columns = FileColumns(
        rollout=str(_resolve(schema, path, "rollout", names.rollout)),
        training=str(_resolve(schema, path, "training", names.training)),
        mask=_resolve(schema, path, "mask", names.mask),
        step=None if absent_step else _resolve(schema, path, "step", names.step),
        hive_step=hive,
        uid=_resolve(schema, path, "uid", None),
        lag=_resolve(schema, path, "lag", None),
    )
    if names.step and columns.step is None and hive is None:
        raise InputError(f"{path}: no column {names.step!r} and no {names.step}=N directory")
    _check_distinct(columns, names, path)
    for name in (
        columns.rollout,
        columns.training,
        columns.mask,
        columns.step,
        columns.uid,
        columns.lag,
    ):
        count = schema.names.count(name) if name is not None else 0
        if count > 1:
            raise InputError(
                f"{path}: the file has {count} columns named {name!r}; which one to read is "
                "ambiguous (rename them)"
            )
    return DumpFile(path, metadata, columns)
