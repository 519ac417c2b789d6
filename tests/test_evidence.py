"""The diagnosis evidence of the prefix sample (rcdiag/metrics/evidence.py) against a slow
reference written here, row by row, on random ragged batches: holes in the mask, garbage under
it, empty and short rows, padded ends, policy lags, and all-valid batches."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rcdiag.metrics.evidence import (
    PAIRED_MIN_GAP,
    PAIRED_MIN_PAIRS,
    PAIRED_RATIO,
    PREFIX_POSITIONS,
    SHIFTS,
    evidence_statistics,
)
from rcdiag.metrics.ragged import RaggedBatch


def _reference_row(
    x: list[float], y: list[float], valid: list[bool], lead: int, tail: int, lag: int
) -> dict[str, float]:
    """One response's evidence: constancy over its first positions, the rest over the sample of
    what was generated (after ``lead`` padded positions, before ``tail``)."""
    head = range(min(len(x), PREFIX_POSITIONS))
    seen_x = [x[t] for t in head if valid[t]]
    seen_y = [y[t] for t in head if valid[t]]
    out = {
        "rollout_min": min(seen_x, default=math.inf),
        "rollout_max": max(seen_x, default=-math.inf),
        "old_min": min(seen_y, default=math.inf),
        "old_max": max(seen_y, default=-math.inf),
    }
    sample = [t for t in range(lead, min(len(x) - tail, lead + PREFIX_POSITIONS)) if valid[t]]
    inside = set(sample)
    for s in SHIFTS:
        pairs = [t for t in sample if t + s in inside]
        out[f"shift_{s}_abs"] = sum(abs(y[t] - x[t + s]) for t in pairs)
        out[f"shift_{s}_pairs"] = float(len(pairs))

    def gap(s: int) -> float:
        n = out[f"shift_{s}_pairs"]
        return out[f"shift_{s}_abs"] / n if n else math.nan

    neighbour = min(g for g in (gap(-1), gap(1), math.inf) if not math.isnan(g))
    informative = (
        min(out[f"shift_{s}_pairs"] for s in (-1, 0, 1)) >= PAIRED_MIN_PAIRS
        and neighbour >= PAIRED_MIN_GAP
        and lag == 0
    )
    unpaired = informative and gap(0) >= PAIRED_RATIO * neighbour
    out["pairing_rows"] = float(informative)
    out["unpaired_rows"] = float(unpaired)
    out["unpaired_ell"] = sum(x[t] - y[t] for t in sample) if unpaired else 0.0
    out["unpaired_abs"] = out["shift_0_abs"] if unpaired else 0.0
    fitted = sample if lag == 0 else []
    out["fit_n"] = float(len(fitted))
    out["fit_x"] = sum(x[t] for t in fitted)
    out["fit_y"] = sum(y[t] for t in fitted)
    out["fit_xx"] = sum(x[t] * x[t] for t in fitted)
    out["fit_xy"] = sum(x[t] * y[t] for t in fitted)
    out["fit_yy"] = sum(y[t] * y[t] for t in fitted)
    return out


def _batch(
    seed: int, holes: bool, lags: bool, padded: bool, short: bool = True
) -> tuple[RaggedBatch, list[tuple]]:
    """Random rows; ``short``: some shorter than the sample (else every row fills it)."""
    rng = np.random.default_rng(seed)
    rows = 80
    lengths = rng.integers(0 if short else PREFIX_POSITIONS, 160, rows)
    if short:
        lengths[:3] = (0, 1, PREFIX_POSITIONS + 3)
    parts = []
    for n in lengths:
        x = rng.normal(-2.0, 1.5, n)
        y = x + rng.normal(0.0, 0.3, n)
        if n > 20 and rng.random() < 0.2:  # another response's scores: unpaired
            y = rng.normal(-2.0, 1.5, n)
        if padded and n > 8 and rng.random() < 0.3:  # a padded end in one column
            k = int(rng.integers(4, n // 2 + 1))
            column = x if rng.random() < 0.5 else y
            column[n - k :] = 0.0
        valid = rng.random(n) > 0.15 if holes else np.ones(n, dtype=bool)
        x = np.where(valid, x, rng.choice([np.nan, np.inf, 7.0], n)) if holes else x
        parts.append((x, y, valid))
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    batch = RaggedBatch(
        rollout=np.concatenate([p[0] for p in parts]),
        old=np.concatenate([p[1] for p in parts]),
        mask=np.concatenate([p[2] for p in parts]),
        offsets=offsets,
        steps=np.zeros(rows, np.int64),
        lags=rng.integers(0, 2, rows) if lags else None,
    )
    return batch, parts


@pytest.mark.parametrize("short", [True, False], ids=["short rows", "every row fills the sample"])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("lags", [False, True])
@pytest.mark.parametrize("holes", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_evidence_matches_the_row_by_row_reference(
    seed: int, holes: bool, lags: bool, padded: bool, short: bool
) -> None:
    batch, parts = _batch(seed, holes, lags, padded, short)
    fast = evidence_statistics(batch)
    pad_tokens, lead = fast["pad_tokens"], fast["lead_tokens"]  # tested in test_positions.py
    for i, (x, y, valid) in enumerate(parts):
        lag = 0 if batch.lags is None else int(batch.lags[i])
        head, tail = int(lead[i]), int(pad_tokens[i] - lead[i])
        expected = _reference_row(x.tolist(), y.tolist(), valid.tolist(), head, tail, lag)
        for name, value in expected.items():
            assert fast[name][i] == pytest.approx(value, rel=1e-12, abs=1e-9), (name, i)
    assert fast["unpaired_rows"].sum() > 0 and fast["pairing_rows"].sum() > 0
    assert (pad_tokens.sum() > 0) == padded, "some row has a padded end, when planted"
