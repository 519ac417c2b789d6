"""TokenView.capped (the truncated IS sums of one run, from the weights above CAP_FLOOR only)
against the direct sums of min(w, C), including weights of e^20 beside weights near 1."""

from __future__ import annotations

import itertools
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


@pytest.mark.parametrize("holes", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("cap", [CAP_FLOOR, 2.0])
def test_capped_with_no_weight_above_the_floor(holes: float, cap: float) -> None:
    """Every weight ≤ the floor (the usual batch): the sums come from the weights as they are,
    the largest from the rows' maxima, with the invalid positions' 0 when there are any."""
    rng = np.random.default_rng(2)
    rows = [40, 0, 25, 60]
    offsets = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
    mask = rng.random(offsets[-1]) >= holes
    ell = rng.normal(0, 0.01, offsets[-1])
    view = TokenView(
        RaggedBatch(
            rollout=-ell,
            old=np.zeros(ell.size),
            mask=mask,
            offsets=offsets,
            steps=np.zeros(len(rows), dtype=np.int64),
        )
    )
    weights = np.where(mask, np.minimum(np.exp(ell), CAP_FLOOR), 0.0)
    got = view.capped(weights, cap)
    expected = {
        "kept_raw": weights.sum(),
        "kept_applied": weights.sum(),
        "kept_applied_sq": (weights * weights).sum(),
        "kept_applied_max": weights.max(),
    }
    for name, value in expected.items():
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


def _two_pass(values: np.ndarray, offsets: np.ndarray, valid: np.ndarray) -> list[float]:
    """M2 of each row's valid values, summed from the deviations in Python (math.fsum)."""
    out = []
    for start, stop in itertools.pairwise(offsets):
        row = [float(v) for v, ok in zip(values[start:stop], valid[start:stop], strict=True) if ok]
        mean = math.fsum(row) / len(row) if row else 0.0
        out.append(math.fsum((v - mean) ** 2 for v in row))
    return out


@pytest.mark.parametrize(
    ("spread", "holes"),
    [(0.3, False), (1e-3, False), (1e-9, False), (0.0, False), (0.3, True)],
)
def test_token_moments_match_a_two_pass_reference(spread: float, holes: bool) -> None:
    """A wide spread is read from Σx² and Σx; near-equal values (where that difference would lose
    digits) and masked positions are summed from the deviations: both to 1e-8 of M2."""
    rng = np.random.default_rng(7)
    lengths = rng.integers(0, 300, 40)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    tokens = int(offsets[-1])
    values = 1.0 + spread * rng.standard_normal(tokens)
    valid = rng.random(tokens) > 0.2 if holes else np.ones(tokens, dtype=bool)
    batch = RaggedBatch(
        rollout=np.zeros(tokens),
        old=np.zeros(tokens),
        mask=valid,
        offsets=offsets,
        steps=np.zeros(lengths.size, dtype=np.int64),
    )
    view = TokenView(batch)
    spread_out: list[int] = []
    broadcast = view.broadcast

    def counted(per_row: np.ndarray) -> np.ndarray:
        spread_out.append(1)
        return broadcast(per_row)

    view.broadcast = counted  # type: ignore[method-assign]
    moments = view.token_moments(view.valid(values))
    expected = _two_pass(values, offsets, valid)
    assert moments.m2 == pytest.approx(expected, rel=1e-8, abs=1e-300)
    assert moments.n.tolist() == [float(valid[a:b].sum()) for a, b in itertools.pairwise(offsets)]
    assert bool(spread_out) == holes, "with every position valid, rows sum their own deviations"


@pytest.mark.parametrize("bound", [-1e9, -0.5, 0.0, 0.3, 1e9])
@pytest.mark.parametrize("holes", [False, True])
def test_bounded_counts_equal_the_direct_counts(bound: float, holes: bool) -> None:
    """count_above / count_below skip the tokens when no row's extreme passes the bound; either
    way they count the valid positions past it, as count(values > bound) does."""
    rng = np.random.default_rng(7)
    rows = [30, 0, 12, 50]
    offsets = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
    n = int(offsets[-1])
    mask = rng.random(n) > 0.3 if holes else np.ones(n, bool)
    mask[[3, 4]] = True
    values = rng.normal(0, 0.3, n)
    values[30:] = 0.1  # every row but the first lies in (−0.5, 0.3]
    values[[3, 4]] = np.nan, 2.0  # a NaN beside the first row's largest value: itself never counted
    values[~mask] = 5.0  # garbage under the mask is never counted
    old = -rng.exponential(1.0, n)
    view = TokenView(
        RaggedBatch(
            rollout=old - rng.normal(0, 0.3, n),
            old=old,
            mask=mask,
            offsets=offsets,
            steps=np.zeros(len(rows), dtype=np.int64),
        )
    )
    np.testing.assert_array_equal(view.count_above(values, bound), view.count(values > bound))
    np.testing.assert_array_equal(view.count_below(values, bound), view.count(values < bound))


@pytest.mark.parametrize("holes", [False, True])
def test_k2_row_maxima_from_the_analysis_equal_the_token_maxima(holes: bool) -> None:
    """max ½ℓ² per row read off the analysis's largest |ℓ| is the very number the token array
    gives: ℓ of either sign, zeros, subnormals, values near the clamp, masked holes, empty rows."""
    from rcdiag.correction.rejection import divergence, divergence_row_max
    from rcdiag.metrics.offpolicy import row_statistics

    rng = np.random.default_rng(7)
    rows = [30, 0, 1, 50, 7, 0, 12]
    offsets = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
    ell = rng.normal(0, 1, offsets[-1]) * 10 ** rng.uniform(-320, 1.2, offsets[-1])
    ell[[0, 3, 40]] = [-19.99, 0.0, -5e-324]
    mask = rng.random(ell.size) > 0.3 if holes else np.ones(ell.size, bool)
    batch = RaggedBatch(
        rollout=np.zeros(ell.size),
        old=ell,
        mask=mask,
        offsets=offsets,
        steps=np.zeros(len(rows), dtype=np.int64),
    )
    shared = TokenView(batch, row_statistics(batch, batch.log_ratio, 1e-4))
    alone = TokenView(batch)
    from_rows = divergence_row_max(shared, "k2")
    from_tokens = alone.valid_max(divergence(alone, "k2"))
    assert "divergence" not in {key[0] for key in shared._memo}  # no token array was made
    assert from_rows.tolist() == from_tokens.tolist()
