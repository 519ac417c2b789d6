"""A long response is processed in bounded pieces (docs/scale.md): every metric of a dump whose
rows are longer than a piece matches the same dump processed whole, and the memory of a pass over
one long row stays a small multiple of the row's own arrays.

The pieces are made small here (:data:`rcdiag.metrics.token_sums.TOKEN_PIECE` and ``CACHE_PIECE``
patched) so that a few-thousand-token dump is cut inside its rows; the reference is the same code
with pieces larger than any batch, and an independent slow reference for the position statistics.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rcdiag import write_dump
from rcdiag.assess.recommendation.candidates import preset_configs
from rcdiag.metrics import token_sums
from rcdiag.run.consumers import Request
from rcdiag.run.dump import DumpSpec
from rcdiag.run.engine import run
from rcdiag.run.results import analysis_result, comparison_result
from tests.documents import assert_documents_close

SMALL_PIECE = 97
"""Pieces that cut rows anywhere (a prime: no alignment with the rows or numpy's blocks)."""


def _dump(directory: Path, seed: int = 0) -> Path:
    """Three steps of responses of 1–700 tokens, padding and masked garbage, a few catastrophic
    tokens and one row past the ±20 clamp."""
    rng = np.random.default_rng(seed)
    rows, width = 12, 700
    rollout = -rng.exponential(0.7, (rows, width))
    old = rollout + rng.normal(0, 0.05, (rows, width)) - 12.0 * (rng.random((rows, width)) < 2e-3)
    old[3, 5] += 25.0
    lengths = rng.integers(1, width + 1, rows)
    mask = np.arange(width)[None, :] < lengths[:, None]
    mask &= rng.random((rows, width)) > 0.05
    rollout[~mask] = np.nan  # garbage under the mask is never read
    return write_dump(directory / "d.parquet", rollout, old, mask, step=np.arange(rows) % 3)


def _close(a: Any, b: Any) -> None:
    """Equal documents, numbers to 1e-12 relative (the sums of a row cut in pieces are added in
    another order)."""
    assert_documents_close(a, b, rel=1e-12, abs_tol=1e-300)


def _documents(path: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    configs = preset_configs("latest")[0]
    done = run(DumpSpec([str(path)]), Request(configs=configs, profile_top_k=3))
    assert done.profile is not None
    return (
        analysis_result(done).to_json(),
        comparison_result(done, configs).to_json(),
        done.profile.result(),
    )


def test_rows_cut_in_pieces_give_every_metric_of_whole_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _dump(tmp_path)
    whole = _documents(path)
    monkeypatch.setattr(token_sums, "TOKEN_PIECE", SMALL_PIECE)
    monkeypatch.setattr(token_sums, "CACHE_PIECE", SMALL_PIECE)
    assert len(token_sums.token_pieces(700)) > 1
    pieces = _documents(path)
    for a, b in zip(whole, pieces, strict=True):
        a.pop("rcdiag_version", None), b.pop("rcdiag_version", None)
        _close(a, b)


def test_a_long_row_is_processed_in_bounded_memory(tmp_path: Path) -> None:
    """The pass over one row of 2²² tokens (the report's consumers: every preset, the profile)
    holds at its peak a small multiple of the row's float64 arrays, not one array per
    configuration."""
    tokens = 1 << 22
    rng = np.random.default_rng(0)
    rollout = (-rng.exponential(0.7, (1, tokens))).astype(np.float32)
    old = (rollout + rng.normal(0, 0.01, rollout.shape)).astype(np.float32)
    path = write_dump(tmp_path / "long.parquet", rollout, old, step=0)
    row_array = 8 * tokens  # one float64 value per token
    request = Request(configs=preset_configs("latest")[0], profile_top_k=3)
    tracemalloc.start()
    try:
        run(DumpSpec([str(path)]), request)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the batch holds rollout, old and ℓ (3 arrays) and the mask; a configuration's work a few
    # more: 10 arrays in all (every configuration's arrays at once took over 15)
    assert peak < 10 * row_array, peak / row_array
