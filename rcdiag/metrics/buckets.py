"""Per-bucket tallies of the mismatch profile (:mod:`rcdiag.metrics.profile`): Σ1, Σℓ, Σ|ℓ|, Σℓ²,
Σk3 and max |ℓ| of the valid tokens in each bucket, fed token by token (rollout-probability
buckets, in interleaved lanes) or run by run (position buckets)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from rcdiag.metrics.ragged import F64, I64

TOKEN_SUMS = ("tokens", "sum", "abs_sum", "sq_sum", "k3_sum")
TokenValues = tuple[F64, F64, F64, F64, F64]
"""ℓ, |ℓ|, ℓ², k3 and |ℓ| again (for the maximum), per token or summed per run of tokens."""


LANES = 4
"""Interleaved tallies per bucket for summing over tokens (token t adds to lane t mod 4): an
increment waits for the previous one to the same cell, and most tokens fall in the bucket of the
token before them (most rollout probabilities lie in one or two buckets); four lanes keep four
increments in flight (measured: a bucket holding 90% of the tokens, 3.7 → 1.4 ms per 1M)."""


class TokenBuckets:
    """Σ1, Σℓ, Σ|ℓ|, Σℓ², Σk3 and max |ℓ| of valid tokens, per bucket."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.sums = {name: np.zeros(size) for name in TOKEN_SUMS}
        self.abs_max = np.zeros(size)

    def add_tokens(self, cells: I64, lanes: int, tokens: I64, token_values: TokenValues) -> None:
        """Fold tokens into their buckets: token j with ℓ_j ≥ 0 goes to cell 2b·lanes + lane of a
        tally in ``lanes`` interleaved lanes (:data:`LANES`), one with ℓ_j < 0 to cell
        (2b + 1)·lanes + lane (:func:`~rcdiag.metrics.bins.laned_rollout_prob_bucket`);
        ``tokens``: the tokens per bucket. Σ|ℓ| over each half gives both Σ|ℓ| and Σℓ (the
        positive half less the negative one: no sum of ℓ of its own)."""
        self.sums["tokens"] += tokens
        halves = np.bincount(cells, weights=token_values[1], minlength=self.size * 2 * lanes)
        with np.errstate(over="ignore", invalid="ignore"):  # ±inf, as one tally would give
            positive, negative = halves.reshape(self.size, 2, lanes).sum(axis=2).T
            self.sums["sum"] += positive - negative
            self.sums["abs_sum"] += positive + negative
        self._fold(cells, 2 * lanes, zip(TOKEN_SUMS[3:], token_values[2:4], strict=True))
        self._raise_maxima(cells, 2 * lanes, token_values[4])

    def add_runs(self, bucket: I64, tokens: F64, run_values: TokenValues) -> None:
        """Fold runs of tokens into their buckets: ``tokens``, each run's valid tokens; the values,
        its sums and its maximum."""
        self._fold(bucket, 1, zip(TOKEN_SUMS, (tokens, *run_values[:4]), strict=True))
        self._raise_maxima(bucket, 1, run_values[4])

    def _fold(self, cells: I64, lanes: int, sums: Iterable[tuple[str, F64]]) -> None:
        for name, values in sums:
            counted = np.bincount(cells, weights=values, minlength=self.size * lanes)
            with np.errstate(over="ignore", invalid="ignore"):  # ±inf, as one tally would give
                self.sums[name] += counted.reshape(self.size, lanes).sum(axis=1)

    def _raise_maxima(self, cells: I64, lanes: int, top: F64) -> None:
        """A value raises its bucket's maximum only above it: after the first batches, a few
        (|ℓ| is finite at valid tokens, the reader sees to it)."""
        maxima = self.abs_max if lanes == 1 else np.repeat(self.abs_max, lanes)
        raising = np.flatnonzero(top > maxima.take(cells))
        np.maximum.at(self.abs_max, cells[raising] // lanes, top[raising])

    def rows(self, label: Any) -> list[dict[str, Any]]:
        """One dict per non-empty bucket: counts, mean ℓ, mean |ℓ|, std of ℓ, k3 mean, max |ℓ|.

        std = √(max(0, Σℓ²/n − (Σℓ/n)²)), +inf when Σℓ² is (then no finite spread describes ℓ;
        otherwise (Σℓ/n)² ≤ Σℓ²/n is finite too).
        """
        out = []
        for b in range(self.size):
            tokens = float(self.sums["tokens"][b])
            if tokens == 0:
                continue
            mean = float(self.sums["sum"][b]) / tokens
            mean_square = float(self.sums["sq_sum"][b]) / tokens
            variance = max(0.0, mean_square - mean * mean) if mean_square < np.inf else np.inf
            out.append(
                {
                    "bucket": b,
                    "label": label(b),
                    "tokens": int(tokens),
                    "mean_log_ratio": float(mean),
                    "mean_abs_log_ratio": float(self.sums["abs_sum"][b] / tokens),
                    "std_log_ratio": float(np.sqrt(variance)),
                    "k3": float(self.sums["k3_sum"][b] / tokens),
                    "max_abs_log_ratio": float(self.abs_max[b]),
                }
            )
        return out
