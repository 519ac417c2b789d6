"""Random configurations on random batches: the engine against the reference, criterion by
criterion, threshold syntax by threshold syntax (hypothesis)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_correction import reference_correction
from test_correction import assert_metrics_match
from test_engine_hand_cases import engine_correction

from rcdiag.correction.config import RS_OPTIONS

SYMMETRIC = st.sampled_from([1.001, 1.01, 1.1, 1.5, 2.0, 5.0])
UPPER = st.sampled_from([1e-4, 1e-3, 0.01, 0.1, 1.0, 8.21, 42.4])


@st.composite
def k1_threshold(draw: st.DrawFn) -> str:
    if draw(st.booleans()):
        return str(draw(SYMMETRIC))
    lo = draw(st.sampled_from([0.3, 0.6, 0.9, 0.99, 0.999]))
    hi = draw(st.sampled_from([1.001, 1.01, 1.2, 1.6, 3.0]))
    return f"{lo}_{hi}"


@st.composite
def latest_config(draw: st.DrawFn) -> dict[str, Any]:
    config: dict[str, Any] = {}
    level = draw(st.sampled_from([None, "token", "sequence"]))
    if level is not None:
        config["rollout_is"] = level
        config["rollout_is_threshold"] = draw(
            st.one_of(
                st.sampled_from([1.05, 2.0, 3, 10.0]),
                st.sampled_from(["2.0", " 1.5 ", "0.5_5.0", "0.9_1.1", "0.99_1.01"]),
            )
        )
        config["rollout_is_batch_normalize"] = draw(st.booleans())
    options = draw(st.lists(st.sampled_from(RS_OPTIONS), max_size=3, unique=True))
    if options:
        thresholds = [
            draw(k1_threshold()) if o.endswith("k1") else str(draw(UPPER)) for o in options
        ]
        config["rollout_rs"] = ",".join(options)
        config["rollout_rs_threshold"] = ",".join(thresholds)
    return config


@st.composite
def legacy_config(draw: st.DrawFn) -> dict[str, Any]:
    config: dict[str, Any] = {}
    level = draw(st.sampled_from([None, "token", "sequence"]))
    if level is not None:
        config["rollout_is"] = level
        config["rollout_is_threshold"] = draw(st.sampled_from([1.05, 2.0, 10.0]))
        config["rollout_is_batch_normalize"] = draw(st.booleans())
    rs = draw(st.sampled_from([None, "token", "sequence", "geometric"]))
    if rs is not None:
        config["rollout_rs"] = rs
        config["rollout_rs_threshold"] = draw(SYMMETRIC)
        lower = draw(st.sampled_from([None, 0.0, 0.5, 0.99]))
        if lower is not None:
            config["rollout_rs_threshold_lower"] = lower
    veto = draw(st.sampled_from([None, 1e-4, 1e-2, 0.5]))
    if veto is not None:
        config["rollout_token_veto_threshold"] = veto
    return config


@st.composite
def batch(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = draw(st.integers(1, 6))
    width = draw(st.integers(1, 9))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    scale = draw(st.sampled_from([0.001, 0.05, 0.5, 3.0]))
    rollout = -rng.exponential(1.0, (rows, width))
    ell = rng.normal(0.0, scale, (rows, width))
    if draw(st.booleans()):
        ell[rng.random((rows, width)) < 0.1] = -12.0  # catastrophic tokens
    mask = (rng.random((rows, width)) < draw(st.sampled_from([0.5, 0.9, 1.0]))).astype(np.int64)
    if not mask.any():
        mask[0, 0] = 1
    old = np.where(mask == 1, rollout + ell, np.nan)
    return old, rollout, mask


def _check(config: dict[str, Any], dialect: str, data: tuple) -> None:
    old, rollout, mask = data
    want_w, want_mask, want = reference_correction(old, rollout, mask, config, dialect)
    got_w, got_mask, got = engine_correction(old, rollout, mask, config, dialect)
    assert np.array_equal(got_mask, want_mask), config
    assert (got_w is None) == (want_w is None)
    if want_w is not None and got_w is not None:
        valid = mask != 0
        np.testing.assert_allclose(got_w[valid], want_w[valid], rtol=1e-6, atol=1e-9)
    assert_metrics_match(got, want, f"{dialect} {config}")


@settings(max_examples=300, deadline=None, database=None)
@given(latest_config(), batch())
def test_random_latest_configurations(config: dict[str, Any], data: tuple) -> None:
    _check(config, "latest", data)


@settings(max_examples=200, deadline=None, database=None)
@given(legacy_config(), batch())
def test_random_legacy_configurations(config: dict[str, Any], data: tuple) -> None:
    _check(config, "legacy", data)
