"""The per-batch arrays every configuration shares (docs/correction.md, "Streaming").

A :class:`TokenView` of one :class:`~rcdiag.metrics.ragged.RaggedBatch` holds ℓ, its clamp, the
per-row sums and counts, and memoises what configurations compute from them (weights, criteria,
keep masks), so comparing many presets costs one pass each over the tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from functools import cached_property
from typing import Any, TypeVar

import numpy as np

from rcdiag.metrics.grouped import Moments
from rcdiag.metrics.offpolicy import count_divisor, masked_log_ratio
from rcdiag.metrics.ragged import (
    F64,
    I64,
    Bool,
    RaggedBatch,
    segment_count,
    segment_max,
    segment_min,
    segment_sum,
)
from rcdiag.metrics.token_sums import SAFETY_BOUND

T = TypeVar("T")

_EPSILON = float(np.finfo(np.float64).eps) / 2
"""The unit roundoff of float64 (2⁻⁵³)."""

CAP_FLOOR = 1.1
"""Truncation thresholds C from here up read the weights above it only (:meth:`TokenView.capped`):
the weights up to it are summed once per batch for every such C."""


class TokenView:
    """Per-batch token and row arrays shared by every configuration."""

    def __init__(self, batch: RaggedBatch, row_sums: Mapping[str, F64] | None = None) -> None:
        """``row_sums``: the batch's per-row statistics when the analysis computed them
        (:data:`~rcdiag.metrics.offpolicy.ROW_STATISTICS`): S_i and Σk3 are then read, not summed
        again."""
        self.batch = batch
        self.row_sums = row_sums or {}
        self.offsets = batch.offsets
        self.mask = batch.mask
        self.log_ratio = masked_log_ratio(batch)
        self._memo: dict[Hashable, Any] = {}

    def memo(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()`` once per batch for ``key``: configurations share weights and criteria."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def forget(self) -> None:
        """Drop what was memoised: a long batch's shared arrays are then computed again by the
        next configuration instead of all held at once (memory bounded by one configuration's)."""
        self._memo.clear()
        for name in ("clamped", "mask_weights"):  # the cached token arrays
            self.__dict__.pop(name, None)

    @cached_property
    def rollout(self) -> F64:
        """log π_rollout per position, in float64 (the batch holds them as read)."""
        return self.batch.rollout.astype(np.float64, copy=False)

    @cached_property
    def old(self) -> F64:
        """log π_train per position, in float64."""
        return self.batch.old.astype(np.float64, copy=False)

    @cached_property
    def clamped(self) -> F64:
        """clamp(ℓ, ±20), 0 at invalid positions: ℓ itself when no |ℓ| exceeds the bound (the
        usual batch: no copy)."""
        ell = self.log_ratio
        if ell.size and max(-float(ell.min()), float(ell.max())) <= SAFETY_BOUND:
            return ell
        return np.clip(ell, -SAFETY_BOUND, SAFETY_BOUND)

    @cached_property
    def n(self) -> F64:
        if self.batch.all_valid:
            return self.batch.lengths.astype(np.float64)
        return segment_sum(self.mask, self.offsets)

    @cached_property
    def nonempty(self) -> Bool:
        return self.n > 0

    @cached_property
    def seq_sum(self) -> F64:
        """S_i = Σ_valid ℓ (unclamped; 0 for an empty row)."""
        if "log_ratio" in self.row_sums:
            return self.row_sums["log_ratio"]
        return self.row_sum(self.log_ratio)

    @cached_property
    def lengths(self) -> np.ndarray:
        return self.batch.lengths

    def broadcast(self, per_row: np.ndarray) -> np.ndarray:
        """A row value on every position of the row (masked positions included)."""
        return np.repeat(per_row, self.lengths)

    def row_sum(self, token_values: F64) -> F64:
        """Σ over each row's positions, computed once per array and batch (weights and statistics
        are shared by configurations, and several metrics sum the same array)."""
        # the memo keeps the array alive, so its id cannot be reused while the view lives
        key = ("row_sum", id(token_values))
        return self.memo(key, lambda: (token_values, segment_sum(token_values, self.offsets)))[1]

    def valid(self, token_values: F64, fill: float = 0.0) -> F64:
        """The values at valid positions and ``fill`` elsewhere (no copy when all are valid)."""
        return token_values if self.batch.all_valid else np.where(self.mask, token_values, fill)

    def row_mean(self, token_values: F64) -> F64:
        """verl's per-row masked mean Σ_valid x / n_i (0 for an empty row); token_values must be 0
        where invalid."""
        return self.row_sum(token_values) / count_divisor(self.n)

    def token_moments(self, token_values: F64) -> Moments:
        """Per-row count n, mean x̄ and M2 = Σ (x − x̄)² of the values at valid positions.

        With all positions valid, M2 is first read as Σx² − x̄·Σx from the row sums (Σx² is
        shared with the statistics that sum the squares). That difference loses at most about
        2(n + 1)·ε·Σx² to rounding: it is kept where this is at most 1e-8 of M2 (a spread not
        tiny against the values, the usual case); the other rows (nearly equal values, values
        beyond the float64 range) sum their deviations x − x̄. A row of one value has M2 = 0."""
        n = self.n
        if not self.batch.all_valid:
            sums = segment_sum(self.valid(token_values), self.offsets)
            mean = np.divide(sums, n, out=np.zeros_like(n), where=n > 0)
            deviation = self.valid(token_values - self.broadcast(mean))
            np.square(deviation, out=deviation)
            return Moments(n, mean, segment_sum(deviation, self.offsets))
        sums = self.row_sum(token_values)
        mean = np.divide(sums, n, out=np.zeros_like(n), where=n > 0)
        with np.errstate(all="ignore"):
            squares = self.row_sum(self.squares(token_values))
            m2 = np.where(n > 1, squares - mean * sums, 0.0)
            summed = (n > 1) & ~(m2 >= (2 * n + 2) * (_EPSILON * 1e8) * squares)
        if summed.any():  # those rows' deviations, from their tokens only
            lengths = self.lengths[summed]
            tokens = token_values[np.repeat(summed, self.lengths)]
            deviation = tokens - np.repeat(mean[summed], lengths)
            np.square(deviation, out=deviation)
            offsets = np.zeros(lengths.size + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            m2[summed] = segment_sum(deviation, offsets)
        return Moments(n, mean, m2)

    def row_moments(self, per_row: F64, include: Bool | None = None) -> Moments:
        """Moments of one value per row (rows outside ``include`` left out)."""
        count = np.ones(per_row.size) if include is None else include.astype(np.float64)
        return Moments(count, np.where(count > 0, per_row, 0.0), np.zeros(per_row.size))

    def repeated_row_moments(self, per_row: F64) -> Moments:
        """Moments of a row value repeated on each of the row's valid tokens."""
        return Moments(self.n, np.where(self.nonempty, per_row, 0.0), np.zeros(per_row.size))

    def valid_max(self, token_values: F64) -> F64:
        """Each row's largest value at its valid positions (−inf without one), once per array
        and batch (criteria at several thresholds read the same maxima)."""
        key = ("valid_max", id(token_values))
        return self.memo(
            key,
            lambda: (token_values, segment_max(self.valid(token_values, -np.inf), self.offsets)),
        )[1]

    def valid_min(self, token_values: F64) -> F64:
        """Each row's smallest value at its valid positions (+inf without one), once per array
        and batch."""
        key = ("valid_min", id(token_values))
        return self.memo(
            key,
            lambda: (token_values, segment_min(self.valid(token_values, np.inf), self.offsets)),
        )[1]

    def or_invalid(self, token_flags: Bool) -> Bool:
        """``token_flags`` or the position is invalid (a keep mask that never drops padding); the
        flags themselves when every position is valid."""
        return token_flags if self.batch.all_valid else token_flags | ~self.mask

    def count(self, token_flags: Bool) -> F64:
        """Per-row count of valid positions where the flag holds."""
        if not self.batch.all_valid:
            token_flags = token_flags & self.mask
        return segment_count(token_flags, self.offsets)

    def count_above(self, token_values: F64, bound: float) -> F64:
        """Per-row count of valid positions whose value is > ``bound``: zeros, without a pass
        over the tokens, when no row's largest valid value (:meth:`valid_max`, once per array
        and batch) is (the usual batch, whose weights stay well inside every band)."""
        if (self.valid_max(token_values) <= bound).all():  # (a NaN maximum fails the test)
            return np.zeros(self.batch.rows)
        return self.count(token_values > bound)

    def count_below(self, token_values: F64, bound: float) -> F64:
        """Per-row count of valid positions whose value is < ``bound`` (as :meth:`count_above`,
        from :meth:`valid_min`)."""
        if (self.valid_min(token_values) >= bound).all():
            return np.zeros(self.batch.rows)
        return self.count(token_values < bound)

    @cached_property
    def runs(self) -> tuple[I64, I64]:
        """The runs of consecutive rows of one step: their token offsets and their steps.

        A statistic that is only ever summed (or maximised) per step needs no per-row value; it is
        reduced once per run, usually once per batch (docs/correction.md, "Streaming").
        """
        return self.offsets[self.row_runs], self.batch.steps[self.row_runs[:-1]]

    def run_sum(self, values: F64, weights: F64 | None = None) -> F64:
        """Σ values (· weights) over the tokens of each run."""
        token_offsets, _ = self.runs
        if token_offsets.size == 2:  # one run: a BLAS dot product, no temporary array
            total = values.sum() if weights is None else np.dot(values, weights)
            return np.array([total], dtype=np.float64)
        return segment_sum(values if weights is None else values * weights, token_offsets)

    @property
    def one_run(self) -> bool:
        """Whether the batch's rows are all of one step (the usual batch)."""
        return self.runs[0].size == 2

    def capped(self, values: F64, cap: float) -> dict[str, F64]:
        """For a batch of :attr:`one_run`, values ≥ 0 (0 at invalid positions) and a cap C ≥
        :data:`CAP_FLOOR`: Σ v (``kept_raw``), Σ min(v, C) (``kept_applied``), Σ min(v, C)²
        (``kept_applied_sq``) and max min(v, C) (``kept_applied_max``), each as a 1-array.

        The values up to the floor are summed once per batch (shared by every C); only the values
        above it are capped, usually a few. Everything summed is ≥ 0, so nothing cancels.
        """
        if not self.one_run or cap < CAP_FLOOR:
            raise ValueError("capped() needs a batch of one run and a cap ≥ CAP_FLOOR")

        def split() -> tuple[F64, tuple[float, float, float, F64]]:
            maxima = self.valid_max(values)  # each row's, once per array (the metrics read them)
            if (maxima <= CAP_FLOOR).all():  # nothing above the floor: no tail, no copy
                top = float(maxima.max(initial=-np.inf))
                if not self.batch.all_valid and values.size:
                    top = max(top, 0.0)  # the invalid positions' 0
                tail = values[:0]
                return values, (float(values.sum()), float(np.dot(values, values)), top, tail)
            high = values > CAP_FLOOR
            tail = values[high]
            low = np.where(high, 0.0, values)
            top = float(values.max(initial=-np.inf))  # −inf for a run without tokens (as run_max)
            return values, (float(low.sum()), float(np.dot(low, low)), top, tail)

        low_sum, low_sq, top, tail = self.memo(("capped", id(values)), split)[1]
        capped = np.minimum(tail, cap)
        return {
            "kept_raw": np.array([low_sum + float(tail.sum())]),
            "kept_applied": np.array([low_sum + float(capped.sum())]),
            "kept_applied_sq": np.array([low_sq + float(np.dot(capped, capped))]),
            "kept_applied_max": np.array([min(top, cap)]),
        }

    @cached_property
    def row_runs(self) -> I64:
        """The first row of each run (:attr:`runs`), and the number of rows at the end."""
        steps = self.batch.steps
        return np.append(np.flatnonzero(np.diff(steps, prepend=steps[:1] - 1)), steps.size)

    def run_row_sum(self, per_row: F64) -> F64:
        """Σ of a per-row value over the rows of each run."""
        return np.add.reduceat(per_row, self.row_runs[:-1]) if per_row.size else np.zeros(0)

    def run_row_max(self, per_row: F64) -> F64:
        """The largest per-row value of each run."""
        return np.maximum.reduceat(per_row, self.row_runs[:-1]) if per_row.size else np.zeros(0)

    def row_max(self, token_values: F64) -> F64:
        """Each row's largest value over all its positions (−inf for an empty row), once per
        array and batch."""
        key = ("row_max", id(token_values))
        return self.memo(key, lambda: (token_values, segment_max(token_values, self.offsets)))[1]

    def run_max(self, values: F64, weights: F64 | None = None) -> F64:
        """The largest value (· weights) of each run (−inf for a run without tokens); ``values``
        and ``weights`` ≥ 0."""
        token_offsets, _ = self.runs
        if token_offsets.size == 2 and values.size:
            top = int(np.argmax(values))  # usually kept: then no product is needed
            if weights is None or weights[top] == 1.0:
                return values[top : top + 1].copy()
        return segment_max(values if weights is None else values * weights, token_offsets)

    def squares(self, token_values: F64) -> F64:
        """token_values², computed once per array and batch."""
        key = ("squares", id(token_values))
        return self.memo(key, lambda: (token_values, token_values * token_values))[1]

    @cached_property
    def mask_weights(self) -> F64:
        """The mask as 0.0 / 1.0, for dot products."""
        return self.mask.astype(np.float64)
