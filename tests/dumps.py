"""Tiny dumps written straight with pyarrow, so input tests do not depend on rcdiag's writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def write_table(path: Path, columns: dict[str, Any], schema: pa.Schema | None = None) -> Path:
    """Write ``columns`` (name → python lists or arrow arrays) as one parquet file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns, schema=schema), path)
    return path


def simple_columns(rows: int = 3, step: int | None = None) -> dict[str, Any]:
    """A healthy dump: row i has i + 1 tokens, small mismatch."""
    rollout = [[-0.5 - 0.1 * t for t in range(i + 1)] for i in range(rows)]
    old = [[v + 0.01 * (t % 2 - 0.5) for t, v in enumerate(r)] for r in rollout]
    columns: dict[str, Any] = {"rollout_log_probs": rollout, "old_log_probs": old}
    columns["response_mask"] = [[1] * len(r) for r in rollout]
    if step is not None:
        columns["step"] = [step] * rows
    return columns
