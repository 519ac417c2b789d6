"""Pins the rollout-correction oracle (tests/reference_correction.py) itself.

The oracle is what rcdiag's correction engine is tested against, so it must first be shown right:
* verl's own unit tests (verl's tests) reproduced by hand;
* small cases computed by hand for each rule docs/correction.md states (IS metrics from W vs R, batch-norm
  denominators, the inverted k1 bounds, SEED geometric RS, the veto, empty rows);
* every validation error verl raises;
* agreement of its 13 off-policy metrics with the other independent reference (tests/reference.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from reference import VERL_NAMES, reference_metrics
from reference_correction import (
    IS_METRIC_SUFFIXES,
    OFFPOLICY_NAMES,
    RS_LEGACY_METRIC_SUFFIXES,
    RS_OPTION_METRIC_SUFFIXES,
    RS_OPTIONS_LATEST,
    VETO_NAMES,
    reference_correction,
)

P = "rollout_corr/"
RTOL = 1e-7


def from_log_ratios(rows: list[list[float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Padded (old, rollout, mask) with ℓ = old − rollout exactly the given values (rollout = 0)."""
    width = max(len(r) for r in rows)
    old = np.full((len(rows), width), np.nan)  # garbage under the mask must never be read
    rollout = np.full((len(rows), width), np.nan)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, row in enumerate(rows):
        old[i, : len(row)] = row
        rollout[i, : len(row)] = 0.0
        mask[i, : len(row)] = 1
    return old, rollout, mask


def from_ratios(rows: list[list[float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return from_log_ratios([[math.log(x) for x in row] for row in rows])


def random_batch(seed: int, batch: int = 6, width: int = 9, scale: float = 0.4):
    rng = np.random.default_rng(seed)
    rollout = -rng.exponential(1.0, size=(batch, width))
    old = rollout + rng.normal(0.0, scale, size=(batch, width))
    lengths = rng.integers(1, width + 1, size=batch)
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
    old[mask == 0] = np.nan
    return old, rollout, mask


def approx(x: float) -> object:
    return pytest.approx(x, rel=RTOL, abs=1e-12)


# -----------------------------------------------------------------------------------------------
# verl's tests: verl's tests/trainer/ppo/test_rollout_corr.py, by hand
# -----------------------------------------------------------------------------------------------


def test_icepop_token_level_verl_case():
    old, rollout, mask = from_ratios([[0.4, 0.8, 6.0]])
    cfg = {"rollout_is": "token", "rollout_is_threshold": "0.5_5.0"}
    w, new_mask, m = reference_correction(old, rollout, mask, cfg, "latest")
    assert w is not None
    np.testing.assert_allclose(w, [[0.0, 0.8, 0.0]], rtol=1e-12, atol=0)
    np.testing.assert_array_equal(new_mask, mask)  # IcePop never touches the mask
    assert m[P + "rollout_is_oob_ratio"] == approx(2 / 3)
    assert m[P + "rollout_is_std"] == pytest.approx(0.3771236, abs=1e-7)
    assert m[P + "rollout_is_eff_sample_size"] == approx(1 / 3)
    # applied-weight metrics (NEWEST): mean/max/min of W, fractions from R against [lo, hi]
    assert m[P + "rollout_is_mean"] == approx(0.8 / 3)
    assert m[P + "rollout_is_max"] == approx(0.8)
    assert m[P + "rollout_is_min"] == 0.0
    assert m[P + "rollout_is_ratio_fraction_high"] == approx(1 / 3)  # 6.0 > 5.0
    assert m[P + "rollout_is_ratio_fraction_low"] == approx(1 / 3)  # 0.4 < 0.5
    assert P + "rollout_is_batch_norm_factor" not in m


def test_token_is_with_token_k1_verl_case():
    old, rollout, mask = from_log_ratios([[-1.0, -1.0], [0.5, 0.5]])
    cfg = {
        "rollout_is": "token",
        "rollout_is_threshold": 2.0,
        "rollout_rs": "token_k1",
        "rollout_rs_threshold": "0.5_2.0",
    }
    w, new_mask, m = reference_correction(old, rollout, mask, cfg, "latest")
    assert w is not None
    np.testing.assert_allclose(w[0], [math.exp(-1)] * 2, rtol=1e-12)  # ≈ 0.368, RS leaves W alone
    np.testing.assert_allclose(w[1], [math.exp(0.5)] * 2, rtol=1e-12)  # ≈ 1.649
    np.testing.assert_array_equal(new_mask, [[0, 0], [1, 1]])  # row 0: k1 = 1 > log 2
    assert m[P + "rollout_rs_token_k1_masked_fraction"] == approx(0.5)
    assert m[P + "rollout_rs_masked_fraction"] == approx(0.5)
    assert m[P + "rollout_rs_seq_masked_fraction"] == 0.5


def test_seq_fraction_high_uses_raw_row_means():
    old, rollout, mask = from_ratios([[3.0, 3.0], [1.0, 1.0]])
    cfg = {"rollout_is": "token", "rollout_is_threshold": 2.0}
    _, _, latest = reference_correction(old, rollout, mask, cfg, "latest")
    _, _, legacy = reference_correction(old, rollout, mask, cfg, "legacy")
    assert latest[P + "rollout_is_seq_fraction_high"] == 0.5  # raw mean 3 > 2 …
    assert latest[P + "rollout_is_seq_max"] == approx(2.0)  # … although the applied mean is 2
    assert legacy[P + "rollout_is_seq_fraction_high"] == 0.5
    assert legacy[P + "rollout_is_seq_max"] == approx(3.0)  # SEED: from R


def test_chained_token_k1_seq_max_k3_verl_case():
    # token_k1 "0.4_1.8" keeps ρ ∈ [1/1.8, 1/0.4] = [0.5556, 2.5] (inverted bounds, docs/correction.md)
    rows = [[1.0, 2.2], [1.0, 0.45], [1.0, 10.0], [0.58, 1.0]]
    old, rollout, mask = from_ratios(rows)
    cfg = {"rollout_rs": "token_k1,seq_max_k3", "rollout_rs_threshold": "0.4_1.8,3.0"}
    w, new_mask, m = reference_correction(old, rollout, mask, cfg, "latest")
    assert w is None
    # ρ = 2.2 (> 1.8) and 0.58 (< 0.6) are kept, ρ = 0.45 (≥ 0.4) is rejected;
    # row 2 falls whole: max k3 = k3(10) = 9 − ln 10 > 3
    np.testing.assert_array_equal(new_mask, [[1, 1], [1, 0], [0, 0], [1, 1]])
    assert m[P + "rollout_rs_token_k1_masked_fraction"] == approx(2 / 8)
    assert m[P + "rollout_rs_seq_max_k3_masked_fraction"] == approx(2 / 8)
    assert m[P + "rollout_rs_masked_fraction"] == approx(3 / 8)
    assert m[P + "rollout_rs_token_k1_seq_masked_fraction"] == 0.5
    assert m[P + "rollout_rs_seq_max_k3_seq_masked_fraction"] == 0.25
    assert m[P + "rollout_rs_seq_masked_fraction"] == 0.5
    # k1 = −log ρ: > log 1.8 only for ρ = 0.45; < log 0.4 only for ρ = 10
    assert m[P + "rollout_rs_token_k1_fraction_high"] == approx(1 / 8)
    assert m[P + "rollout_rs_token_k1_fraction_low"] == approx(1 / 8)
    assert m[P + "rollout_rs_token_k1_max"] == approx(-math.log(0.45))
    assert m[P + "rollout_rs_token_k1_min"] == approx(-math.log(10.0))
    k3 = [max(x - 1 - math.log(x) for x in row) for row in rows]
    assert m[P + "rollout_rs_seq_max_k3_max"] == approx(max(k3))
    assert m[P + "rollout_rs_seq_max_k3_min"] == approx(min(k3))
    assert m[P + "rollout_rs_seq_max_k3_fraction_high"] == 0.25
    assert m[P + "rollout_rs_seq_max_k3_fraction_low"] == 0.0  # k2/k3: always 0.0
    assert m[P + "rollout_rs_seq_max_k3_seq_mean"] == approx(sum(k3) / 4)
    assert m[P + "rollout_rs_seq_max_k3_seq_max_deviation"] == approx(max(k3))
    assert P + "rollout_rs_token_k1_seq_fraction_low" in m
    assert P + "rollout_rs_seq_max_k3_seq_fraction_low" not in m


def test_token_weights_never_exceed_threshold():
    for seed in range(5):
        old, rollout, mask = random_batch(seed, scale=1.5)
        w, new_mask, _ = reference_correction(
            old, rollout, mask, {"rollout_is": "token", "rollout_is_threshold": 1.5}, "latest"
        )
        assert w is not None
        assert (w <= 1.5).all()
        assert (w[mask == 0] == 0).all()
        np.testing.assert_array_equal(new_mask, mask)


def test_sequence_weights_constant_per_row():
    old, rollout, mask = random_batch(3)
    w, _, _ = reference_correction(old, rollout, mask, {"rollout_is": "sequence"}, "latest")
    assert w is not None
    for i in range(mask.shape[0]):
        valid = w[i][mask[i] == 1]
        assert (valid == valid[0]).all()
        ell_sum = math.fsum(old[i][mask[i] == 1] - rollout[i][mask[i] == 1])
        assert valid[0] == approx(min(math.exp(ell_sum), 2.0))


def test_bool_is_threshold_is_a_type_error():
    old, rollout, mask = from_ratios([[1.0]])
    for dialect in ("latest", "legacy"):
        with pytest.raises(TypeError, match="boolean"):
            reference_correction(
                old, rollout, mask, {"rollout_is": "token", "rollout_is_threshold": True}, dialect
            )


def test_disabled_returns_no_weights_original_mask_and_offpolicy_metrics():
    old, rollout, mask = random_batch(4)
    w, new_mask, m = reference_correction(old, rollout, mask, {}, "latest")
    assert w is None
    np.testing.assert_array_equal(new_mask, mask)
    assert sorted(m) == sorted(P + name for name in OFFPOLICY_NAMES)
    _, _, legacy = reference_correction(old, rollout, mask, {}, "legacy")
    assert sorted(legacy) == sorted([P + n for n in OFFPOLICY_NAMES] + [P + n for n in VETO_NAMES])
    assert legacy[P + "rollout_is_veto_fraction"] == 0.0
    assert legacy[P + "rollout_is_catastrophic_token_fraction"] == 0.0
    # rollout_is set but threshold null → IS skipped (verl's `rollout_is and threshold` guard)
    w, _, m = reference_correction(
        old, rollout, mask, {"rollout_is": "token", "rollout_is_threshold": None}, "latest"
    )
    assert w is None and P + "rollout_is_mean" not in m


@pytest.mark.parametrize("option", RS_OPTIONS_LATEST)
def test_every_rs_option_yields_its_metrics(option: str):
    old, rollout, mask = random_batch(5)
    threshold = "0.5_2.0" if option.endswith("k1") else 0.05
    _, new_mask, m = reference_correction(
        old, rollout, mask, {"rollout_rs": option, "rollout_rs_threshold": threshold}, "latest"
    )
    expected = {f"{P}rollout_rs_{option}_{s}" for s in RS_OPTION_METRIC_SUFFIXES}
    if option.endswith("k1"):
        expected.add(f"{P}rollout_rs_{option}_seq_fraction_low")
    expected |= {P + "rollout_rs_masked_fraction", P + "rollout_rs_seq_masked_fraction"}
    expected |= {P + name for name in OFFPOLICY_NAMES}
    assert set(m) == expected
    assert ((new_mask == 0) | (mask == 1)).all()  # RS only removes tokens


def test_token_is_metric_names():
    old, rollout, mask = random_batch(6)
    _, _, m = reference_correction(old, rollout, mask, {"rollout_is": "token"}, "latest")
    assert {P + "rollout_is_" + s for s in IS_METRIC_SUFFIXES} <= set(m)
    assert P + "rollout_is_oob_ratio" not in m


# -----------------------------------------------------------------------------------------------
# hand-computed cases: IS
# -----------------------------------------------------------------------------------------------


def test_is_metrics_latest_from_applied_legacy_from_raw():
    old, rollout, mask = from_ratios([[4.0, 0.25]])
    cfg = {"rollout_is": "token", "rollout_is_threshold": 2.0}
    w_new, _, new = reference_correction(old, rollout, mask, cfg, "latest")
    w_old, _, old_m = reference_correction(old, rollout, mask, cfg, "legacy")
    assert w_new is not None and w_old is not None
    np.testing.assert_allclose(w_new, [[2.0, 0.25]], rtol=1e-12)
    np.testing.assert_allclose(w_old, w_new, rtol=0)  # the weights are the same in both
    den = 2  # Σm + 1e-8 evaluated in float32, as torch does for an int mask
    assert new[P + "rollout_is_mean"] == approx(2.25 / den)
    assert old_m[P + "rollout_is_mean"] == approx(4.25 / den)
    assert new[P + "rollout_is_max"] == 2.0 and old_m[P + "rollout_is_max"] == approx(4.0)
    # std: NEWEST clamps W to [0, C] → {2, 0.25}; SEED clamps R to [1/C, C] → {2, 0.5}
    assert new[P + "rollout_is_std"] == approx(math.sqrt(4.0625 / den - (2.25 / den) ** 2))
    assert old_m[P + "rollout_is_std"] == approx(math.sqrt(4.25 / den - (2.5 / den) ** 2))
    ess_x = [2.0, 0.5]
    xbar = sum(ess_x) / den
    assert old_m[P + "rollout_is_eff_sample_size"] == approx(
        1.0 / (sum((x / (xbar + 1e-8)) ** 2 for x in ess_x) / den)
    )
    # fractions come from R in both dialects: 4 > 2, 0.25 < 0.5
    for m in (new, old_m):
        assert m[P + "rollout_is_ratio_fraction_high"] == approx(1 / den)
        assert m[P + "rollout_is_ratio_fraction_low"] == approx(1 / den)


def test_sequence_is_metrics_read_raw_sums_over_all_rows():
    # row 0: S = 30 (weight capped by the ±20 clamp, max capped at e^20); row 1: S = −800
    # (min underflows to exactly 0); row 2: empty (S = 0 counts in max/min/fractions/seq_*).
    old, rollout, mask = from_log_ratios([[10.0, 20.0], [-400.0, -400.0], []])
    mask[2, :] = 0
    w, _, m = reference_correction(old, rollout, mask, {"rollout_is": "sequence"}, "latest")
    assert w is not None
    np.testing.assert_allclose(
        w, [[2.0, 2.0], [math.exp(-20), math.exp(-20)], [0.0, 0.0]], rtol=1e-12
    )
    assert m[P + "rollout_is_max"] == approx(math.exp(20.0))
    assert m[P + "rollout_is_min"] == 0.0
    assert m[P + "rollout_is_ratio_fraction_high"] == approx(1 / 3)  # plain row mean, no eps
    assert m[P + "rollout_is_ratio_fraction_low"] == approx(1 / 3)
    s = [2.0 * 2 / 2, math.exp(-20) * 2 / 2, 0.0]
    assert m[P + "rollout_is_seq_mean"] == approx(sum(s) / 3)
    assert m[P + "rollout_is_seq_min"] == 0.0  # the empty row
    assert m[P + "rollout_is_seq_max_deviation"] == approx(1.0)
    # r_i = e^20, e^-20, 0: one above C, two below 1/C (the empty row included)
    assert m[P + "rollout_is_seq_fraction_high"] == approx(1 / 3)
    assert m[P + "rollout_is_seq_fraction_low"] == approx(2 / 3)


def test_sequence_batch_norm_denominators_differ_by_dialect():
    old, rollout, mask = from_log_ratios([[0.1, 0.1], [-0.3], []])
    mask[2, :] = 0
    cfg = {"rollout_is": "sequence", "rollout_is_batch_normalize": True}
    s0 = math.exp(0.2) * 2 / 2
    s1 = math.exp(-0.3) * 1 / 1
    expected = {"latest": (s0 + s1) / 2, "legacy": (s0 + s1) / 3}
    for dialect, mu in expected.items():
        w, _, m = reference_correction(old, rollout, mask, cfg, dialect)
        assert w is not None
        assert m[P + "rollout_is_batch_norm_factor"] == approx(mu)
        np.testing.assert_allclose(
            w, [[math.exp(0.2) / mu] * 2, [math.exp(-0.3) / mu, 0.0], [0.0, 0.0]], rtol=1e-12
        )
        # metrics are taken before normalisation
        assert m[P + "rollout_is_mean"] == approx((2 * math.exp(0.2) + math.exp(-0.3)) / 3)


def test_token_batch_norm_and_zero_mean_factor():
    old, rollout, mask = from_ratios([[1.5, 0.5, 1.0]])
    w, _, m = reference_correction(
        old, rollout, mask, {"rollout_is": "token", "rollout_is_batch_normalize": True}, "latest"
    )
    mu = 3.0 / 3
    assert m[P + "rollout_is_batch_norm_factor"] == approx(mu)
    assert w is not None
    np.testing.assert_allclose(w, [[1.5 / mu, 0.5 / mu, 1.0 / mu]], rtol=1e-12)
    # IcePop zeroing everything: μ = 0 ≤ 1e-8 → factor 1.0, weights unchanged (all 0)
    old, rollout, mask = from_ratios([[9.0, 0.1]])
    cfg = {
        "rollout_is": "token",
        "rollout_is_threshold": "0.5_5.0",
        "rollout_is_batch_normalize": True,
    }
    w, _, m = reference_correction(old, rollout, mask, cfg, "latest")
    assert w is not None and (w == 0).all()
    assert m[P + "rollout_is_batch_norm_factor"] == 1.0
    assert m[P + "rollout_is_eff_sample_size"] == math.inf  # verl: ZeroDivisionError


def test_threshold_spellings_agree():
    old, rollout, mask = random_batch(7, scale=1.0)
    runs = [
        reference_correction(
            old, rollout, mask, {"rollout_is": "token", "rollout_is_threshold": t}, "latest"
        )
        for t in (2.0, 2, "2.0", " 2 ")
    ]
    for w, _, m in runs[1:]:
        np.testing.assert_array_equal(w, runs[0][0])
        assert m == runs[0][2]
    # RS: a bare number for k1 means lo = 1/x; one threshold broadcasts to every option
    a = reference_correction(
        old,
        rollout,
        mask,
        {"rollout_rs": "token_k1,seq_mean_k1", "rollout_rs_threshold": 2.0},
        "latest",
    )
    b = reference_correction(
        old,
        rollout,
        mask,
        {
            "rollout_rs": " token_k1 , seq_mean_k1,token_k1,",
            "rollout_rs_threshold": "0.5_2.0,0.5_2.0",
        },
        "latest",
    )
    np.testing.assert_array_equal(a[1], b[1])
    assert a[2] == b[2]


def test_single_valid_token_and_single_row():
    old, rollout, mask = from_ratios([[3.0]])
    _, _, m = reference_correction(
        old,
        rollout,
        mask,
        {"rollout_is": "token", "rollout_rs": "token_k2", "rollout_rs_threshold": 0.1},
        "latest",
    )
    assert m[P + "rollout_is_std"] == 0.0
    assert m[P + "rollout_is_seq_std"] == 0.0
    assert m[P + "rollout_rs_token_k2_std"] == 0.0
    assert m[P + "rollout_rs_token_k2_seq_std"] == 0.0


def test_garbage_under_mask_and_padding_width_are_ignored():
    old, rollout, mask = random_batch(8)
    cfg = {
        "rollout_is": "sequence",
        "rollout_is_batch_normalize": True,
        "rollout_rs": "seq_sum_k1,token_k3",
        "rollout_rs_threshold": "0.3_4.0,0.5",
    }
    w, new_mask, m = reference_correction(old, rollout, mask, cfg, "latest")
    wide = [
        np.concatenate([a, np.full((a.shape[0], 3), fill)], axis=1)
        for a, fill in ((old, np.inf), (rollout, -np.inf))
    ]
    wide_mask = np.concatenate([mask, np.zeros((mask.shape[0], 3), np.int64)], axis=1)
    w2, new_mask2, m2 = reference_correction(wide[0], wide[1], wide_mask, cfg, "latest")
    assert w is not None and w2 is not None
    np.testing.assert_array_equal(w2[:, : w.shape[1]], w)
    assert (w2[:, w.shape[1] :] == 0).all()
    np.testing.assert_array_equal(new_mask2[:, : new_mask.shape[1]], new_mask)
    assert m2 == m


# -----------------------------------------------------------------------------------------------
# hand-computed cases: NEWEST RS
# -----------------------------------------------------------------------------------------------


def test_seq_options_exclude_empty_rows_but_overall_seq_fraction_includes_them():
    old, rollout, mask = from_log_ratios([[0.5, 0.5], [0.0, 0.01], []])
    mask[2, :] = 0
    cfg = {"rollout_rs": "seq_sum_k2", "rollout_rs_threshold": 0.2}
    _, new_mask, m = reference_correction(old, rollout, mask, cfg, "latest")
    # row 0: Σ ½ℓ² = 0.25 > 0.2 → rejected; row 1: 0.00005 kept
    np.testing.assert_array_equal(new_mask, [[0, 0], [1, 1], [0, 0]])
    assert m[P + "rollout_rs_seq_sum_k2_seq_masked_fraction"] == 0.5  # ÷ rows with valid tokens
    assert m[P + "rollout_rs_seq_masked_fraction"] == approx(1 / 3)  # ÷ all B rows
    assert m[P + "rollout_rs_seq_sum_k2_seq_mean"] == approx((0.25 + 0.00005) / 2)
    assert m[P + "rollout_rs_seq_sum_k2_max"] == approx(0.25)
    assert m[P + "rollout_rs_seq_sum_k2_min"] == approx(0.00005)
    assert m[P + "rollout_rs_seq_sum_k2_fraction_high"] == 0.5
    # mean is token-weighted over the broadcast row statistic
    assert m[P + "rollout_rs_seq_sum_k2_mean"] == approx((2 * 0.25 + 2 * 0.00005) / 4)
    # std: pooled std of clamp(s_t, 0, 0.2) = {0.2, 0.2, 0.00005, 0.00005}
    c = [0.2, 0.2, 0.00005, 0.00005]
    mean_c = sum(c) / 4
    assert m[P + "rollout_rs_seq_sum_k2_std"] == approx(
        math.sqrt(sum(x * x for x in c) / 4 - mean_c**2)
    )
    assert m[P + "rollout_rs_masked_fraction"] == approx(2 / 4)


def test_seq_mean_k1_asymmetric_bounds_act_on_rollout_over_train():
    # "0.6_1.6": keep 1/1.6 ≤ geometric-mean ρ ≤ 1/0.6 = 1.667, i.e. ρ ∈ [0.625, 1.667]
    rows = [[math.log(1.65)] * 2, [math.log(0.61)] * 2, [math.log(1.62)], [math.log(0.63)]]
    old, rollout, mask = from_log_ratios(rows)
    cfg = {"rollout_rs": "seq_mean_k1", "rollout_rs_threshold": "0.6_1.6"}
    _, new_mask, m = reference_correction(old, rollout, mask, cfg, "latest")
    np.testing.assert_array_equal(new_mask, [[1, 1], [0, 0], [1, 0], [1, 0]])
    lo, hi = math.log(0.6), math.log(1.6)
    v = [-math.log(1.65) * 2 / 2, -math.log(0.61) * 2 / 2]
    v += [-math.log(1.62) / 1, -math.log(0.63) / 1]
    assert m[P + "rollout_rs_seq_mean_k1_seq_fraction_high"] == 0.25  # 0.61 → k1 = 0.494 > log 1.6
    assert m[P + "rollout_rs_seq_mean_k1_seq_fraction_low"] == 0.0  # −log 1.65 = −0.5 ≥ log 0.6
    assert m[P + "rollout_rs_seq_mean_k1_seq_max_deviation"] == approx(max(abs(x) for x in v))
    clamped = [min(max(x, lo), hi) for x in (v[0], v[0], v[1], v[1], v[2], v[3])]
    mean_c = sum(clamped) / 6
    assert m[P + "rollout_rs_seq_mean_k1_std"] == approx(
        math.sqrt(sum(x * x for x in clamped) / 6 - mean_c**2)
    )


# -----------------------------------------------------------------------------------------------
# hand-computed cases: SEED RS and veto
# -----------------------------------------------------------------------------------------------


def _legacy_geometric_batch():
    rows = [
        [0.0005, -0.0005, 0.0],  # mean 0 → ratio 1: kept
        [0.01, 0.01],  # ratio e^0.01 > 1.001: rejected
        [-0.002],  # ratio e^-0.002 < 1/1.001: rejected
        [],  # empty: ratio exp(0) = 1, keep flag 1
        [-10.0, 10.0, 0.0],  # mean 0: kept by RS, but −10 < log 1e-4 → vetoed
    ]
    old, rollout, mask = from_log_ratios(rows)
    mask[3, :] = 0
    return old, rollout, mask


def test_legacy_geometric_rs_by_hand():
    old, rollout, mask = _legacy_geometric_batch()
    cfg = {"rollout_rs": "geometric", "rollout_rs_threshold": 1.001}
    w, new_mask, m = reference_correction(old, rollout, mask, cfg, "legacy")
    assert w is None
    expected_mask = np.zeros_like(mask)
    expected_mask[0, :3] = 1
    expected_mask[4, :3] = 1
    np.testing.assert_array_equal(new_mask, expected_mask)
    assert set(m) == (
        {f"{P}rollout_rs_{s}" for s in RS_LEGACY_METRIC_SUFFIXES}
        | {P + n for n in OFFPOLICY_NAMES}
        | {P + n for n in VETO_NAMES}
    )
    v = 9  # Σm + 1e-8 evaluated in float32
    g = [0.0, 0.02 / 2, -0.002 / 1, 0.0, 0.0]  # masked mean ℓ (row 0 ≈ 0)
    assert m[P + "rollout_rs_masked_fraction"] == approx(3 / v)
    assert m[P + "rollout_rs_seq_masked_fraction"] == approx(2 / 5)  # column-0 flags, ALL rows
    assert m[P + "rollout_rs_max"] == approx(math.exp(g[1]))
    assert m[P + "rollout_rs_min"] == approx(math.exp(g[2]))
    assert m[P + "rollout_rs_ratio_fraction_high"] == approx(1 / 5)
    assert m[P + "rollout_rs_ratio_fraction_low"] == approx(1 / 5)
    # row means of the ratio over ALL rows: the empty row's 0 is < L and 1 away from 1
    assert m[P + "rollout_rs_seq_fraction_low"] == approx(2 / 5)
    assert m[P + "rollout_rs_seq_fraction_high"] == approx(1 / 5)
    assert m[P + "rollout_rs_seq_max_deviation"] == approx(1.0)
    assert m[P + "rollout_rs_seq_min"] == 0.0
    assert m[P + "rollout_rs_mean"] == approx((3 * 1 + 2 * math.exp(g[1]) + math.exp(g[2]) + 3) / v)
    assert m[P + "rollout_is_veto_fraction"] == 0.0


def test_legacy_veto_by_hand():
    old, rollout, mask = _legacy_geometric_batch()
    cfg = {
        "rollout_rs": "geometric",
        "rollout_rs_threshold": 1.001,
        "rollout_token_veto_threshold": 1e-4,
    }
    _, new_mask, m = reference_correction(old, rollout, mask, cfg, "legacy")
    expected_mask = np.zeros_like(mask)
    expected_mask[0, :3] = 1  # row 4 is now vetoed too
    np.testing.assert_array_equal(new_mask, expected_mask)
    assert m[P + "rollout_is_veto_fraction"] == approx(1 / 5)
    assert m[P + "rollout_is_catastrophic_token_fraction"] == approx(1 / 9)
    # RS metrics do not see the veto
    assert m[P + "rollout_rs_masked_fraction"] == approx(3 / 9)
    # veto alone (no RS): same rows, the raw ℓ with no clamp
    _, veto_only, m2 = reference_correction(
        old, rollout, mask, {"rollout_token_veto_threshold": 1e-4}, "legacy"
    )
    expected_mask = mask.copy()
    expected_mask[4, :] = 0
    np.testing.assert_array_equal(veto_only, expected_mask)
    assert not any(k.startswith(P + "rollout_rs_") for k in m2)


def test_legacy_token_and_sequence_rs_with_lower_bound():
    old, rollout, mask = from_ratios([[1.5, 0.3, 1.0], [2.5, 1.0, 1.0]])
    cfg = {"rollout_rs": "token", "rollout_rs_threshold": 2.0, "rollout_rs_threshold_lower": 0.4}
    _, new_mask, m = reference_correction(old, rollout, mask, cfg, "legacy")
    np.testing.assert_array_equal(new_mask, [[1, 0, 1], [0, 1, 1]])
    assert m[P + "rollout_rs_seq_masked_fraction"] == 1.0
    assert m[P + "rollout_rs_masked_fraction"] == approx(2 / 6)
    xs = [1.5, 0.4, 1.0, 2.0, 1.0, 1.0]  # clamp to [L, U] for std / ESS
    mean_x = sum(xs) / 6
    assert m[P + "rollout_rs_std"] == approx(math.sqrt(sum(x * x for x in xs) / 6 - mean_x**2))
    # sequence: ∏ρ = 0.45 and 2.5; L = 0 (preset seq_mis) keeps 0.45, U = 2 rejects 2.5
    cfg = {"rollout_rs": "sequence", "rollout_rs_threshold": 2.0, "rollout_rs_threshold_lower": 0.0}
    _, new_mask, m = reference_correction(old, rollout, mask, cfg, "legacy")
    np.testing.assert_array_equal(new_mask, [[1, 1, 1], [0, 0, 0]])
    assert m[P + "rollout_rs_ratio_fraction_low"] == 0.0  # log 0 = −inf
    assert m[P + "rollout_rs_seq_masked_fraction"] == 0.5


# -----------------------------------------------------------------------------------------------
# the 13 off-policy metrics against the other independent reference
# -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_offpolicy_metrics_match_tests_reference(seed: int):
    old, rollout, mask = random_batch(seed, batch=7, width=6, scale=2.0)
    mask[seed % 7, :] = 0  # an empty row
    mask[(seed + 1) % 7, 0] = 1
    old = np.where(mask == 1, np.nan_to_num(old, nan=-0.5), old)
    _, _, m = reference_correction(old, rollout, mask, {}, "latest")
    other = reference_metrics(rollout, old, mask, dialect="latest")
    for name in VERL_NAMES:
        expected = other[name]
        assert m[name] == pytest.approx(expected, rel=1e-12, abs=1e-15), name


# -----------------------------------------------------------------------------------------------
# validation (docs/presets.md)
# -----------------------------------------------------------------------------------------------

OK = from_ratios([[1.2, 0.9], [1.0, 1.1]])


@pytest.mark.parametrize(
    ("dialect", "config", "error", "match"),
    [
        ("latest", {"rollout_is": "geometric"}, ValueError, "Invalid rollout_is"),
        ("legacy", {"rollout_is": "tokens"}, ValueError, "Invalid rollout_is"),
        (
            "latest",
            {"rollout_is": "token", "rollout_is_threshold": 0},
            ValueError,
            "must be positive",
        ),
        ("latest", {"rollout_is": "token", "rollout_is_threshold": -2.0}, ValueError, "positive"),
        (
            "latest",
            {"rollout_is": "token", "rollout_is_threshold": "abc"},
            ValueError,
            "Invalid rollout_is_threshold",
        ),
        (
            "latest",
            {"rollout_is": "token", "rollout_is_threshold": "0.5_x"},
            ValueError,
            "Invalid rollout_is_threshold",
        ),
        ("latest", {"rollout_is": "token", "rollout_is_threshold": "  "}, ValueError, "empty"),
        (
            "latest",
            {"rollout_is": "token", "rollout_is_threshold": "5.0_0.5"},
            ValueError,
            "lower bound must be <=",
        ),
        (
            "latest",
            {"rollout_is": "token", "rollout_is_threshold": "0_5.0"},
            ValueError,
            "lower bound must be positive",
        ),
        (
            "latest",
            {"rollout_is": "token", "rollout_is_threshold": [2.0]},
            TypeError,
            "rollout_is_threshold",
        ),
        (
            "legacy",
            {"rollout_is": "token", "rollout_is_threshold": 0.0},
            ValueError,
            "must be positive",
        ),
        ("legacy", {"rollout_is": "token", "rollout_is_threshold": "2.0"}, TypeError, "legacy"),
        (
            "latest",
            {"rollout_rs": "token_k1"},
            ValueError,
            "rollout_rs_threshold must be explicitly provided",
        ),
        (
            "legacy",
            {"rollout_rs": "geometric"},
            ValueError,
            "rollout_rs_threshold must be explicitly provided",
        ),
        (
            "latest",
            {"rollout_rs": "token_k4", "rollout_rs_threshold": 2.0},
            ValueError,
            "Invalid rollout_rs option",
        ),
        (
            "latest",
            {"rollout_rs": "seq_max_k1", "rollout_rs_threshold": 2.0},
            ValueError,
            "Invalid rollout_rs option",
        ),
        (
            "latest",
            {"rollout_rs": "geometric", "rollout_rs_threshold": 2.0},
            ValueError,
            "Invalid rollout_rs option",
        ),
        (
            "latest",
            {"rollout_rs": " , ", "rollout_rs_threshold": 2.0},
            ValueError,
            "at least one valid option",
        ),
        (
            "latest",
            {"rollout_rs": ["token_k1"], "rollout_rs_threshold": 2.0},
            ValueError,
            "non-empty string",
        ),
        (
            "latest",
            {"rollout_rs": "token_k1", "rollout_rs_threshold": " ,"},
            ValueError,
            "at least one threshold",
        ),
        (
            "latest",
            {"rollout_rs": "token_k1,seq_max_k3", "rollout_rs_threshold": "0.5_2,3,4"},
            ValueError,
            "expects either one threshold",
        ),
        (
            "latest",
            {"rollout_rs": "token_k1,token_k1", "rollout_rs_threshold": "0.5_2,0.5_2"},
            ValueError,
            "expects either one threshold",
        ),
        (
            "latest",
            {"rollout_rs": "token_k1", "rollout_rs_threshold": "2.0_0.5"},
            ValueError,
            "lower bound must be <=",
        ),
        (
            "latest",
            {"rollout_rs": "token_k1", "rollout_rs_threshold": "abc"},
            ValueError,
            "Invalid numeric threshold",
        ),
        (
            "latest",
            {"rollout_rs": "token_k1", "rollout_rs_threshold": "0"},
            ValueError,
            "must be positive",
        ),
        (
            "latest",
            {"rollout_rs": "seq_sum_k1", "rollout_rs_threshold": "0_2"},
            ValueError,
            "must be positive",
        ),
        (
            "latest",
            {"rollout_rs": "seq_mean_k1", "rollout_rs_threshold": -2.0},
            ValueError,
            "must be positive",
        ),
        (
            "latest",
            {"rollout_rs": "seq_max_k2", "rollout_rs_threshold": "0.5_2.0"},
            ValueError,
            "single upper bound",
        ),
        (
            "latest",
            {"rollout_rs": "token_k3", "rollout_rs_threshold": "x"},
            ValueError,
            "Invalid numeric threshold",
        ),
        (
            "latest",
            {"rollout_rs": "token_k3", "rollout_rs_threshold": 0.0},
            ValueError,
            "must be positive",
        ),
        (
            "latest",
            {"rollout_rs": "token_k3", "rollout_rs_threshold": [0.1]},
            TypeError,
            "rollout_rs_threshold",
        ),
        (
            "legacy",
            {"rollout_rs": "token_k1", "rollout_rs_threshold": 2.0},
            ValueError,
            "Invalid rollout_rs",
        ),
        ("legacy", {"rollout_rs": "token", "rollout_rs_threshold": "2.0"}, TypeError, "legacy"),
        (
            "legacy",
            {"rollout_token_veto_threshold": 0.0},
            ValueError,
            "rollout_token_veto_threshold must be positive",
        ),
        (
            "legacy",
            {"rollout_token_veto_threshold": -1e-4},
            ValueError,
            "rollout_token_veto_threshold must be positive",
        ),
        ("latest", {"rollout_token_veto_threshold": 1e-4}, ValueError, "latest dialect"),
        ("latest", {"rollout_rs_threshold_lower": 0.5}, ValueError, "latest dialect"),
    ],
)
def test_validation_errors(dialect, config, error, match):
    with pytest.raises(error, match=match):
        reference_correction(*OK, config, dialect)


def test_input_errors():
    old, rollout, mask = OK
    with pytest.raises(ValueError, match="at least one valid token"):
        reference_correction(old, rollout, np.zeros_like(mask), {}, "latest")
    with pytest.raises(ValueError, match="does not match"):
        reference_correction(old, rollout[:, :1], mask, {}, "latest")
    with pytest.raises(ValueError, match="does not match response_mask"):
        reference_correction(old, rollout, mask[:, :1], {}, "legacy")
    with pytest.raises(ValueError, match="dialect"):
        reference_correction(old, rollout, mask, {}, "jan2026")
    bad = old.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        reference_correction(bad, rollout, mask, {}, "latest")
