"""Streaming evidence for telling a dump bug from a real mismatch (docs/diagnosis.md).

Pure: per-row sufficient statistics of one :class:`~rcdiag.metrics.ragged.RaggedBatch`, summed per
step like every other statistic (:class:`~rcdiag.metrics.grouped.GroupedStats`), so the diagnosis is
as streamable, mergeable and batch-size independent as the metrics.

The evidence is collected on the **prefix sample**: the first :data:`PREFIX_POSITIONS`
positions of every response (a fixed, deterministic sample whatever the batching; all of a short
response). With x = log π_rollout and y = log π_train at valid positions:

* **Alignment**: D_s = Σ |y_t − x_{t+s}| over the pairs of valid positions t, t + s of one response,
  for shifts s ∈ :data:`SHIFTS`, with their counts. Aligned columns make D_0 / N_0 the smallest; a
  training column scored one token late (or early) makes D_{±1} / N_{±1} much smaller than D_0 / N_0.
* **Pairing**: per response, whether it is informative (≥ :data:`PAIRED_MIN_PAIRS` pairs at every
  shift s ∈ {−1, 0, 1} and a neighbour gap min_{s=±1} mean |y_t − x_{t+s}| ≥ :data:`PAIRED_MIN_GAP`)
  and whether its two columns are no closer at the same position than at a neighbouring one
  (mean |y_t − x_t| ≥ :data:`PAIRED_RATIO` × the neighbour gap): then the two columns of that row
  hold different responses (rows reordered or joined wrongly). Rows with a policy lag are left out.
  Over the unpaired rows, Σ(x_t − y_t) and Σ|x_t − y_t|: two responses' log-probs are alike in law,
  so their difference averages to about 0, while a real mismatch of that size, sampled from the
  rollout side, averages to KL(q‖π) > 0 (a balance near 1).
* **Constancy**: min and max of x and of y over valid positions: a column holding one value at
  every position is a placeholder, not log-probs.
* **Tempering**: n, Σx, Σy, Σx², Σxy, Σy² over valid positions, for the least-squares line
  y ≈ a + b·x. Log-probs of one model at temperatures T_rollout and T_train satisfy, token by token,
  y = (T_rollout / T_train)·x + c_t, so b estimates the temperature ratio; numerical noise leaves
  b ≈ 1. Rows with a nonzero policy lag are left out when the dump records one (a newer policy
  can be sharper, which is staleness, not a forgotten temperature).

Constancy reads the whole prefix sample; the other evidence leaves out a response's padded ends
(:mod:`rcdiag.metrics.positions`: padding after it, a prompt before it), so that positions never
generated do not blur the alignment, pairing and tempering evidence.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

import numpy as np

from rcdiag.metrics.grouped import GroupedStats, Kind
from rcdiag.metrics.positions import POSITION_STATISTICS, position_statistics
from rcdiag.metrics.ragged import F64, I64, Bool, RaggedBatch

PREFIX_POSITIONS = 64
"""Positions of each response in the prefix sample."""

SHIFTS: tuple[int, ...] = (-2, -1, 0, 1, 2)
"""Offsets s of the training column against the rollout column that the alignment test tries."""

PAIRED_MIN_PAIRS = 16
"""Pairs a response needs at each shift to count in the pairing evidence."""
PAIRED_MIN_GAP = 0.5
"""Mean |Δ log p| against a neighbouring position that makes a response informative: its tokens'
log-probs differ from their neighbours' (a near-deterministic response cannot show pairing)."""
PAIRED_RATIO = 0.8
"""A response whose same-position gap reaches this share of its neighbour gap is unpaired. Two
columns of one response score each token twice, so the same-position gap sits below the neighbour
gap (noise adds to both); two different responses make the two gaps alike (ratio ≈ 1). Measured
per response: at most 0.76 on every real-model and synthetic sample with a real mismatch (fp8,
stale, heavy tails, a drift to collapse), a median of 1.0 with rows paired to other responses."""

Evidence = Literal["alignment", "tempering"]

EVIDENCE_STATISTICS: dict[str, Kind] = {
    **{f"shift_{s}_abs": "sum" for s in SHIFTS},
    **{f"shift_{s}_pairs": "sum" for s in SHIFTS},
    "pairing_rows": "sum",
    "unpaired_rows": "sum",
    "unpaired_ell": "sum",
    "unpaired_abs": "sum",
    "rollout_min": "min",
    "rollout_max": "max",
    "old_min": "min",
    "old_max": "max",
    "fit_n": "sum",
    "fit_x": "sum",
    "fit_y": "sum",
    "fit_xx": "sum",
    "fit_xy": "sum",
    "fit_yy": "sum",
    **POSITION_STATISTICS,
}
"""The per-row sums of the prefix sample (and :mod:`rcdiag.metrics.positions`) and how they
combine."""


class PrefixSample(NamedTuple):
    """The prefix sample of a batch as [width, rows] tables (width ≤ the limit): position-major,
    so that a sum or extreme over each row's positions runs across all rows at once."""

    cells: I64
    """Flat index of each cell; a cell outside its row repeats the row's first sampled index (0
    for a row without one), so that it holds one of the row's own values."""
    inside: Bool
    """Whether the cell lies inside its row's sample."""
    take: I64
    """Cells inside per row."""
    full: bool
    """Whether every cell is inside (every row has ``width`` positions to sample)."""


def prefix_sample(
    offsets: I64, limit: int = PREFIX_POSITIONS, lead: I64 | None = None, tail: I64 | None = None
) -> PrefixSample:
    """The prefix sample: each row's first ``limit`` positions, after its first ``lead`` and
    before its last ``tail`` positions.

    Example:
        >>> cells, inside, take, full = prefix_sample(np.array([0, 3, 3, 8]), limit=2)
        >>> cells.T.tolist(), inside.T.tolist(), take.tolist(), full
        ([[0, 1], [0, 0], [3, 4]], [[True, True], [False, False], [True, True]], [2, 0, 2], False)
        >>> prefix_sample(np.array([0, 3, 8]), limit=2, lead=np.array([1, 0]))[0].T.tolist()
        [[1, 2], [3, 4]]
        >>> prefix_sample(np.array([0, 1, 8]), limit=2)[0].T.tolist()  # row 0 repeats its index
        [[0, 0], [1, 2]]
    """
    starts, lengths = offsets[:-1], np.diff(offsets)
    if lead is not None:
        starts, lengths = starts + lead, lengths - lead
    if tail is not None:
        lengths = lengths - tail
    take = np.clip(lengths, 0, limit)
    width = int(take.max(initial=0))
    column = np.arange(width, dtype=np.int64)[:, None]
    cells = starts + column
    if int(take.min(initial=width)) == width:
        return PrefixSample(cells, np.ones(cells.shape, dtype=bool), take, True)
    inside = column < take
    np.copyto(cells, np.where(take > 0, starts, 0), where=~inside)
    return PrefixSample(cells, inside, take, False)


def evidence_statistics(batch: RaggedBatch) -> dict[str, F64]:
    """Per-row sums of :data:`EVIDENCE_STATISTICS` on the batch's prefix sample.

    Log-probs near the float64 limit make some sums ±inf or NaN; the tests that read them then
    abstain (:func:`fit_slope`, :func:`mean_gap`).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        positions = position_statistics(batch)
        padded, lead = positions["pad_tokens"], positions["lead_tokens"]
        return {**_evidence_statistics(batch, padded, lead), **positions}


def _position_sum(a: F64, weights: F64) -> F64:
    """Σ_t a[t, i]·weights[t, i] per row i, without a product table."""
    return np.einsum("ij,ij->j", a, weights)


def _evidence_statistics(batch: RaggedBatch, padded: F64, lead: F64) -> dict[str, F64]:
    sample = prefix_sample(batch.offsets)
    if sample.cells.size == 0:  # no row holds a position
        empty = {name: np.zeros(batch.rows) for name in EVIDENCE_STATISTICS}
        for name in ("rollout_min", "old_min"):
            empty[name] = np.full(batch.rows, np.inf)
        for name in ("rollout_max", "old_max"):
            empty[name] = np.full(batch.rows, -np.inf)
        return empty
    raw_x, raw_y = _gathered(batch, sample)
    stats = _constancy(raw_x, raw_y, sample, None if batch.all_valid else batch.mask)
    # Without holes or padded ends, the valid cells of each row are its first ``take``.
    prefix_shaped = batch.all_valid and not padded.any()
    if padded.any():  # the sample of what was generated: after a padded start, before a tail
        lead_n = lead.astype(np.int64)
        sample = prefix_sample(batch.offsets, lead=lead_n, tail=padded.astype(np.int64) - lead_n)
        raw_x, raw_y = _gathered(batch, sample)
    weight: F64 | None = None  # None: every cell is valid (the common long, unpadded responses)
    x, y = raw_x, raw_y
    if not (prefix_shaped and sample.full):
        valid = sample.inside if batch.all_valid else batch.mask[sample.cells] & sample.inside
        weight = valid.astype(np.float64)
        x, y = raw_x * weight, raw_y * weight  # 0 at invalid cells when the values are finite
        if not (np.isfinite(x).all() and np.isfinite(y).all()):
            x, y = np.where(valid, raw_x, 0.0), np.where(valid, raw_y, 0.0)
    width = sample.cells.shape[0]
    for s in SHIFTS:
        # pairs (t, t + s) inside one row: y at t against x at t + s
        at, to = (
            (slice(0, width - s), slice(s, width))
            if s >= 0
            else (slice(-s, width), slice(0, width + s))
        )
        pair: F64 | None = None  # None: every pair counts
        if prefix_shaped:  # both inside the first ``take`` exactly when the later one is
            pair = None if weight is None else weight[abs(s) :]
            stats[f"shift_{s}_pairs"] = np.maximum(sample.take - abs(s), 0).astype(np.float64)
        elif weight is not None:
            pair = weight[at] * weight[to]
            stats[f"shift_{s}_pairs"] = pair.sum(axis=0)
        gap = y[at] - x[to]
        np.abs(gap, out=gap)
        stats[f"shift_{s}_abs"] = gap.sum(axis=0) if pair is None else _position_sum(gap, pair)
    sum_x, sum_y = x.sum(axis=0), y.sum(axis=0)
    stats.update(_pairing(stats, sum_x - sum_y, batch.lags))
    fit = {
        "fit_n": sample.take.astype(np.float64) if weight is None else weight.sum(axis=0),
        "fit_x": sum_x,
        "fit_y": sum_y,
        "fit_xx": _position_sum(x, x),
        "fit_xy": _position_sum(x, y),
        "fit_yy": _position_sum(y, y),
    }
    if batch.lags is not None:  # rows whose policy lagged are left out of the fit
        fitted = batch.lags == 0
        fit = {name: np.where(fitted, value, 0.0) for name, value in fit.items()}
    stats.update(fit)
    return stats


def _gathered(batch: RaggedBatch, sample: PrefixSample) -> tuple[F64, F64]:
    """The sample's rollout and training log-probs, in float64."""
    return (
        np.take(batch.rollout, sample.cells, mode="clip").astype(np.float64, copy=False),
        np.take(batch.old, sample.cells, mode="clip").astype(np.float64, copy=False),
    )


def _constancy(raw_x: F64, raw_y: F64, sample: PrefixSample, mask: Bool | None) -> dict[str, F64]:
    """Min and max of each column over the valid cells of the sample (``mask`` None: every
    position is valid, and the cells outside a row repeat one of its values)."""
    if mask is None:
        nonempty = sample.take > 0
        return {
            "rollout_min": np.where(nonempty, raw_x.min(axis=0), np.inf),
            "rollout_max": np.where(nonempty, raw_x.max(axis=0), -np.inf),
            "old_min": np.where(nonempty, raw_y.min(axis=0), np.inf),
            "old_max": np.where(nonempty, raw_y.max(axis=0), -np.inf),
        }
    sampled = mask[sample.cells] & sample.inside
    return {
        "rollout_min": np.where(sampled, raw_x, np.inf).min(axis=0),
        "rollout_max": np.where(sampled, raw_x, -np.inf).max(axis=0),
        "old_min": np.where(sampled, raw_y, np.inf).min(axis=0),
        "old_max": np.where(sampled, raw_y, -np.inf).max(axis=0),
    }


def _pairing(stats: dict[str, F64], ell: F64, lags: I64 | None) -> dict[str, F64]:
    """Per row: whether it is informative, and whether it is unpaired (module docstring); a row
    with a nonzero policy lag is left out (its policy moved: a larger gap is staleness)."""

    def gap(s: int) -> F64:
        pairs = stats[f"shift_{s}_pairs"]
        return np.where(pairs > 0, stats[f"shift_{s}_abs"] / np.maximum(pairs, 1.0), np.nan)

    neighbour = np.fmin(gap(-1), gap(1))
    enough = np.minimum.reduce([stats[f"shift_{s}_pairs"] for s in (-1, 0, 1)]) >= PAIRED_MIN_PAIRS
    informative = enough & (neighbour >= PAIRED_MIN_GAP)  # NaN compares False
    if lags is not None:
        informative &= lags == 0
    unpaired = informative & (gap(0) >= PAIRED_RATIO * neighbour)
    return {
        "pairing_rows": informative.astype(np.float64),
        "unpaired_rows": unpaired.astype(np.float64),
        "unpaired_ell": np.where(unpaired, ell, 0.0),
        "unpaired_abs": np.where(unpaired, stats["shift_0_abs"], 0.0),
    }


def mean_gap(stats: dict[str, float], shift: int) -> float | None:
    """Mean |log π_train(t) − log π_rollout(t + shift)| over the sampled pairs (None without any)."""
    pairs, total = stats[f"shift_{shift}_pairs"], stats[f"shift_{shift}_abs"]
    return total / pairs if pairs and math.isfinite(total) else None


def fit_slope(stats: dict[str, float]) -> tuple[float, float] | None:
    """Least-squares slope b of log π_train on log π_rollout and the correlation r.

    b = S_xy / S_xx and r = S_xy / √(S_xx·S_yy) with centred sums S; None with fewer than 3
    points or no spread.
    """
    n = stats["fit_n"]
    sums = [stats[k] for k in ("fit_x", "fit_y", "fit_xx", "fit_xy", "fit_yy")]
    if n < 3 or not all(math.isfinite(v) for v in sums):
        return None
    x, y, xx, xy, yy = sums
    sxx, syy, sxy = xx - x * x / n, yy - y * y / n, xy - x * y / n
    if not (sxx > 0 and syy > 0 and math.isfinite(sxx * syy)):
        return None
    return sxy / sxx, sxy / float(np.sqrt(sxx * syy))


LAG_STATISTICS: dict[str, Kind] = {
    "rows": "sum",
    "valid": "sum",
    "ell": "sum",
    "abs": "sum",
    "k3": "sum",
}
"""Sums kept per policy lag."""


class LagBreakdown:
    """The mismatch per policy lag (optimizer steps the rollout policy was behind), when recorded.

    Per lag value: valid tokens, Σ ℓ, Σ |ℓ| and Σ (e^ℓ − 1 − ℓ), so kl, mean |Δ log p| and k3_kl per lag
    follow with the same formulas as the overall metrics.
    """

    def __init__(self) -> None:
        self.stats = GroupedStats(LAG_STATISTICS)

    def update(self, batch: RaggedBatch, row_sums: dict[str, F64]) -> None:
        """Fold one batch; ``row_sums`` holds the batch's per-row ``valid_tokens``, ``log_ratio``,
        ``abs_log_ratio`` and ``k3`` (from the row statistics already computed)."""
        if batch.lags is None or batch.rows == 0:
            return
        slots = self.stats.slots_for(batch.lags)
        self.stats.add(
            slots,
            {
                "rows": np.ones(batch.rows),
                "valid": row_sums["valid_tokens"],
                "ell": row_sums["log_ratio"],
                "abs": row_sums["abs_log_ratio"],
                "k3": row_sums["k3"],
            },
        )

    def merge(self, other: LagBreakdown) -> None:
        """Fold in the lags of ``other`` (gathered from other rows)."""
        self.stats.merge(other.stats)

    def table(self) -> list[dict[str, float | None]]:
        """One entry per lag: rows, valid tokens, kl, k3_kl and mean |Δ log p| (lags sorted)."""
        out = []
        for lag, g in sorted(self.stats.groups().items()):
            valid = g["valid"]
            out.append(
                {
                    "lag": lag,
                    "rows": g["rows"],
                    "valid_tokens": valid,
                    "kl": -g["ell"] / valid if valid else None,
                    "k3_kl": g["k3"] / valid if valid else None,
                    "abs_log_ratio_mean": g["abs"] / valid if valid else None,
                }
            )
        return out
