"""Masked means as verl computes them with its integer response mask: the divisor is exactly n.

verl divides by ``mask.sum() + 1e-8``; with an int64 or bool mask torch evaluates that in float32,
where the 1e-8 vanishes. Where values cancel (a standard deviation) an exact ``n + 1e-8`` divisor
is visible, so these cases pin the integer-mask behaviour (docs/metrics.md, "Masked means").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from rcdiag.correction.compare import NamedConfig, PresetComparison
from rcdiag.correction.config import parse_config
from rcdiag.metrics.ragged import RaggedBatch


def _metrics(rollout: np.ndarray, old: np.ndarray, config: dict[str, Any], dialect: str) -> Any:
    rows, width = rollout.shape
    batch = RaggedBatch(
        rollout=rollout.reshape(-1),
        old=old.reshape(-1),
        mask=np.ones(rows * width, dtype=bool),
        offsets=np.arange(rows + 1, dtype=np.int64) * width,
        steps=np.zeros(rows, dtype=np.int64),
    )
    comparison = PresetComparison([NamedConfig("c", config, parse_config(config, dialect))])  # type: ignore[arg-type]
    comparison.update(batch)
    return comparison.metrics("c")


def _population_std(values: np.ndarray) -> float:
    """Two-pass sqrt(Σ(x − x̄)² / n) with exactly rounded sums."""
    mean = math.fsum(values.tolist()) / values.size
    return math.sqrt(math.fsum(((values - mean) ** 2).tolist()) / values.size)


@pytest.mark.parametrize("option", ["token_k2", "token_k3", "seq_mean_k2", "seq_sum_k3"])
def test_a_constant_clamped_statistic_has_zero_std(option: str) -> None:
    """Every statistic exceeds the tiny threshold, so clamp(s, 0, U) ≡ U: the std is exactly 0
    (an n + 1e-8 divisor gives about 3.6e-8 here)."""
    rng = np.random.default_rng(3)
    rollout = -rng.uniform(0.5, 3.0, (6, 9))
    old = rollout + rng.choice([-1.0, 1.0], rollout.shape) * rng.uniform(0.5, 1.0, rollout.shape)
    metrics = _metrics(rollout, old, {"rollout_rs": option, "rollout_rs_threshold": 1e-3}, "latest")
    assert metrics[f"rollout_corr/rollout_rs_{option}_std"] == 0.0


def test_legacy_geometric_rejection_std_divides_by_the_count() -> None:
    """Geometric ratios close to 1 barely spread, so the 1e-8 would move their std by ~1e-5."""
    rng = np.random.default_rng(5)
    rollout = -rng.uniform(0.5, 3.0, (5, 4))
    old = rollout + rng.normal(0.0, 1e-3, rollout.shape)
    lower, upper = 0.5, 2.0
    config = {
        "rollout_rs": "geometric",
        "rollout_rs_threshold": upper,
        "rollout_rs_threshold_lower": lower,
    }
    got = _metrics(rollout, old, config, "legacy")["rollout_corr/rollout_rs_std"]

    row_ratio = np.exp((old - rollout).mean(axis=1))  # exp of the masked mean ℓ of each row
    tokens = np.repeat(np.clip(row_ratio, lower, upper), rollout.shape[1])
    want = _population_std(tokens)
    assert got == pytest.approx(want, rel=1e-9)

    n = tokens.size
    with_offset = math.sqrt(
        max(0.0, float(np.sum(tokens**2)) / (n + 1e-8) - (float(np.sum(tokens)) / (n + 1e-8)) ** 2)
    )
    assert abs(with_offset / want - 1) > 1e-6  # what an n + 1e-8 divisor would have logged


def test_row_masked_means_divide_by_the_row_count() -> None:
    """training_log_ppl = mean_i(−Σ old / n_i): no 1e-8 in the per-row divisor."""
    from rcdiag.metrics.analysis import OffPolicyAnalysis

    batch = RaggedBatch(
        rollout=np.array([-1.0, -2.0, -3.0]),
        old=np.array([-1.5, -2.5, -3.5]),
        mask=np.array([True, True, True]),
        offsets=np.array([0, 1, 3]),
        steps=np.array([0, 0]),
    )
    analysis = OffPolicyAnalysis()
    analysis.update(batch)
    overall = analysis.overall()
    assert overall["rollout_corr/training_log_ppl"] == (1.5 + 3.0) / 2
    assert overall["rollout_corr/rollout_log_ppl"] == (1.0 + 2.5) / 2
    assert overall["rollout_corr/kl"] == 0.5
