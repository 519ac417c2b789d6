"""What the detectors of the diagnosis read and return, and the limits they compare against.

Shared by :mod:`rcdiag.assess.diagnosis.dump_bugs` and :mod:`rcdiag.assess.diagnosis.mismatch`;
docs/diagnosis.md states each statistic and its false-positive control.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rcdiag.metrics.distributions import median
from rcdiag.metrics.growth import Growth, growth_test
from rcdiag.metrics.records import MetricRecord
from rcdiag.model.diagnosis import Cause, Kind
from rcdiag.status import Status

DETECTOR_LIMITS: dict[str, float] = {
    "positive_share": 0.01,
    "z": 4.0,
    "z_kl": 3.0,
    "processed_shortfall": 0.01,
    "processed_balance": 0.5,
    "temperature_slope": 0.1,
    "temperature_correlation": 0.9,
    "temperature_steps": 0.8,
    "misaligned_gap_ratio": 0.5,
    "min_pairs": 100,
    "unpaired_share": 0.05,
    "unpaired_balance": 0.3,
    "min_pairing_rows": 20,
    "stale_ratio": 2.0,
    "min_lag_tokens": 100,
    "tail_ratio": 3.0,
    "tail_size": 1.0,
    "drift_rise": 0.5,
    "drift_alpha": 0.01,
    "pad_row_share": 0.02,
    "min_pad_tokens": 20,
    "context_ratio": 10.0,
    "context_gap": 0.3,
    "min_context_tokens": 100,
    "position_ratio": 3.0,
    "min_position_tokens": 100,
}
"""Every limit of the detectors (docs/diagnosis.md explains each).

* ``positive_share``: share of valid tokens holding a log-prob > 0.01 that makes a column logits.
* ``z``, ``z_kl``: one-sided z-scores (sequence-clustered standard errors) of mean ρ − 1 (either
  side) and of kl < 0.
* ``processed_shortfall``, ``processed_balance``: mean ρ at least 1% below 1, and the excess of ρ
  above 1 less than half its shortfall below 1.
* ``temperature_*``: |slope − 1| of log π_train on log π_rollout, the fit's correlation, and the
  share of steps whose own slope deviates the same way by at least half as much.
* ``misaligned_gap_ratio``: the columns' mean |Δ log p| at the same position reaching this share of
  the smallest one against a neighbouring position (aligned columns sit far below: one token's
  two log-probs differ far less than two tokens' do); a shift whose gap is below this share of the
  aligned one names the offset. ``min_pairs`` sampled pairs needed.
* ``unpaired_share``, ``min_pairing_rows``: the share of responses whose columns are no closer at
  the same position than at a neighbouring one (:mod:`rcdiag.metrics.evidence`, pairing), among
  at least this many responses that can show it; over those rows |Σ(x − y)| / Σ|x − y| below
  ``unpaired_balance`` (two responses' log-probs differ both ways alike; a real mismatch that
  large is one-sided, its mean being KL ≥ 0).
* ``stale_ratio``: k3_kl of lagged rows over that of lag-0 rows; ``min_lag_tokens`` per lag.
* ``tail_ratio``, ``tail_size``: (p99.9 − p0.1) / (p99 − p1) of ℓ (1.33 for a normal law) and the
  size of the outer quantiles that makes a tail matter.
* ``pad_row_share``, ``min_pad_tokens``: the share of responses that end in a padded tail
  (:mod:`rcdiag.metrics.positions`: one column repeating one value over the last positions while
  the other does not, the two apart by more than 1 there), and the fewest such positions.
* ``context_ratio``, ``context_gap``, ``min_context_tokens``: mean |Δ log p| over the first four
  positions of the responses at least this many times that from position 16 on, and at least
  ``context_gap`` itself, falling from there to position 16, on at least this many tokens.
* ``position_ratio``, ``min_position_tokens``: mean |Δ log p| from position 32 on at least this
  many times that over positions 0–7 (and past healthy), on at least this many tokens each.
* ``drift_rise``, ``drift_alpha``: a rise of k3_kl by more than 50% over the steps, significant
  at level 0.01 in the growth test weighted by each step's standard error
  (:mod:`rcdiag.metrics.growth`).
"""


@dataclass(frozen=True)
class Detection:
    """What a detector found: how bad, in words, the numbers behind it, and what to do."""

    severity: Status
    summary: str
    evidence: dict[str, Any]
    advice: str


@dataclass(frozen=True)
class Observations:
    """What the detectors read, all from the one pass over the dump.

    Attributes:
        overall: the overall metrics (``rollout_corr/…``, ``rcdiag/…``).
        totals: the summed row and evidence statistics of the whole dump.
        step_evidence: per step (in step order), the summed evidence statistics.
        k3_steps: per step (in step order): the step, its k3_kl and that value's standard error.
        spikes: metrics whose overall status comes from one step alone, with that step
            (:mod:`rcdiag.assess.diagnosis.spikes`): judged healthy here.
        lags: the mismatch per policy lag, when the dump records it.
        positive_log_probs: valid positions where a column holds a log-prob > 0.01.
    """

    overall: Mapping[str, float | None]
    totals: Mapping[str, float]
    step_evidence: Sequence[Mapping[str, float]] = ()
    k3_steps: Sequence[tuple[int, float | None, float | None]] = ()
    spikes: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def level(self, record: MetricRecord, value: float | None) -> Status | None:
        """``record``'s status of ``value``, healthy for a metric set by an isolated spike step."""
        if record.name in self.spikes:
            return "healthy"
        return record.status(value)

    lags: Sequence[Mapping[str, Any]] | None = None
    positive_log_probs: int = 0

    @functools.cached_property
    def k3_growth(self) -> Growth:
        """Whether k3_kl grows over the steps (:func:`rcdiag.metrics.growth.growth_test`)."""
        steps = [s for s, _, _ in self.k3_steps]
        values = [math.nan if v is None else v for _, v, _ in self.k3_steps]
        errors = [math.nan if e is None else e for _, _, e in self.k3_steps]
        return growth_test(steps, values, DETECTOR_LIMITS["drift_alpha"], errors)

    @property
    def recent_k3_kl(self) -> float | None:
        """Median k3_kl over the last quarter of the steps with a value (None with fewer than 2)."""
        values = self._k3_values()
        if len(values) < 2:
            return None
        return median(values[-max(1, len(values) // 4) :])

    @property
    def first_k3_kl(self) -> float | None:
        """Median k3_kl over the first quarter of the steps with a value (None with fewer than 2)."""
        values = self._k3_values()
        if len(values) < 2:
            return None
        return median(values[: max(1, len(values) // 4)])

    def _k3_values(self) -> list[float]:
        return [v for _, v, _ in self.k3_steps if v is not None and math.isfinite(v)]

    def position_mean(self, edges: tuple[int, ...]) -> tuple[float, float] | None:
        """Mean |ℓ| over the position bins starting at ``edges`` (:mod:`rcdiag.metrics.positions`)
        and the valid tokens there; None without any."""
        count = sum(self.totals[f"pos_{e}_n"] for e in edges)
        if not count:
            return None
        return sum(self.totals[f"pos_{e}_abs"] for e in edges) / count, count

    def metric(self, name: str) -> float | None:
        value = self.overall.get(name)
        return None if value is None or math.isnan(value) else float(value)


@dataclass(frozen=True)
class CauseRecord:
    """One cause rcdiag can diagnose: the only place its id, kind, title, detector, limits and
    documentation are written (the detector's :class:`Detection` carries the summary, the evidence
    and the advice, which hold the dump's numbers).

    Attributes:
        id: the id in the JSON documents (``growing_drift``).
        kind: ``dump_bug`` (fix the pipeline; never corrected with IS/RS) or ``mismatch``.
        title: its name as a person reads it.
        detect: the detector: a :class:`Detection`, or None when the cause is not found.
        limits: the :data:`DETECTOR_LIMITS` it compares against.
        docs: where its statistic and false-positive control are documented.
    """

    id: str
    kind: Kind
    title: str
    detect: Callable[[Observations], Detection | None]
    limits: tuple[str, ...] = ()
    docs: str = ""

    def run(self, observations: Observations) -> Cause | None:
        found = self.detect(observations)
        if found is None:
            return None
        return Cause(
            self.id,
            self.kind,
            found.severity,
            found.summary,
            found.evidence,
            found.advice,
            self.title,
        )


DUMP_BUGS_DOCS = "docs/diagnosis.md#dump-bugs"
MISMATCH_DOCS = "docs/diagnosis.md#real-mismatch"


def ratio_z(total: float, count: float, sq: float, cross: float, count_sq: float) -> float:
    """z-score of a ratio estimate r = total / count against 0 clustered by sequence.

    With per-sequence sums T_i and counts n_i, Var(r) ≈ Σ(T_i − r·n_i)² / (Σn_i)²
    = (ΣT_i² − 2rΣT_i·n_i + r²Σn_i²) / (Σn_i)².
    """
    r = total / count
    variance = max(0.0, sq - 2.0 * r * cross + r * r * count_sq) / (count * count)
    if variance == 0.0:
        return math.copysign(math.inf, r) if r else 0.0
    return r / math.sqrt(variance)
