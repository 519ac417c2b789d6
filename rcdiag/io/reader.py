"""Streaming dump reader: validation and conversion of record batches to ragged batches (the files
themselves are found and opened by :mod:`rcdiag.io.files`).

A dump is one or more parquet files (README.md): files, globs or directories (searched recursively;
a ``step=N`` directory supplies the step when no step column exists), local or remote (``s3://``,
``gs://``, ``hf://``, ``http(s)://``: :mod:`rcdiag.io.remote`). Files are read in record batches
of about ``batch_tokens`` tokens with bounded read buffers, so memory does not grow with the dump.
Every problem is raised as :class:`~rcdiag.errors.InputError` naming the file, row, step and column.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from rcdiag.errors import InputError
from rcdiag.io.arrays import as_numpy
from rcdiag.io.columns import Locate, integer_column, list_values
from rcdiag.io.files import (
    POSITIVE_LOG_PROB,
    ColumnNames,
    DumpFile,
    DumpPath,
    FileColumns,
    StepSelection,
    discover,
    open_failure,
    row_of,
)
from rcdiag.io.native.common import NativeFile
from rcdiag.io.native.detect import InputFormat, open_dump
from rcdiag.io.remote import RemotePath, remote_failure
from rcdiag.metrics.ragged import RaggedBatch


def _release_read_buffers() -> None:
    """Return the memory pyarrow freed to the system: a file of long rows is decoded a whole row
    at a time (its values and levels, several times the row's size), which would otherwise stay
    mapped while the rows are processed."""
    pa.default_memory_pool().release_unused()


BATCH_TOKENS = 1 << 20
"""Tokens per batch: large enough that the work per batch, not per call, dominates (docs/scale.md)."""


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
        input_format: the format of the files (None: told from the paths) and whether pickles
            may be read (:mod:`rcdiag.io.native`).
    """

    def __init__(
        self,
        paths: Sequence[str | Path],
        columns: ColumnNames | None = None,
        *,
        drop_nonfinite: bool = False,
        selection: StepSelection | None = None,
        batch_tokens: int = BATCH_TOKENS,
        row_details: bool = False,
        stream_offset: int = 0,
        storage_options: Mapping[str, Any] | None = None,
        input_format: InputFormat | None = None,
    ) -> None:
        self.names = columns or ColumnNames()
        self.selection = selection or StepSelection()
        files = open_dump(discover(paths, storage_options), self.names, input_format)
        # a native file's step is in its name: steps not selected are not read at all
        self.files = [
            f
            for f in files
            if not isinstance(f, NativeFile)
            or self.selection.contains(np.array([f.step], dtype=np.int64))[0]
        ]
        self.stream_offset = stream_offset
        self.drop_nonfinite = drop_nonfinite
        self.batch_tokens = batch_tokens
        self.row_details = row_details
        self.dropped_nonfinite = 0
        self.positive_log_probs = 0
        self.first_positive: str | None = None
        self.rows_read = 0

    @property
    def total_rows(self) -> int:
        """The rows of the dump, for progress: a native unit not read yet counts its estimate
        (reading it only to count would read it twice)."""
        return sum(f.estimated_rows if isinstance(f, NativeFile) else f.rows for f in self.files)

    @property
    def left_out(self) -> dict[str, int]:
        """Samples of native dumps not read, by reason (``aborted``, ``failed``, ``padding``)."""
        counts: dict[str, int] = {}
        for f in self.files:
            for reason, count in getattr(f, "left_out", {}).items():
                counts[reason] = counts.get(reason, 0) + count
        return counts

    def batches(self) -> Iterator[RaggedBatch]:
        """Every batch of every file, in file order, after validation and step selection."""
        offset = self.stream_offset
        for dump_file in self.files:
            yield from self._file_batches(dump_file, offset)
            offset += dump_file.rows

    def _file_batches(
        self, dump_file: DumpFile | NativeFile, stream_offset: int
    ) -> Iterator[RaggedBatch]:
        mean_length = dump_file.mean_row_length()
        rows_per_batch = max(1, int(self.batch_tokens / max(1.0, mean_length)))
        try:
            yield from self._read_file(dump_file, stream_offset, rows_per_batch)
        finally:
            if mean_length > self.batch_tokens:  # rows longer than a batch: each read whole
                _release_read_buffers()

    def _read_file(
        self, dump_file: DumpFile | NativeFile, stream_offset: int, rows_per_batch: int
    ) -> Iterator[RaggedBatch]:
        first_row = 0
        kind = "parquet" if isinstance(dump_file, DumpFile) else dump_file.format
        # no batch is searched for a positive log-prob where the footer rules one out
        positive = not (
            isinstance(dump_file, DumpFile) and dump_file.log_probs_at_most(POSITIVE_LOG_PROB)
        )
        with contextlib.ExitStack() as opened:  # one file open at a time, closed after its scan
            if isinstance(dump_file, NativeFile):  # its columns are known once it is read
                iterator = dump_file.record_batches(rows_per_batch)
            else:
                cols = dump_file.columns
                wanted = [cols.rollout, cols.training]
                mask = None if dump_file.mask_is_all_true() else cols.mask
                extra = (mask, cols.step, cols.lag, cols.uid if self.row_details else None)
                wanted += [c for c in extra if c is not None and c not in wanted]
                with _read_errors(dump_file.path, None, kind):
                    handle = opened.enter_context(dump_file.open())
                iterator = handle.iter_batches(
                    batch_size=rows_per_batch, columns=wanted, use_threads=False
                )
            while True:
                with _read_errors(dump_file.path, first_row, kind):
                    record_batch = next(iterator, None)
                if record_batch is None:
                    return
                batch = self._convert(record_batch, dump_file, first_row, stream_offset, positive)
                first_row += record_batch.num_rows
                self.rows_read += record_batch.num_rows
                if batch is not None and batch.rows:
                    yield batch

    def _convert(
        self,
        record_batch: pa.RecordBatch,
        dump_file: DumpFile | NativeFile,
        first_row: int,
        stream_offset: int,
        positive: bool = True,
    ) -> RaggedBatch | None:
        """The record batch checked and converted; ``positive``: whether it may hold a positive
        log-prob (to be counted)."""
        cols, path = dump_file.columns, dump_file.path
        steps = self._steps(record_batch, dump_file, first_row)

        def locate(message: str, row: int | None) -> InputError:
            if row is None:
                return InputError(f"{path}: {message}")
            return InputError(f"{path}: row {first_row + row} (step {int(steps[row])}): {message}")

        def values(column: str, kinds: str) -> tuple[np.ndarray, np.ndarray]:
            return list_values(record_batch.column(column), column, kinds, locate)

        rollout, lengths = values(cols.rollout, "float16|float32|float64")
        old, old_lengths = values(cols.training, "float16|float32|float64")
        if cols.mask is not None and cols.mask in record_batch.schema.names:
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
            rollout=rollout,
            old=old,
            mask=mask,
            offsets=offsets,
            steps=steps,
            lags=None
            if cols.lag is None
            else integer_column(record_batch, cols.lag, path, first_row, minimum=0),
            stream_rows=np.arange(lengths.size, dtype=np.int64) + (stream_offset + first_row),
        )
        if self.row_details:
            batch = dataclasses.replace(
                batch,
                source=str(path),
                row_index=np.arange(first_row, first_row + lengths.size, dtype=np.int64),
                uids=None if cols.uid is None else as_numpy(record_batch.column(cols.uid)),
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
            if positive:
                self._count_positive(batch, batch.mask, cols, locate)
            return batch
        selected = self.selection.contains(steps)
        if positive:
            self._count_positive(batch, batch.mask & np.repeat(selected, lengths), cols, locate)
        return batch.select_rows(selected)

    def _count_positive(
        self, batch: RaggedBatch, counted: np.ndarray, cols: FileColumns, locate: Locate
    ) -> None:
        """Count log-probs > :data:`POSITIVE_LOG_PROB` at the ``counted`` positions and remember
        where the first one is."""
        if (
            batch.rollout.size == 0
            or max(float(batch.rollout.max()), float(batch.old.max())) <= POSITIVE_LOG_PROB
        ):
            return  # (a NaN maximum fails the test and takes the exact path)
        bound = np.float64(POSITIVE_LOG_PROB)  # compared in float64 whatever the column's type
        positive = (batch.rollout > bound) | (batch.old > bound)
        positive &= counted
        if not positive.any():
            return
        self.positive_log_probs += int(positive.sum())
        if self.first_positive is None:
            token = int(np.flatnonzero(positive)[0])
            row = row_of(batch.offsets, token)
            column, value = (
                (cols.rollout, batch.rollout[token])
                if batch.rollout[token] > POSITIVE_LOG_PROB
                else (cols.training, batch.old[token])
            )
            self.first_positive = str(locate(f"column {column!r} = {value:g}", row))

    @staticmethod
    def _nonfinite_error(
        batch: RaggedBatch, bad: np.ndarray, cols: FileColumns, locate: Locate
    ) -> InputError:
        token = int(np.flatnonzero(bad)[0])
        row = row_of(batch.offsets, token)
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
        self, record_batch: pa.RecordBatch, dump_file: DumpFile | NativeFile, first_row: int
    ) -> np.ndarray:
        cols = dump_file.columns
        rows = record_batch.num_rows
        if cols.step is None:
            return np.full(rows, cols.hive_step or 0, dtype=np.int64)
        steps = integer_column(record_batch, cols.step, dump_file.path, first_row)
        if cols.hive_step is not None and (steps != cols.hive_step).any():
            row = int(np.flatnonzero(steps != cols.hive_step)[0])
            raise InputError(
                f"{dump_file.path}: row {first_row + row}: column {cols.step!r} holds step "
                f"{int(steps[row])} but the file is in the directory {cols.step}="
                f"{cols.hive_step}; make them agree (or move the file)"
            )
        return steps


@contextlib.contextmanager
def _read_errors(path: DumpPath, first_row: int | None, kind: str = "parquet") -> Iterator[None]:
    """Errors of reading ``path`` (after ``first_row``; None: opening it) as InputError; running out
    of memory or file handles is named as such, never blamed on the file."""
    try:
        yield
    except (InputError, MemoryError):
        raise
    except (pa.ArrowException, OSError) as exc:
        if first_row is None:
            raise open_failure(path, exc) from exc
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{path}: corrupt {kind} data after row {first_row} ({reason})") from exc
    except Exception as exc:  # a remote store's own errors (network, credentials)
        if not isinstance(path, RemotePath):
            raise
        what = "cannot open the file" if first_row is None else f"cannot read after row {first_row}"
        raise remote_failure(path, exc, what) from exc


def _describe(value: float) -> str:
    if np.isnan(value):
        return "NaN"
    return "+inf" if value > 0 else "-inf"
