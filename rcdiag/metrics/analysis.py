"""Streaming analysis of a dump: one pass, per-step and overall metrics (docs/metrics.md).

Pure: consumes :class:`~rcdiag.metrics.ragged.RaggedBatch` es, returns numbers; reading files and
printing happen elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from rcdiag.dialects import DEFAULT_DIALECT, Dialect
from rcdiag.errors import UsageError
from rcdiag.metrics.evidence import EVIDENCE_STATISTICS, LagBreakdown, evidence_statistics
from rcdiag.metrics.grouped import GroupedStats
from rcdiag.metrics.offpolicy import (
    DEFAULT_VETO_THRESHOLD,
    LOG_RATIO_QUANTILES,
    ROW_STATISTICS,
    masked_log_ratio,
    offpolicy_metrics,
    row_statistics,
)
from rcdiag.metrics.ragged import F64, RaggedBatch
from rcdiag.metrics.sketch import QuantileSketch

Metrics = dict[str, float | None]


class StepMetrics(NamedTuple):
    """Every metric of one step, with its rows and valid tokens."""

    step: int
    rows: int
    valid_tokens: int
    metrics: Metrics


@dataclass(frozen=True)
class AnalyzeOptions:
    """What to compute.

    Args:
        dialect: ``latest`` or ``legacy`` (legacy adds verl's two veto metrics).
        veto_threshold: τ given by the user. rcdiag's own veto metrics use τ or 1e-4; verl's legacy
            veto metrics are 0.0 without it, as verl logged them when the veto was off.
    """

    dialect: Dialect = DEFAULT_DIALECT
    veto_threshold: float | None = None

    def __post_init__(self) -> None:
        if self.veto_threshold is not None and not self.veto_threshold > 0:
            raise UsageError(f"--veto-threshold must be > 0, got {self.veto_threshold}")

    @property
    def effective_veto_threshold(self) -> float:
        return DEFAULT_VETO_THRESHOLD if self.veto_threshold is None else self.veto_threshold

    @property
    def legacy_veto(self) -> bool | None:
        return None if self.dialect == "latest" else self.veto_threshold is not None


class OffPolicyAnalysis:
    """Accumulates batches; then gives every metric per step and overall.

    Example:
        >>> batch = RaggedBatch(rollout=np.log([0.5, 0.5]), old=np.log([0.5, 0.25]),
        ...     mask=np.array([True, True]), offsets=np.array([0, 2]), steps=np.array([0]))
        >>> a = OffPolicyAnalysis()
        >>> sorted(a.update(batch))[:3]  # the batch's per-row statistics, for other consumers
        ['abs_log_ratio', 'abs_log_ratio_max', 'catastrophic_tokens']
        >>> round(a.overall()["rollout_corr/kl"], 6)  # mean of (rollout − old) = log(2) / 2
        0.346574
    """

    def __init__(self, options: AnalyzeOptions | None = None) -> None:
        self.options = options or AnalyzeOptions()
        self.stats = GroupedStats(ROW_STATISTICS)
        self.sketch = QuantileSketch()
        self.evidence = GroupedStats(EVIDENCE_STATISTICS)
        self.lags = LagBreakdown()

    def update(self, batch: RaggedBatch) -> dict[str, F64] | None:
        """Fold one batch of rows into the per-step statistics; returns the batch's per-row
        statistics (:data:`~rcdiag.metrics.offpolicy.ROW_STATISTICS`) for other consumers, None for
        a batch without rows."""
        if batch.rows == 0:
            return None
        slots = self.stats.slots_for(batch.steps)
        log_ratio = masked_log_ratio(batch)
        row_stats = row_statistics(batch, log_ratio, self.options.effective_veto_threshold)
        self.stats.add(slots, row_stats)
        self.evidence.add(self.evidence.slots_for(batch.steps), evidence_statistics(batch))
        self.lags.update(batch, row_stats)
        local, local_of_row = np.unique(slots, return_inverse=True)
        valid_log_ratio = log_ratio if batch.all_valid else log_ratio[batch.mask]
        token_slots = (
            None  # one group
            if local.size == 1
            else np.repeat(local_of_row.reshape(-1), batch.lengths)[batch.mask]
        )
        largest = float(row_stats["abs_log_ratio_max"].max())  # every valid |ℓ| is at most it
        self.sketch.add(token_slots, valid_log_ratio, self.stats.keys_of_slots(local), largest)
        return row_stats

    def merge(self, other: OffPolicyAnalysis) -> None:
        """Fold in an analysis of other rows of the same dump (another worker's files): the
        result is that of one analysis fed both, up to the order of floating-point sums."""
        if other.options != self.options:
            raise ValueError("cannot merge analyses with different options")
        self.stats.merge(other.stats)
        self.sketch.merge(other.sketch)
        self.evidence.merge(other.evidence)
        self.lags.merge(other.lags)

    def consume(self, batches: Iterable[RaggedBatch]) -> OffPolicyAnalysis:
        for batch in batches:
            self.update(batch)
        return self

    def steps(self) -> list[int]:
        return self.stats.keys()

    def _metrics(self, stats: dict[str, float], quantiles: Sequence[float]) -> Metrics:
        """The metrics of a batch from its statistics and its ℓ quantiles (in
        :data:`LOG_RATIO_QUANTILES` order; unused when the batch has no valid token)."""
        metrics = offpolicy_metrics(stats, legacy_veto=self.options.legacy_veto)
        if stats["valid_tokens"] > 0:
            for name, value in zip(LOG_RATIO_QUANTILES, quantiles, strict=True):
                metrics[f"rcdiag/log_ratio_{name}"] = value
        return metrics

    def _result(
        self, step: int, stats: dict[str, float], quantiles: Sequence[float]
    ) -> StepMetrics:
        return StepMetrics(
            step=step,
            rows=int(stats["rows"]),
            valid_tokens=int(stats["valid_tokens"]),
            metrics=self._metrics(stats, quantiles),
        )

    def step_result(self, step: int) -> StepMetrics:
        """The result of one step."""
        quantiles = [self.sketch.quantile(step, q) for q in LOG_RATIO_QUANTILES.values()]
        return self._result(step, self.stats.group(step), quantiles)

    def step_results(self) -> list[StepMetrics]:
        """The result of every step, by step: one sweep over the statistics and the sketch."""
        groups = self.stats.groups()
        keys, table = self.sketch.quantiles(list(LOG_RATIO_QUANTILES.values()))
        quantiles = dict(zip(keys.tolist(), table.tolist(), strict=True))
        return [self._result(s, groups[s], quantiles.get(s, ())) for s in self.steps()]

    def overall(self) -> Metrics:
        """The whole dump as one batch."""
        quantiles = self.sketch.pooled_quantiles(list(LOG_RATIO_QUANTILES.values()))
        return self._metrics(self.stats.total(), quantiles.tolist())
