"""Log-probs are kept as the dump holds them (float16, float32 or float64) and every computation
takes them to float64 first: the same values stored at three widths give the very same numbers in
every command, every framework's metrics and modes included (a computation left in float32 or
float16 would differ)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rcdiag
from tests.documents import assert_documents_close

WIDTHS = {"float16": pa.float16(), "float32": pa.float32(), "float64": pa.float64()}


def _write(directory: Path, width: str, holes: bool) -> Path:
    """Three steps of responses whose log-probs are float16 values (exact at every width), some
    positive ones, a mask with holes (or none), and one row past the ±20 clamp."""
    rng = np.random.default_rng(11)
    path = directory / width / "dump.parquet"
    path.parent.mkdir(parents=True)
    rows = []
    for row in range(48):
        n = int(rng.integers(1, 120))
        rollout = np.float16(-rng.exponential(0.9, n)).astype(np.float64)
        old = np.float16(rollout + rng.normal(0, 0.05 + 0.02 * (row % 3), n)).astype(np.float64)
        if row == 5:
            old[0] = -24.0
        mask = rng.random(n) > 0.1 if holes else np.ones(n, dtype=bool)
        rows.append((rollout, old, mask, row % 3))
    value_type = pa.list_(WIDTHS[width])
    table = pa.table(
        {
            "rollout_log_probs": pa.array([r[0].tolist() for r in rows], value_type),
            "old_log_probs": pa.array([r[1].tolist() for r in rows], value_type),
            "response_mask": pa.array([r[2].tolist() for r in rows], pa.list_(pa.bool_())),
            "step": pa.array([r[3] for r in rows], pa.int64()),
        }
    )
    pq.write_table(table, path)
    return path


def _same(a: Any, b: Any) -> None:
    """Equal documents: every number exactly (NaN with NaN); strings naming the files aside."""
    assert_documents_close(
        a, b, rel=0.0, nan_equal=True, skip=lambda text: "float" in text or "/" in text
    )


def _documents(path: Path) -> list[dict[str, Any]]:
    documents = [
        rcdiag.analyze(path, frameworks="all").to_json(),
        rcdiag.compare_presets(path, frameworks="all").to_json(),  # every framework's modes
        rcdiag.report(path, frameworks="all").to_json(),
    ]
    for document in documents:
        document.pop("rcdiag_version", None)
    return documents


@pytest.mark.parametrize("holes", [False, True])
def test_three_widths_of_the_same_values_give_the_same_numbers(tmp_path: Path, holes: bool) -> None:
    wide = _documents(_write(tmp_path, "float64", holes))
    for width in ("float32", "float16"):
        for a, b in zip(wide, _documents(_write(tmp_path, width, holes)), strict=True):
            _same(a, b)
