"""The per-position profile and the padded ends (rcdiag/metrics/positions.py) against a slow
reference written here, row by row, on random ragged batches with holes, empty rows and runs."""

from __future__ import annotations

import numpy as np
import pytest

from rcdiag.metrics.positions import PAD_GAP, PAD_RUN, POSITION_EDGES, position_statistics
from rcdiag.metrics.ragged import RaggedBatch


def _run(values: list[float], valid: list[bool]) -> int:
    """Valid positions at the start of ``values`` holding its first value (0 if it starts invalid)."""
    if not values or not valid[0]:
        return 0
    n = 1
    while n < len(values) and valid[n] and values[n] == values[0]:
        n += 1
    return n


def _reference_row(x: list[float], y: list[float], valid: list[bool]) -> dict[str, float]:
    gaps = [abs(a - b) if v else 0.0 for a, b, v in zip(x, y, valid, strict=True)]
    out: dict[str, float] = {}
    for k, edge in enumerate(POSITION_EDGES):
        upper = POSITION_EDGES[k + 1] if k + 1 < len(POSITION_EDGES) else len(x)
        inside = range(edge, min(upper, len(x)))
        out[f"pos_{edge}_abs"] = sum(gaps[t] for t in inside)
        out[f"pos_{edge}_n"] = float(sum(valid[t] for t in inside))

    def padded(rx: int, ry: int, gap: float) -> int:
        run, shorter = max(rx, ry), min(rx, ry)
        return run if run >= PAD_RUN and shorter < run and gap > PAD_GAP * run else 0

    tail_x, tail_y = _run(x[::-1], valid[::-1]), _run(y[::-1], valid[::-1])
    tail_len = max(tail_x, tail_y)
    tail = padded(tail_x, tail_y, sum(gaps[len(x) - tail_len :]))
    lead_x, lead_y = _run(x, valid), _run(y, valid)
    lead_len = max(lead_x, lead_y)
    lead = min(padded(lead_x, lead_y, sum(gaps[:lead_len])), len(x) - tail)
    out["pad_rows"] = float(tail > 0 or lead > 0)
    out["pad_tokens"] = float(tail + lead)
    out["lead_tokens"] = float(lead)
    out["pad_abs"] = sum(gaps[len(x) - tail :]) * (tail > 0) + sum(gaps[:lead])
    return out


@pytest.mark.parametrize("seed", range(6))
def test_position_statistics_match_the_row_by_row_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = 40
    lengths = rng.integers(0, 90 if seed < 3 else 400, rows)  # runs longer than 64 too
    rollout, old, valid = [], [], []
    for n in lengths:
        x = np.round(rng.normal(-2.0, 1.5, n), 1)  # rounding makes repeated values common
        y = np.round(x + rng.normal(0.0, 0.2, n), 1)
        if n and rng.random() < 0.4:  # a padded tail or start in one column
            k = int(rng.integers(1, n + 1))
            column = x if rng.random() < 0.5 else y
            if rng.random() < 0.5:
                column[n - k :] = 0.0
            else:
                column[:k] = 0.0
        mask = rng.random(n) > 0.1
        rollout.append(x), old.append(y), valid.append(mask)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    x_all, y_all, m_all = np.concatenate(rollout), np.concatenate(old), np.concatenate(valid)
    batch = RaggedBatch(
        rollout=x_all, old=y_all, mask=m_all, offsets=offsets, steps=np.zeros(rows, np.int64)
    )
    fast = position_statistics(batch)
    for i in range(rows):
        expected = _reference_row(rollout[i].tolist(), old[i].tolist(), valid[i].tolist())
        for name, value in expected.items():
            assert fast[name][i] == pytest.approx(value, rel=1e-12, abs=1e-9), (name, i)
    assert fast["lead_tokens"].sum() > 0, "some row starts padded"
    assert (fast["pad_tokens"] - fast["lead_tokens"]).sum() > 0, "some row ends padded"
