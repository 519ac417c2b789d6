"""`rcdiag.write_dump`: one call from a trainer's padded tensors to a dump rcdiag reads back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

import rcdiag
from rcdiag.metrics.analysis import AnalyzeOptions
from rcdiag.run.dump import DumpSpec
from rcdiag.run.results import analyze_dump


def _tensors(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    rollout = -torch.rand(4, 6, generator=g, dtype=torch.float64) * 3
    old = rollout + 0.01 * torch.randn(4, 6, generator=g, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1], [0] * 6, [1, 0, 1, 1, 0, 0]])
    return rollout.to(dtype), old.to(dtype), mask


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_torch_tensors_round_trip(tmp_path: Path, dtype: torch.dtype) -> None:
    rollout, old, mask = _tensors(dtype)
    path = rcdiag.write_dump(tmp_path / "step=3" / "part-0.parquet", rollout, old, mask, step=3)
    table = pq.read_table(path)
    assert table.column("step").to_pylist() == [3, 3, 3, 3]
    # trailing padding is trimmed, holes inside a response are kept (masked)
    assert [len(r) for r in table.column("old_log_probs").to_pylist()] == [3, 6, 0, 4]
    expected = old.float() if dtype == torch.bfloat16 else old
    assert np.allclose(table.column("old_log_probs").to_pylist()[1], expected[1].double().numpy())
    doc = analyze_dump(DumpSpec([tmp_path]), AnalyzeOptions())
    assert doc.source.valid_tokens == int(mask.sum())
    assert doc.step_results[0].step == 3


def test_numpy_without_mask_and_per_row_steps(tmp_path: Path) -> None:
    rollout = np.full((3, 2), -1.0, dtype=np.float32)
    path = rcdiag.write_dump(
        tmp_path / "d.parquet",
        rollout,
        rollout,
        step=[0, 1, 1],
        extra_columns={"uid": ["a", "a", "b"]},
    )
    table = pq.read_table(path)
    assert table.column("step").to_pylist() == [0, 1, 1]
    assert table.column("uid").to_pylist() == ["a", "a", "b"]
    assert table.schema.field("rollout_log_probs").type.value_type == "float"


@pytest.mark.parametrize("compression", ["snappy", "zstd"])
def test_compression_and_no_dictionary_for_log_probs(tmp_path: Path, compression: str) -> None:
    rollout, old, mask = _tensors(torch.float32)
    path = rcdiag.write_dump(
        tmp_path / "d.parquet",
        rollout,
        old,
        mask,
        extra_columns={"uid": ["a", "a", "b", "b"]},
        compression=compression,
    )
    columns = pq.ParquetFile(path).metadata.row_group(0)
    chunks = {
        columns.column(i).path_in_schema: columns.column(i) for i in range(columns.num_columns)
    }
    assert {c.compression for c in chunks.values()} == {compression.upper()}
    for name in ("rollout_log_probs.list.element", "old_log_probs.list.element"):
        assert not chunks[name].has_dictionary_page  # distinct floats: a dictionary only adds bytes
    assert chunks["uid"].has_dictionary_page
    assert pq.read_table(path).column("old_log_probs").to_pylist()[1] == old[1].tolist()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rollout_log_probs": np.zeros(3)}, r"must both be \[B, T\]"),
        ({"response_mask": np.ones((2, 2))}, "response_mask"),
        ({"rollout_log_probs": np.zeros((2, 3), dtype=np.int64)}, "floating point"),
        ({"extra_columns": {"uid": [1]}}, "extra column 'uid' has 1 entries"),
    ],
)
def test_bad_arguments(tmp_path: Path, kwargs: dict, match: str) -> None:
    args = {"rollout_log_probs": np.zeros((2, 3)), "old_log_probs": np.zeros((2, 3))}
    if "rollout_log_probs" in kwargs and kwargs["rollout_log_probs"].dtype.kind == "i":
        args["old_log_probs"] = np.zeros((2, 3), dtype=np.int64)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        rcdiag.write_dump(tmp_path / "d.parquet", **args)
    assert not (tmp_path / "d.parquet").exists()
