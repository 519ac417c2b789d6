"""A long response is processed in bounded pieces (docs/scale.md): every metric of a dump whose
rows are longer than a piece matches the same dump processed whole, and the memory of a pass over
one long row stays a small multiple of the row's own arrays.

The pieces are made small here (:data:`rcdiag.metrics.offpolicy.TOKEN_PIECE` patched) so that a
few-thousand-token dump is cut inside its rows; the reference is the same code with pieces larger
than any batch, and an independent slow reference for the position statistics.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rcdiag import write_dump
from rcdiag.assess.recommendation.candidates import preset_configs
from rcdiag.metrics import offpolicy
from rcdiag.metrics.positions import POSITION_EDGES, position_statistics
from rcdiag.metrics.ragged import RaggedBatch
from rcdiag.run.consumers import Request
from rcdiag.run.dump import DumpSpec
from rcdiag.run.engine import run
from rcdiag.run.results import analysis_result, comparison_result

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


def _close(a: Any, b: Any, where: str = "") -> None:
    """Equal documents, numbers to 1e-12 relative (the sums of a row cut in pieces are added in
    another order)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            _close(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert b == pytest.approx(a, rel=1e-12, abs=1e-300), where
    else:
        assert a == b, where


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
    monkeypatch.setattr(offpolicy, "TOKEN_PIECE", SMALL_PIECE)
    assert len(offpolicy.token_pieces(700)) > 1
    pieces = _documents(path)
    for a, b in zip(whole, pieces, strict=True):
        a.pop("rcdiag_version", None), b.pop("rcdiag_version", None)
        _close(a, b)


def _trailing(values: np.ndarray, valid: np.ndarray) -> int:
    """The run of equal values ending a row, back to a change of value or an invalid position
    (which it includes); 0 when the row does not end on a valid position."""
    if values.size == 0 or not valid[-1]:
        return 0
    j = values.size - 1
    while j > 0 and valid[j] and values[j] == values[j - 1]:
        j -= 1
    return values.size - j


def _slow_positions(batch: RaggedBatch) -> dict[str, np.ndarray]:
    """Position bins and padded tails row by row, token by token (a reference)."""
    edges = list(POSITION_EDGES)
    out: dict[str, list[float]] = {}
    for name in [f"pos_{e}_{k}" for e in edges for k in ("abs", "n")] + [
        "pad_rows",
        "pad_tokens",
        "pad_abs",
    ]:
        out[name] = []
    for i in range(batch.rows):
        lo, hi = int(batch.offsets[i]), int(batch.offsets[i + 1])
        ell = np.where(batch.mask[lo:hi], batch.old[lo:hi] - batch.rollout[lo:hi], 0.0)
        valid = batch.mask[lo:hi]
        for b, edge in enumerate(edges):
            end = edges[b + 1] if b + 1 < len(edges) else hi - lo
            out[f"pos_{edge}_abs"].append(float(np.abs(ell[edge:end]).sum()))
            out[f"pos_{edge}_n"].append(float(valid[edge:end].sum()))
        runs = (_trailing(batch.rollout[lo:hi], valid), _trailing(batch.old[lo:hi], valid))
        run, other = max(runs), min(runs)
        tail = float(np.abs(ell[hi - lo - run :]).sum()) if run else 0.0
        padded = run >= 4 and other < run and tail > 1.0 * run
        out["pad_rows"].append(float(padded))
        out["pad_tokens"].append(float(run if padded else 0))
        out["pad_abs"].append(tail if padded else 0.0)
    return {name: np.array(values) for name, values in out.items()}


@pytest.mark.parametrize("seed", range(6))
def test_position_statistics_match_a_row_by_row_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 400, 9)
    offsets = np.r_[0, np.cumsum(lengths)]
    n = int(offsets[-1])
    rollout = -rng.exponential(1.0, n)
    old = rollout + rng.normal(0, 0.3, n)
    for i in range(lengths.size):  # tails that repeat one value, some longer than 64
        if lengths[i] and rng.random() < 0.6:
            k = int(rng.integers(1, lengths[i] + 1))
            (rollout if rng.random() < 0.5 else old)[offsets[i + 1] - k : offsets[i + 1]] = 0.0
    mask = rng.random(n) < (1.0 if seed % 2 else 0.9)
    batch = RaggedBatch(rollout, old, mask, offsets, np.zeros(lengths.size, dtype=np.int64))
    got, want = position_statistics(batch), _slow_positions(batch)
    assert got.keys() == want.keys()
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=0, err_msg=name)


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
