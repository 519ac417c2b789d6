"""Streaming dump reader: discovery, column resolution, validation, conversion to ragged batches.

A dump is one or more parquet files (README.md): files, globs or directories (searched recursively;
a ``step=N`` directory supplies the step when no step column exists), local or remote (``s3://``,
``gs://``, ``hf://``, ``http(s)://``: :mod:`rcdiag.io.remote`). Files are read in record batches
of about ``batch_tokens`` tokens with bounded read buffers, so memory does not grow with the dump.
Every problem is raised as :class:`~rcdiag.errors.InputError` naming the file, row, step and column.
"""

from __future__ import annotations

import dataclasses
import difflib
import glob
import os
import queue
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rcdiag.errors import InputError, UsageError
from rcdiag.io.paths import file_kind
from rcdiag.io.remote import RemotePath, discover_remote, is_remote, local_path
from rcdiag.metrics.ragged import RaggedBatch

PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")

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
            inside = sorted(
                p
                for p in path.rglob("*")
                if p.is_file()
                and p.suffix.lower() in PARQUET_SUFFIXES
                and not any(part.startswith((".", "_")) for part in p.relative_to(path).parts)
            )
            if not inside:
                raise InputError(f"{path}: directory holds no parquet file (*.parquet, *.pq)")
            found.extend(inside)
        elif path.is_file():
            found.append(path)
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


def _row_of(offsets: np.ndarray, token: int) -> int:
    return int(np.searchsorted(offsets, token, side="right") - 1)


@dataclass
class _FileColumns:
    rollout: str
    training: str
    mask: str | None
    step: str | None
    hive_step: int | None
    uid: str | None
    lag: str | None


@dataclass
class DumpFile:
    """One parquet file of a dump, opened (its footer read) but not yet scanned."""

    path: DumpPath
    handle: pq.ParquetFile
    columns: _FileColumns

    @property
    def rows(self) -> int:
        return int(self.handle.metadata.num_rows)

    def mean_row_length(self) -> float:
        meta = self.handle.metadata
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


def _check_distinct(columns: _FileColumns, names: ColumnNames, path: DumpPath) -> None:
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


def _open_parquet(path: DumpPath) -> pq.ParquetFile:
    """The parquet file opened (its footer read), local or remote."""
    if isinstance(path, RemotePath):
        if path.size() == 0:
            raise InputError(f"{path}: file is empty (0 bytes), not a parquet file")
        return pq.ParquetFile(path.open(), buffer_size=1 << 20, pre_buffer=False)
    if path.stat().st_size == 0:
        raise InputError(f"{path}: file is empty (0 bytes), not a parquet file")
    if not os.access(path, os.R_OK):
        raise InputError(f"{path}: cannot read the file (permission denied)")
    return pq.ParquetFile(_source(path), buffer_size=1 << 20, pre_buffer=False)


def open_file(path: DumpPath, names: ColumnNames) -> DumpFile:
    """Read a file's footer and resolve its columns; raises InputError on anything unusable."""
    try:
        handle = _open_parquet(path)
    except InputError:
        raise
    except (pa.ArrowInvalid, pa.ArrowException, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{path}: not a readable parquet file ({reason})") from exc
    except Exception as exc:  # a remote store's own errors (credentials, network)
        if not isinstance(path, RemotePath):
            raise
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{path}: cannot read the file ({reason})") from exc
    schema = handle.schema_arrow
    step_name = names.step or DEFAULT_NAMES["step"][0]
    hive = _hive_step(path, step_name)
    # a directory step=N stands for an absent step column, also one named by --step-col
    absent_step = names.step is not None and hive is not None and names.step not in schema.names
    columns = _FileColumns(
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
    return DumpFile(path, handle, columns)


Locate = Callable[[str, "int | None"], InputError]
"""Builds the error for a message about a row of the current batch (None: about the column)."""


def _list_values(
    array: pa.Array, column: str, kinds: str, locate: Locate
) -> tuple[np.ndarray, np.ndarray]:
    """Flat values and per-row lengths of a list column, checking its type and nulls."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    list_type = array.type
    is_list = (
        pa.types.is_list(list_type)
        or pa.types.is_large_list(list_type)
        or pa.types.is_fixed_size_list(list_type)
    )
    if is_list:
        value_type = list_type.value_type
        is_list = (
            pa.types.is_floating(value_type)
            if kinds.startswith("float")
            else pa.types.is_boolean(value_type) or pa.types.is_integer(value_type)
        )
    if not is_list:
        raise locate(f"column {column!r} has type {list_type}; expected list<{kinds}>", None)
    if array.null_count:
        raise locate(f"column {column!r} is null", _first_true(array.is_null()))
    # the array's own methods: pyarrow.compute would add ~0.1 s to every start-up
    lengths = array.value_lengths().to_numpy(zero_copy_only=False).astype(np.int64)
    flat = array.flatten()
    if flat.null_count and not kinds.startswith("float"):
        token = _first_true(flat.is_null())
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        row = _row_of(offsets, token)
        raise locate(f"column {column!r} holds a null at position {token - offsets[row]}", row)
    # Float nulls become NaN here, so they are judged like NaN: ignored when masked.
    return flat.to_numpy(zero_copy_only=False), lengths


def _first_true(flags: pa.Array) -> int:
    return int(np.flatnonzero(flags.to_numpy(zero_copy_only=False))[0])


class DumpReader:
    """Streams a dump as :class:`~rcdiag.metrics.ragged.RaggedBatch` es of float64 log-probs.

    Args:
        paths: files, globs or directories.
        columns: column names chosen by the user.
        drop_nonfinite: mask NaN/±inf found at valid positions (counted in ``dropped_nonfinite``)
            instead of raising.
        selection: steps to keep.
        batch_tokens: target tokens per yielded batch.
        row_details: also read each row's ``uid`` (when the dump has one) and position.
        stream_offset: the number of rows before these files in the whole dump's reading order
            (a worker reading a part of the dump), so that each row's ``stream_rows`` is its
            position in the whole dump.
        storage_options: keyword arguments of the file system of remote paths
            (:mod:`rcdiag.io.remote`).
    """

    def __init__(
        self,
        paths: Sequence[str | Path],
        columns: ColumnNames | None = None,
        *,
        drop_nonfinite: bool = False,
        selection: StepSelection | None = None,
        batch_tokens: int = 1 << 18,
        row_details: bool = False,
        stream_offset: int = 0,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.names = columns or ColumnNames()
        self.files = [open_file(p, self.names) for p in discover(paths, storage_options)]
        self.stream_offset = stream_offset
        self.drop_nonfinite = drop_nonfinite
        self.selection = selection or StepSelection()
        self.batch_tokens = batch_tokens
        self.row_details = row_details
        self.dropped_nonfinite = 0
        self.positive_log_probs = 0
        self.first_positive: str | None = None
        self.rows_read = 0

    @property
    def total_rows(self) -> int:
        return sum(f.rows for f in self.files)

    def batches(self) -> Iterator[RaggedBatch]:
        """Every batch of every file, in file order, after validation and step selection."""
        offset = self.stream_offset
        for dump_file in self.files:
            yield from self._file_batches(dump_file, offset)
            offset += dump_file.rows

    def _file_batches(self, dump_file: DumpFile, stream_offset: int) -> Iterator[RaggedBatch]:
        cols = dump_file.columns
        wanted = [cols.rollout, cols.training]
        extra = (cols.mask, cols.step, cols.lag, cols.uid if self.row_details else None)
        wanted += [c for c in extra if c is not None and c not in wanted]
        rows_per_batch = max(16, int(self.batch_tokens / max(1.0, dump_file.mean_row_length())))
        first_row = 0
        iterator = dump_file.handle.iter_batches(batch_size=rows_per_batch, columns=wanted)
        while True:
            try:
                record_batch = next(iterator)
            except StopIteration:
                return
            except (pa.ArrowException, OSError) as exc:
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise InputError(
                    f"{dump_file.path}: corrupt parquet data after row {first_row} ({reason})"
                ) from exc
            except Exception as exc:  # a remote store's own errors (network, credentials)
                if not isinstance(dump_file.path, RemotePath):
                    raise
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise InputError(
                    f"{dump_file.path}: cannot read after row {first_row} ({reason})"
                ) from exc
            batch = self._convert(record_batch, dump_file, first_row, stream_offset)
            first_row += record_batch.num_rows
            self.rows_read += record_batch.num_rows
            if batch is not None and batch.rows:
                yield batch

    def _convert(
        self, record_batch: pa.RecordBatch, dump_file: DumpFile, first_row: int, stream_offset: int
    ) -> RaggedBatch | None:
        cols, path = dump_file.columns, dump_file.path
        steps = self._steps(record_batch, dump_file, first_row)

        def locate(message: str, row: int | None) -> InputError:
            if row is None:
                return InputError(f"{path}: {message}")
            return InputError(f"{path}: row {first_row + row} (step {int(steps[row])}): {message}")

        def values(column: str, kinds: str) -> tuple[np.ndarray, np.ndarray]:
            return _list_values(record_batch.column(column), column, kinds, locate)

        rollout, lengths = values(cols.rollout, "float32|float64")
        old, old_lengths = values(cols.training, "float32|float64")
        if cols.mask is not None:
            mask_values, mask_lengths = values(cols.mask, "bool|int")
            mask = mask_values if mask_values.dtype == np.bool_ else mask_values != 0
        else:
            mask_lengths, mask = lengths, np.ones(lengths.sum(), dtype=bool)
        for other, other_lengths in ((cols.training, old_lengths), (cols.mask, mask_lengths)):
            if other is not None and not np.array_equal(lengths, other_lengths):
                row = int(np.flatnonzero(lengths != other_lengths)[0])
                raise locate(
                    f"column {other!r} has {other_lengths[row]} entries but {cols.rollout!r} has "
                    f"{lengths[row]}; the lists of a row must have equal length",
                    row,
                )
        offsets = np.zeros(lengths.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        batch = RaggedBatch(
            rollout=rollout.astype(np.float64, copy=False),
            old=old.astype(np.float64, copy=False),
            mask=mask,
            offsets=offsets,
            steps=steps,
            lags=None
            if cols.lag is None
            else _integer_column(record_batch, cols.lag, path, first_row, minimum=0),
            stream_rows=np.arange(lengths.size, dtype=np.int64) + (stream_offset + first_row),
        )
        if self.row_details:
            batch = dataclasses.replace(
                batch,
                source=str(path),
                row_index=np.arange(first_row, first_row + lengths.size, dtype=np.int64),
                uids=None
                if cols.uid is None
                else record_batch.column(cols.uid).to_numpy(zero_copy_only=False),
            )
        # ℓ is finite exactly when both log-probs are (barring overflow of their difference, which
        # the slow path below reports as well); the core reuses the same ℓ. A finite total proves
        # every ℓ finite in one cheap reduction; otherwise look closer.
        with np.errstate(over="ignore", invalid="ignore"):
            finite = bool(np.isfinite(np.add.reduce(batch.raw_log_ratio)))
        bad = None if finite else ~np.isfinite(batch.raw_log_ratio) & mask
        if bad is not None and bad.any():
            if not self.drop_nonfinite:
                raise self._nonfinite_error(batch, bad, cols, locate)
            self.dropped_nonfinite += int(bad.sum())
            batch = dataclasses.replace(batch, mask=mask & ~bad)
        if self.selection.is_everything:
            self._count_positive(batch, batch.mask, cols, locate)
            return batch
        selected = self.selection.contains(steps)
        self._count_positive(batch, batch.mask & np.repeat(selected, lengths), cols, locate)
        return batch.select_rows(selected)

    def _count_positive(
        self, batch: RaggedBatch, counted: np.ndarray, cols: _FileColumns, locate: Locate
    ) -> None:
        """Count log-probs > :data:`POSITIVE_LOG_PROB` at the ``counted`` positions and remember
        where the first one is."""
        if (
            batch.rollout.size == 0
            or max(batch.rollout.max(), batch.old.max()) <= POSITIVE_LOG_PROB
        ):
            return  # (a NaN maximum fails the test and takes the exact path)
        positive = (batch.rollout > POSITIVE_LOG_PROB) | (batch.old > POSITIVE_LOG_PROB)
        positive &= counted
        if not positive.any():
            return
        self.positive_log_probs += int(positive.sum())
        if self.first_positive is None:
            token = int(np.flatnonzero(positive)[0])
            row = _row_of(batch.offsets, token)
            column, value = (
                (cols.rollout, batch.rollout[token])
                if batch.rollout[token] > POSITIVE_LOG_PROB
                else (cols.training, batch.old[token])
            )
            self.first_positive = str(locate(f"column {column!r} = {value:g}", row))

    @staticmethod
    def _nonfinite_error(
        batch: RaggedBatch, bad: np.ndarray, cols: _FileColumns, locate: Locate
    ) -> InputError:
        token = int(np.flatnonzero(bad)[0])
        row = _row_of(batch.offsets, token)
        position = token - int(batch.offsets[row])
        for column, values in ((cols.rollout, batch.rollout), (cols.training, batch.old)):
            if not np.isfinite(values[token]):
                return locate(
                    f"column {column!r} holds {_describe(values[token])} at position {position}, "
                    "a valid token (mask it, or pass --drop-nonfinite)",
                    row,
                )
        return locate(
            f"log-probs at position {position} are finite but their difference overflows", row
        )

    def _steps(
        self, record_batch: pa.RecordBatch, dump_file: DumpFile, first_row: int
    ) -> np.ndarray:
        cols = dump_file.columns
        rows = record_batch.num_rows
        if cols.step is None:
            return np.full(rows, cols.hive_step or 0, dtype=np.int64)
        steps = _integer_column(record_batch, cols.step, dump_file.path, first_row)
        if cols.hive_step is not None and (steps != cols.hive_step).any():
            row = int(np.flatnonzero(steps != cols.hive_step)[0])
            raise InputError(
                f"{dump_file.path}: row {first_row + row}: column {cols.step!r} holds step "
                f"{int(steps[row])} but the file is in the directory {cols.step}="
                f"{cols.hive_step}; make them agree (or move the file)"
            )
        return steps


def _integer_column(
    record_batch: pa.RecordBatch,
    name: str,
    path: DumpPath,
    first_row: int,
    minimum: int | None = None,
) -> np.ndarray:
    """A per-row integer column as int64, checked: integer type, no null, within int64 (and at
    least ``minimum``)."""
    array = record_batch.column(name)
    if not pa.types.is_integer(array.type):
        raise InputError(f"{path}: column {name!r} has type {array.type}; expected an integer")
    if array.null_count:
        row = _first_true(array.is_null())
        raise InputError(f"{path}: row {first_row + row}: column {name!r} is null")
    values = array.to_numpy(zero_copy_only=False)
    if values.dtype == np.uint64 and values.size and values.max() > INT64_MAX:
        row = int(np.flatnonzero(values > INT64_MAX)[0])
        raise InputError(
            f"{path}: row {first_row + row}: column {name!r} holds {int(values[row])}, above the "
            "largest integer rcdiag reads (2^63 - 1)"
        )
    out = values.astype(np.int64)
    if minimum is not None and values.size and out.min() < minimum:
        row = int(np.flatnonzero(out < minimum)[0])
        raise InputError(
            f"{path}: row {first_row + row}: column {name!r} holds {int(out[row])}; expected "
            f"≥ {minimum}"
        )
    return out


def _describe(value: float) -> str:
    if np.isnan(value):
        return "NaN"
    return "+inf" if value > 0 else "-inf"


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
