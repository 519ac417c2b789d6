"""A mask the footer proves True everywhere is not decoded (rcdiag/io/footer.py): the results are
those of reading it, and every mask the statistics do not vouch for is read and checked as before
(a False, a null row, an empty list, a row of another length, a wrong type, no statistics)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rcdiag import analyze
from rcdiag.errors import InputError
from rcdiag.run.dump import DumpSpec

LENGTHS = (5, 3, 7)


def _write(path: Path, mask: Any, mask_type: pa.DataType, **options: Any) -> Path:
    rng = np.random.default_rng(0)
    rollout = [(-rng.exponential(1.0, n)).tolist() for n in LENGTHS]
    old = [[v + 0.01 * (i % 3) for i, v in enumerate(row)] for row in rollout]
    table = pa.table(
        {
            "rollout_log_probs": pa.array(rollout, pa.list_(pa.float32())),
            "old_log_probs": pa.array(old, pa.list_(pa.float32())),
            "response_mask": pa.array(mask, pa.list_(mask_type)),
        }
    )
    pq.write_table(table, path, **options)
    return path


def _skips_mask(path: Path) -> bool:
    spec = DumpSpec([str(path)])
    reader = spec.reader(False)
    (dump_file,) = reader.files
    return dump_file.mask_is_all_true()


def _kl(path: Path) -> float:
    value = analyze(path).overall["rollout_corr/kl"]
    assert value is not None
    return value


ALL_TRUE = [[True] * n for n in LENGTHS]


@pytest.mark.parametrize(
    ("mask", "mask_type"),
    [(ALL_TRUE, pa.bool_()), ([[1] * n for n in LENGTHS], pa.int8())],
)
def test_an_all_true_mask_is_not_decoded_and_changes_nothing(
    tmp_path: Path, mask: Any, mask_type: pa.DataType
) -> None:
    path = _write(tmp_path / "d.parquet", mask, mask_type)
    assert _skips_mask(path)
    no_stats = _write(tmp_path / "n.parquet", mask, mask_type, write_statistics=False)
    assert not _skips_mask(no_stats)
    assert _kl(path) == _kl(no_stats)
    result = analyze(path)
    assert result.overall["rcdiag/response_length_mean"] == pytest.approx(sum(LENGTHS) / 3)


def test_a_mask_with_a_false_is_decoded(tmp_path: Path) -> None:
    mask = [[True] * n for n in LENGTHS]
    mask[2][6] = False
    path = _write(tmp_path / "d.parquet", mask, pa.bool_())
    assert not _skips_mask(path)
    assert analyze(path).overall["rcdiag/response_length_mean"] == pytest.approx(14 / 3)


@pytest.mark.parametrize(
    ("mask", "message"),
    [
        ([[True] * 5, [True] * 4, [True] * 7], "has 4 entries but"),  # one row longer
        ([[True] * 5, None, [True] * 7], "is null"),
    ],
)
def test_masks_the_footer_cannot_vouch_for_are_checked(
    tmp_path: Path, mask: Any, message: str
) -> None:
    path = _write(tmp_path / "d.parquet", mask, pa.bool_())
    assert not _skips_mask(path)
    with pytest.raises(InputError, match=message):
        analyze(path)


def test_a_mask_of_the_wrong_type_is_still_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.parquet", [["y"] * n for n in LENGTHS], pa.string())
    assert not _skips_mask(path)
    with pytest.raises(InputError, match=re.escape("expected list<bool|int>")):
        analyze(path)


def test_every_row_group_must_be_proven(tmp_path: Path) -> None:
    """Three row groups of one row each; the last one's mask holds a False."""
    mask = [[True] * n for n in LENGTHS]
    mask[2][0] = False
    path = _write(tmp_path / "d.parquet", mask, pa.bool_(), row_group_size=1)
    assert pq.ParquetFile(path).metadata.num_row_groups == 3
    assert not _skips_mask(path)
    assert analyze(path).overall["rcdiag/response_length_mean"] == pytest.approx(14 / 3)


def _positive_file(path: Path, value: float | None, **options: Any) -> Path:
    """A file whose log-probs are all ≤ 0, but for ``value`` (when given) in row 1."""
    rollout = [[-1.0, -0.5], [-2.0, -0.1, -0.3], [-0.2]]
    if value is not None:
        rollout[1][1] = value
    old = [[v - 0.01 for v in row] for row in rollout]
    table = pa.table(
        {
            "rollout_log_probs": pa.array(rollout, pa.list_(pa.float32())),
            "old_log_probs": pa.array(old, pa.list_(pa.float32())),
        }
    )
    pq.write_table(table, path, **options)
    return path


@pytest.mark.parametrize(
    ("value", "options", "proven"),
    [
        (None, {}, True),  # every log-prob ≤ 0: no batch is searched
        (0.5, {}, False),
        (0.5, {"write_statistics": False}, False),
        (float("nan"), {}, True),  # NaN is never counted as positive
        (None, {"row_group_size": 1}, True),
        (0.5, {"row_group_size": 1}, False),  # in the second row group only
    ],
)
def test_the_footer_rules_out_positive_log_probs_only_when_it_shows_them(
    tmp_path: Path, value: float | None, options: dict[str, Any], proven: bool
) -> None:
    path = _positive_file(tmp_path / "d.parquet", value, **options)
    (dump_file,) = DumpSpec([str(path)]).reader(False).files
    assert dump_file.log_probs_at_most(0.01) == proven
    positive = analyze(path, drop_nonfinite=True).source.positive_log_probs
    assert positive == (1 if value is not None and value > 0 else 0)
