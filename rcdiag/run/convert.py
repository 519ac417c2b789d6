"""Any dump rcdiag reads, written once as rcdiag's own parquet dump (``rcdiag convert``;
docs/formats.md, "Converting").

The input is read by the same reader every command uses (its checks, its step selection,
``--drop-nonfinite``), so the parquet file gives every command the same results as the input.
Values are written as float64 (what the reader computes in), the mask as booleans, ``uid`` as a
string, and ``step`` and ``policy_lag`` as int64; each batch read is one row group. The file is
written atomically: an input that fails half-way leaves no output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rcdiag.errors import InputError
from rcdiag.io.writer import atomic_write
from rcdiag.metrics.ragged import RaggedBatch
from rcdiag.run.dump import DumpSpec


@dataclass
class Converted:
    """What :func:`convert_dump` wrote.

    Attributes:
        rows: responses written.
        tokens: response positions written (masked or not).
        steps: distinct steps.
        files: the input files (or native units) read.
        left_out: samples of native dumps not read, by reason (``aborted``, ``padding`` …).
        dropped_nonfinite: non-finite values masked (``--drop-nonfinite``).
    """

    rows: int = 0
    tokens: int = 0
    steps: int = 0
    files: int = 0
    left_out: dict[str, int] = field(default_factory=dict)
    dropped_nonfinite: int = 0


def _schema(uids: bool, lags: bool) -> pa.Schema:
    fields = [
        pa.field("rollout_log_probs", pa.list_(pa.float64())),
        pa.field("old_log_probs", pa.list_(pa.float64())),
        pa.field("response_mask", pa.list_(pa.bool_())),
        pa.field("step", pa.int64()),
    ]
    if uids:
        fields.append(pa.field("uid", pa.string()))
    if lags:
        fields.append(pa.field("policy_lag", pa.int64()))
    return pa.schema(fields)


def _record_batch(batch: RaggedBatch, schema: pa.Schema) -> pa.RecordBatch:
    offsets = pa.array(batch.offsets.astype(np.int64), pa.int64())
    columns: list[pa.Array] = [
        pa.LargeListArray.from_arrays(offsets, pa.array(batch.rollout)).cast(schema[0].type),
        pa.LargeListArray.from_arrays(offsets, pa.array(batch.old)).cast(schema[1].type),
        pa.LargeListArray.from_arrays(offsets, pa.array(batch.mask)).cast(schema[2].type),
        pa.array(batch.steps, pa.int64()),
    ]
    if "uid" in schema.names:
        uids = batch.uids if batch.uids is not None else np.full(batch.rows, None)
        columns.append(pa.array([None if u is None else str(u) for u in uids], pa.string()))
    if "policy_lag" in schema.names:
        assert batch.lags is not None
        columns.append(pa.array(batch.lags, pa.int64()))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def convert_dump(
    dump: DumpSpec,
    out: Path,
    compression: str = "zstd",
    progress: Callable[[int, int], None] | None = None,
) -> Converted:
    """Read ``dump`` and write it to ``out`` as a parquet dump (atomically).

    ``uid`` and ``policy_lag`` are written when every input file has them.

    Raises:
        InputError: an unreadable input (nothing is written), or one without any row.
    """
    reader = dump.reader(row_details=True)
    total = reader.total_rows
    uids = bool(reader.files) and all(f.columns.uid is not None for f in reader.files)
    lags = bool(reader.files) and all(f.columns.lag is not None for f in reader.files)
    schema = _schema(uids, lags)
    done = Converted(files=len(reader.files))
    steps: set[int] = set()
    with atomic_write(out, "wb") as handle:
        writer = pq.ParquetWriter(handle, schema, compression=compression)
        try:
            for batch in reader.batches():
                writer.write_batch(_record_batch(batch, schema))
                done.rows += batch.rows
                done.tokens += int(batch.offsets[-1])
                steps.update(np.unique(batch.steps).tolist())
                if progress is not None:
                    progress(reader.rows_read, total)
            if done.rows == 0:
                where = ", ".join(str(f.path) for f in reader.files[:2]) or "the input"
                raise InputError(f"{where}: the dump holds no rows to convert")
        finally:
            writer.close()
    done.steps = len(steps)
    done.left_out = reader.left_out
    done.dropped_nonfinite = reader.dropped_nonfinite
    return done
