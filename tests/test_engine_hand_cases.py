"""The hand-computed cases pinned on the reference (tests/test_reference_correction.py, verl's tests
included) run again against rcdiag's engine, through an adapter with the reference's signature."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
import test_reference_correction as hand

from rcdiag.correction.compare import NamedConfig, PresetComparison
from rcdiag.correction.config import ConfigError, parse_config
from rcdiag.correction.outcome import apply_correction
from rcdiag.metrics.ragged import RaggedBatch

NOT_ABOUT_THE_ENGINE = {
    "test_input_errors",  # the reference validates arrays; rcdiag's reader does that (tested there)
    "test_bool_is_threshold_is_a_type_error",  # rcdiag raises ConfigError: see test_correction.py
}


def engine_correction(
    old: np.ndarray, rollout: np.ndarray, mask: np.ndarray, config: Mapping[str, Any], dialect: str
) -> tuple[np.ndarray | None, np.ndarray, dict[str, float | None]]:
    """rcdiag's engine with the reference's interface: padded [B, T] in, padded out."""
    rows, width = mask.shape
    batch = RaggedBatch(
        rollout=np.asarray(rollout, dtype=np.float64).reshape(-1),
        old=np.asarray(old, dtype=np.float64).reshape(-1),
        mask=np.asarray(mask).reshape(-1) != 0,
        offsets=np.arange(rows + 1, dtype=np.int64) * width,
        steps=np.zeros(rows, dtype=np.int64),
    )
    known = {k: v for k, v in config.items() if k not in ("bypass_mode", "loss_type")}
    try:
        plan = parse_config(known, dialect)  # type: ignore[arg-type]
    except ConfigError as exc:  # the reference raises verl's exception types
        raise ValueError(str(exc)) from exc
    weights, new_mask = apply_correction(batch, plan)
    comparison = PresetComparison([NamedConfig("c", config, plan)])
    comparison.update(batch)
    padded = None if weights is None else np.where(batch.mask, weights, 0.0).reshape(rows, width)
    return padded, new_mask.reshape(rows, width).astype(np.int64), comparison.metrics("c")


CASES = [
    name
    for name, fn in inspect.getmembers(hand, inspect.isfunction)
    if name.startswith("test_")
    and not inspect.signature(fn).parameters
    and name not in NOT_ABOUT_THE_ENGINE
]


@pytest.mark.parametrize("case", CASES)
def test_engine_passes_the_hand_computed_case(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hand, "reference_correction", engine_correction)
    getattr(hand, case)()


def test_cases_were_collected() -> None:
    assert len(CASES) >= 15
