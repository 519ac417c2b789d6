"""The streaming reader: discovery, row details, batching."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

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


@pytest.mark.parametrize("kind", ["list", "large_list", "fixed_size_list"])
@pytest.mark.parametrize("window", [(0, 5), (1, 3), (4, 1), (2, 0)])
def test_list_parts_read_from_the_offsets_match_pyarrow(kind: str, window: tuple[int, int]) -> None:
    """Values and lengths taken from a (sliced) list array's offsets, as pyarrow's flatten and
    value_lengths give them."""
    import pyarrow as pa

    from rcdiag.io.columns import list_parts

    rows = [[0.5, 1.5], [2.5, 3.5], [4.5, 5.5], [6.5, 7.5], [8.5, 9.5]]
    if kind != "fixed_size_list":
        rows = [r[: 1 + i % 2] * (1 + i) for i, r in enumerate(rows)]
    value_type = pa.float32()
    types = {
        "list": pa.list_(value_type),
        "large_list": pa.large_list(value_type),
        "fixed_size_list": pa.list_(value_type, 2),
    }
    array = pa.array(rows, type=types[kind]).slice(*window)
    flat, lengths = list_parts(array)
    assert flat.to_pylist() == array.flatten().to_pylist()
    assert lengths.dtype == np.int64
    assert lengths.tolist() == array.value_lengths().to_pylist()
