"""The columns of a record batch, checked: list columns as flat values and per-row lengths,
per-row integer columns (steps, policy lags). Every problem is an
:class:`~rcdiag.errors.InputError` naming the file, row and column."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from rcdiag.errors import InputError
from rcdiag.io.arrays import as_numpy
from rcdiag.io.files import INT64_MAX, DumpPath, row_of

Locate = Callable[[str, "int | None"], InputError]
"""Builds the error for a message about a row of the current batch (None: about the column)."""


def list_values(
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
        raise locate(f"column {column!r} is null", first_true(array.is_null()))
    flat, lengths = list_parts(array)
    if flat.null_count and not kinds.startswith("float"):
        token = first_true(flat.is_null())
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        row = row_of(offsets, token)
        raise locate(f"column {column!r} holds a null at position {token - offsets[row]}", row)
    # Float nulls become NaN here, so they are judged like NaN: ignored when masked.
    return as_numpy(flat), lengths


def list_parts(array: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The values of a list array without nulls, and each list's length (int64), read from its
    offsets: ``flatten`` and ``value_lengths`` import pyarrow.compute, ~0.05 s of every start-up.
    """
    if pa.types.is_fixed_size_list(array.type):
        size = array.type.list_size
        lengths = np.full(len(array), size, dtype=np.int64)
        return array.values.slice(array.offset * size, len(array) * size), lengths
    offsets = as_numpy(array.offsets).astype(np.int64)
    start = int(offsets[0]) if offsets.size else 0
    end = int(offsets[-1]) if offsets.size else 0
    return array.values.slice(start, end - start), np.diff(offsets)


def first_true(flags: pa.Array) -> int:
    return int(np.flatnonzero(as_numpy(flags))[0])


def integer_column(
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
        row = first_true(array.is_null())
        raise InputError(f"{path}: row {first_row + row}: column {name!r} is null")
    values = as_numpy(array)
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
