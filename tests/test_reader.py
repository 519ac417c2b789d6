"""The streaming reader: discovery, row details, batching."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rcdiag.io.files import discover
from rcdiag.io.reader import DumpReader
from tests.dumps import simple_columns, write_table


def test_a_file_named_twice_is_read_once_as_first_spelled(tmp_path: Path) -> None:
    a = write_table(tmp_path / "a.parquet", simple_columns())
    b = write_table(tmp_path / "b.parquet", simple_columns())
    assert discover([b, tmp_path / "*.parquet"]) == [b, a]


def test_row_details_carry_uid_source_and_row_index(tmp_path: Path) -> None:
    columns = simple_columns(5)
    columns["uid"] = ["p0", "p0", "p1", "p1", "p2"]
    path = write_table(tmp_path / "d.parquet", columns)
    reader = DumpReader([path], batch_tokens=1, row_details=True)  # tiny batches: 16 rows min
    batches = list(reader.batches())
    rows = np.concatenate([b.row_index for b in batches if b.row_index is not None])
    uids = np.concatenate([b.uids for b in batches if b.uids is not None])
    assert rows.tolist() == [0, 1, 2, 3, 4]
    assert uids.tolist() == ["p0", "p0", "p1", "p1", "p2"]
    assert {b.source for b in batches} == {str(path)}
    plain = next(DumpReader([path]).batches())
    assert plain.uids is None and plain.row_index is None


def test_batches_stay_near_the_token_budget(tmp_path: Path) -> None:
    rollout = [[-1.0] * 50 for _ in range(400)]
    path = write_table(
        tmp_path / "d.parquet", {"rollout_log_probs": rollout, "old_log_probs": rollout}
    )
    sizes = [int(b.offsets[-1]) for b in DumpReader([path], batch_tokens=2000).batches()]
    assert sum(sizes) == 400 * 50
    assert max(sizes) <= 2000
