"""TokenView.capped (the truncated IS sums of one run, from the weights above CAP_FLOOR only)
against the direct sums of min(w, C), including weights of e^20 beside weights near 1."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rcdiag.correction.view import CAP_FLOOR, TokenView
from rcdiag.metrics.ragged import RaggedBatch


def view_of(rows: list[int], steps: list[int], rng: np.random.Generator) -> TokenView:
    offsets = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
    old = -rng.exponential(1.0, offsets[-1])
    return TokenView(
        RaggedBatch(
            rollout=old - rng.normal(0, 0.3, old.size),
            old=old,
            mask=np.ones(old.size, bool),
            offsets=offsets,
            steps=np.array(steps, dtype=np.int64),
        )
    )


@pytest.mark.parametrize("cap", [CAP_FLOOR, 1.5, 2.0, 10.0, 1e9])
def test_capped_equals_the_direct_sums(cap: float) -> None:
    rng = np.random.default_rng(1)
    view = view_of([40, 25, 60], [3, 3, 3], rng)
    weights = np.exp(rng.normal(0, 0.4, 125))
    weights[[5, 70]] = math.exp(20.0), 0.0  # a clamped catastrophic weight, an invalid position
    got = view.capped(weights, cap)
    applied = np.minimum(weights, cap)
    expected = {
        "kept_raw": weights.sum(),
        "kept_applied": applied.sum(),
        "kept_applied_sq": (applied * applied).sum(),
        "kept_applied_max": applied.max(),
    }
    for name, value in expected.items():
        assert got[name].shape == (1,)
        assert got[name][0] == pytest.approx(value, rel=1e-13), name


def test_capped_without_tokens_has_no_maximum() -> None:
    view = view_of([0], [0], np.random.default_rng(0))
    got = view.capped(np.zeros(0), 2.0)
    assert got["kept_applied"][0] == 0.0 and got["kept_applied_max"][0] == -math.inf


@pytest.mark.parametrize(("steps", "cap"), [([1, 2], 2.0), ([1, 1], 1.05)])
def test_capped_refuses_what_it_cannot_answer(steps: list[int], cap: float) -> None:
    view = view_of([3, 4], steps, np.random.default_rng(0))
    with pytest.raises(ValueError, match="one run"):
        view.capped(np.ones(7), cap)
