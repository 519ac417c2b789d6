"""Sequence-level Poisson bootstrap of the overall metrics, streaming, with bounded memory.

The classical bootstrap resamples the B sequences (rows) of a dump with replacement; a row then
appears c_i ~ Multinomial(B, 1/B) times. The **Poisson bootstrap** (Hanley & MacGibbon 2006;
Chamandy et al. 2012) replaces the counts by independent weights c_ik ~ Poisson(1), which is the same
for large B and needs neither B nor a second pass. Every metric rcdiag computes from summed row
statistics (:data:`~rcdiag.metrics.offpolicy.ROW_STATISTICS` of kind ``sum``) then has, for
replicate k = 1…K,

.. math::
    T^*_k = f\\Big(\\sum_i c_{ik}\\, s_i\\Big)

where s_i are row i's statistics and f is :func:`~rcdiag.metrics.offpolicy.offpolicy_metrics`, the
same finalising formula as the point estimate. Memory is K × (number of statistics), whatever the
dump size. Metrics that need a maximum, a minimum or a quantile (``log_ppl_diff_max``,
``abs_log_ratio_max``, ``response_length_max``, ``log_ratio_p*``) come out NaN: they are not
bootstrapped.

**Reproducibility.** c_ik is a pure function of (seed, stream, row index, k): SplitMix64 in counter
mode (Steele et al. 2014) turns the counter ``row·K + k`` into 64 random bits, keyed by
``SeedSequence((seed, stream))``, and the Poisson(1) inverse CDF turns them into a count. The row
index is the row's position among all rows of the dump in reading order (files sorted by path, rows
in file order, before step selection), so results depend neither on batch sizes nor on how the
files are split among workers, and the same seed gives identical replicates. The baseline uses stream 0
and ``rcdiag check`` stream 1, so the weights of the two dumps are independent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from numpy.typing import NDArray

from rcdiag.metrics.distributions import quantiles
from rcdiag.metrics.offpolicy import (
    DEFAULT_VETO_THRESHOLD,
    ROW_STATISTICS,
    masked_log_ratio,
    offpolicy_metrics,
    row_statistics,
)
from rcdiag.metrics.ragged import F64, I64, RaggedBatch

U64 = NDArray[np.uint64]

DEFAULT_REPLICATES = 500
MAX_REPLICATES = 100_000
"""More replicates add nothing a percentile interval can use and cost K × statistics memory."""
DEFAULT_SEED = 0
BASELINE_STREAM = 0
CHECK_STREAM = 1

SUM_STATISTICS: tuple[str, ...] = tuple(n for n, kind in ROW_STATISTICS.items() if kind == "sum")
"""The row statistics a bootstrap replicate re-weights; the others (max, min) are not resampled."""

ROWS_PER_CHUNK = 4096
"""Rows whose weights are drawn at once: bounds the [rows, K] weight matrix of one batch."""

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_POISSON_MAX = 24
_POISSON_CDF = np.cumsum([math.exp(-1.0) / math.factorial(k) for k in range(_POISSON_MAX)])


def _splitmix64(z: U64) -> U64:
    """SplitMix64's output function (a bijective 64-bit mixer); wraps modulo 2⁶⁴."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def stream_key(seed: int, stream: int) -> np.uint64:
    """The 64-bit key of a (seed, stream) pair."""
    return np.uint64(np.random.SeedSequence((seed, stream)).generate_state(1, np.uint64)[0])


def poisson_weights(rows: I64, replicates: int, key: np.uint64) -> F64:
    """Poisson(1) weights c[i, k] of the given global row indices, [len(rows), replicates].

    Example:
        >>> key = stream_key(0, 0)
        >>> w = poisson_weights(np.arange(20_000), 50, key)
        >>> round(float(w.mean()), 2), round(float(w.var()), 2)
        (1.0, 1.0)
        >>> bool((poisson_weights(np.arange(5, 7), 50, key) == w[5:7]).all())
        True
    """
    counter = rows.astype(np.uint64)[:, None] * np.uint64(replicates) + np.arange(
        replicates, dtype=np.uint64
    )
    with np.errstate(over="ignore"):
        bits = _splitmix64(key + (counter + np.uint64(1)) * _GOLDEN)
    uniform = (bits >> np.uint64(11)).astype(np.float64) * 2.0**-53
    return np.searchsorted(_POISSON_CDF, uniform, side="right").astype(np.float64)


class PoissonBootstrap:
    """Accumulates K weighted sums of every row statistic; then K replicates of every metric.

    Args:
        replicates: K.
        seed: the user's seed.
        stream: :data:`BASELINE_STREAM` or :data:`CHECK_STREAM`.
        veto_threshold: τ of the veto statistics (as in the analysis).

    Example:
        >>> rng = np.random.default_rng(0)
        >>> lp = -rng.exponential(size=(2, 400))
        >>> batch = RaggedBatch(rollout=lp[0], old=lp[1], mask=np.ones(400, dtype=bool),
        ...     offsets=np.arange(0, 401, 4), steps=np.zeros(100, dtype=np.int64))
        >>> boot = PoissonBootstrap(replicates=100)
        >>> boot.update(batch)
        >>> reps = boot.replicate_metrics()
        >>> reps["rollout_corr/ppl_ratio"].shape, bool(np.isnan(reps["rcdiag/abs_log_ratio_max"]).all())
        ((100,), True)
    """

    def __init__(
        self,
        replicates: int = DEFAULT_REPLICATES,
        seed: int = DEFAULT_SEED,
        stream: int = BASELINE_STREAM,
        veto_threshold: float = DEFAULT_VETO_THRESHOLD,
    ) -> None:
        if replicates < 2:
            raise ValueError(f"replicates must be ≥ 2, got {replicates}")
        self.replicates = replicates
        self.seed = seed
        self.veto_threshold = veto_threshold
        self._key = stream_key(seed, stream)
        self._rows = 0
        self._sums = np.zeros((replicates, len(SUM_STATISTICS)))

    def update(self, batch: RaggedBatch) -> None:
        """Fold one batch of rows into the K weighted sums."""
        if batch.rows == 0:
            return
        stats = row_statistics(batch, masked_log_ratio(batch), self.veto_threshold)
        self.add(stats, batch.stream_rows)

    def add(self, stats: Mapping[str, F64], stream_rows: I64 | None = None) -> None:
        """Fold the :func:`~rcdiag.metrics.offpolicy.row_statistics` of some rows into the K
        weighted sums; for a caller that has computed them already. ``stream_rows``: the rows'
        positions in the dump (:attr:`RaggedBatch.stream_rows`); None: the rows that follow the
        ones added so far."""
        table = np.column_stack([stats[name] for name in SUM_STATISTICS])
        rows = table.shape[0]
        if stream_rows is None:
            stream_rows = np.arange(self._rows, self._rows + rows, dtype=np.int64)
        for start in range(0, rows, ROWS_PER_CHUNK):
            stop = min(start + ROWS_PER_CHUNK, rows)
            weights = poisson_weights(stream_rows[start:stop], self.replicates, self._key)
            with np.errstate(over="ignore", invalid="ignore"):  # +inf, or ∞ − ∞ = NaN, intended
                self._sums += weighted_sums(weights, table[start:stop])
        self._rows += rows

    def merge(self, other: PoissonBootstrap) -> None:
        """Fold in the weighted sums of other rows of the same dump (rows weighted by their
        position in the dump, so the split does not change the replicates)."""
        if (other.replicates, other._key) != (self.replicates, self._key):
            raise ValueError("cannot merge bootstraps of different replicates or seeds")
        with np.errstate(over="ignore", invalid="ignore"):
            self._sums += other._sums
        self._rows += other._rows

    @property
    def rows(self) -> int:
        return self._rows

    def replicate_metrics(self, legacy_veto: bool | None = None) -> dict[str, F64]:
        """Metric name → its K replicate values (NaN where a metric is not bootstrapped)."""
        not_summed = {n: math.nan for n, kind in ROW_STATISTICS.items() if kind != "sum"}
        columns: dict[str, list[float]] = {}
        for k in range(self.replicates):
            stats = {**dict(zip(SUM_STATISTICS, self._sums[k].tolist(), strict=True)), **not_summed}
            with np.errstate(all="ignore"):
                metrics = offpolicy_metrics(stats, legacy_veto=legacy_veto)
            for name, value in metrics.items():
                columns.setdefault(name, []).append(math.nan if value is None else value)
        return {name: np.asarray(values, dtype=np.float64) for name, values in columns.items()}


def weighted_sums(weights: F64, table: F64) -> F64:
    """Σ_i c_ik s_ij for every replicate k and statistic j: ``weights.T @ table``, except that a
    row with weight 0 is absent from the replicate even when its statistic is infinite (a product
    0 · ∞ would make it NaN): an infinite s_ij counts, with its sign, where c_ik > 0, and a NaN
    s_ij makes NaN.

    Example:
        >>> weighted_sums(np.array([[0.0, 2.0], [1.0, 1.0]]), np.array([[np.inf], [1.0]])).tolist()
        [[1.0], [inf]]
    """
    finite = np.isfinite(table)
    if finite.all():
        return weights.T @ table
    sums = weights.T @ np.where(finite, table, 0.0)
    drawn = weights.T > 0
    up = (drawn.astype(np.float64) @ (table == np.inf)) > 0
    down = (drawn.astype(np.float64) @ (table == -np.inf)) > 0
    undefined = (drawn.astype(np.float64) @ np.isnan(table)) > 0
    sums[up] = np.inf
    sums[down] = -np.inf
    sums[undefined | (up & down)] = np.nan
    return sums


def bootstrapped(replicates: Mapping[str, F64]) -> dict[str, F64]:
    """Only the metrics that have finite replicates (the ones a baseline stores)."""
    return {name: reps for name, reps in replicates.items() if np.isfinite(reps).any()}


def difference_interval(
    current: F64, baseline: F64, confidence: float
) -> tuple[float, float] | None:
    """Central ``confidence`` percentile interval of (current − baseline).

    The two dumps' replicates are independent, so c*_k − b*_k (k = 1…K) is a draw from the
    bootstrap distribution of the difference; its (1 ∓ confidence)/2 quantiles bound it. ``None``
    when fewer than 10 replicate pairs are finite (a metric that is not bootstrapped).

    Example:
        >>> lo, hi = difference_interval(np.linspace(1, 2, 101), np.zeros(101), 0.9)
        >>> round(lo, 2), round(hi, 2)
        (1.05, 1.95)
    """
    size = min(current.size, baseline.size)
    diff = current[:size] - baseline[:size]
    diff = diff[np.isfinite(diff)]
    if diff.size < 10:
        return None
    low, high = quantiles(diff, [(1 - confidence) / 2, (1 + confidence) / 2])
    return low, high
