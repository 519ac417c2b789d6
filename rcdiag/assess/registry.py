"""The metric registry: one record per judged metric, the only place a health threshold is written.

Each :class:`MetricRecord` names a metric, how it reads to a person, where its formula is documented,
which way is worse, and its ``watch`` and ``act`` bands with the published source of each
(docs/metrics.md, "Health bands"). One status vocabulary serves every command:

* ``healthy`` — inside every published range;
* ``watch`` — past a range that calls for attention (verl's documentation "warns"), not for a change;
* ``act`` — past a range that calls for a fix or a correction (verl's "severe", another framework's
  CI gate).

``rcdiag analyze`` shows the status of each metric, ``rcdiag check``'s default rules fail on ``act``
and report ``watch``, the report draws its gauges from the bands, and the verdict of
:mod:`rcdiag.assess.verdict` is the worst status among the metrics and the diagnosed causes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from rcdiag.model.diagnosis import STATUSES, MetricStatus, Status

_RANK: dict[str, int] = {s: i for i, s in enumerate(STATUSES)}

Worse = Literal["higher", "lower", "abs", "outside"]
"""Which values are worse: above the limit, below it, |value| above it, or outside [lo, hi]."""


@dataclass(frozen=True)
class Band:
    """Values past ``limit`` (in the record's worse direction) have ``status``; ``source`` says who
    published the limit."""

    status: Status
    limit: float | tuple[float, float]
    source: str
    name: str = ""
    """A short name of the limit for chart legends (e.g. ``NeMo-RL gate``)."""


@dataclass(frozen=True)
class Gauge:
    """How the report draws the metric: axis range, log or linear, reference marks."""

    lo: float
    hi: float
    log: bool = True
    marks: tuple[tuple[float, str], ...] = ()


@dataclass(frozen=True)
class MetricRecord:
    """One judged metric (module docstring)."""

    name: str
    label: str
    docs: str
    worse: Worse
    bands: tuple[Band, ...]
    gauge: Gauge | None = None

    def breaches(self, value: float, band: Band) -> bool:
        """Whether ``value`` is past ``band``'s limit."""
        if self.worse == "outside":
            assert isinstance(band.limit, tuple)
            low, high = band.limit
            return not low <= value <= high
        assert isinstance(band.limit, float)
        if self.worse == "lower":
            return value < band.limit
        return (abs(value) if self.worse == "abs" else value) > band.limit

    def status(self, value: float | None) -> Status | None:
        """The most severe band ``value`` breaches (``healthy`` when none; None without a value)."""
        if value is None or math.isnan(value):
            return None
        found: Status = "healthy"
        for band in self.bands:
            if self.breaches(value, band) and _RANK[band.status] > _RANK[found]:
                found = band.status
        return found

    def band(self, status: Status) -> Band | None:
        """The band of ``status`` (None when the metric has none)."""
        return next((b for b in self.bands if b.status == status), None)

    def limit_text(self, band: Band) -> str:
        """The band as a condition a reader can check, e.g. ``|kl| > 0.1``."""
        short = self.name.rsplit("/", 1)[-1]
        if isinstance(band.limit, tuple):
            return f"{short} outside [{band.limit[0]:g}, {band.limit[1]:g}]"
        op = "<" if self.worse == "lower" else ">"
        shown = f"|{short}|" if self.worse == "abs" else short
        return f"{shown} {op} {band.limit:g}"


NEMO_RL = "NeMo-RL's CI gates bf16 runs at token KL < 1e-3; dense bf16 models sit at 1e-5 … 1e-3"
MOE_RANGE = "published K3 KL ranges: 1e-3 … 1e-1 for MoE models; beyond it nothing is normal"
SLIME = "slime's CI gates at mean |Δ log p| ≤ 0.1 (≈ 0.27 with an fp8 rollout)"
BF16_LEVEL = "healthy bf16 sits at mean |Δ log p| ≈ 0.01; rcdiag watches from twice that"

RECORDS: tuple[MetricRecord, ...] = (
    MetricRecord(
        "rollout_corr/k3_kl",
        "k3_kl (token KL, K3 estimator)",
        "docs/metrics.md#verls-off-policy-metrics-rollout_corr-every-dialect",
        "higher",
        (
            Band("watch", 1e-3, NEMO_RL, "NeMo-RL gate"),
            Band("act", 1e-1, MOE_RANGE, "top of MoE range"),
        ),
        Gauge(1e-6, 1.0, marks=((1e-3, "NeMo-RL gate"),)),
    ),
    MetricRecord(
        "rcdiag/abs_log_ratio_mean",
        "mean |Δ log p| per token",
        "docs/metrics.md#rcdiags-diagnostics-rcdiag",
        "higher",
        (Band("watch", 0.02, BF16_LEVEL, "2× healthy bf16"), Band("act", 0.1, SLIME, "slime gate")),
        Gauge(1e-3, 1.0, marks=((0.01, "healthy bf16 ≈ 0.01"), (0.27, "fp8 rollout ≈ 0.27"))),
    ),
    MetricRecord(
        "rollout_corr/kl",
        "|kl| (mean log π_rollout − log π_train)",
        "docs/metrics.md#verls-off-policy-metrics-rollout_corr-every-dialect",
        "abs",
        (Band("watch", 0.1, "verl's documentation: |kl| > 0.1 is a large mismatch", "verl"),),
        Gauge(1e-6, 1.0),
    ),
    MetricRecord(
        "rollout_corr/chi2_token",
        "χ²_token (E[ρ²] − 1 of token weights)",
        "docs/metrics.md#verls-off-policy-metrics-rollout_corr-every-dialect",
        "higher",
        (Band("act", 1.0, "verl's documentation: chi2_token > 1 is severe", "verl: severe"),),
        Gauge(1e-5, 100.0),
    ),
    MetricRecord(
        "rollout_corr/chi2_seq",
        "χ²_seq (E[(∏ρ)²] − 1 of sequence weights)",
        "docs/metrics.md#verls-off-policy-metrics-rollout_corr-every-dialect",
        "higher",
        (
            Band(
                "watch", 1.0, "verl's χ² > 1 alarm, applied to sequence weights (rcdiag)", "rcdiag"
            ),
        ),
        Gauge(1e-3, 1e4),
    ),
    MetricRecord(
        "rcdiag/ess_seq",
        "ESS of sequence weights (fraction)",
        "docs/metrics.md#rcdiags-diagnostics-rcdiag",
        "lower",
        (
            Band(
                "watch", 0.5, "rcdiag: below half, sequence-level weights are unreliable", "rcdiag"
            ),
        ),
    ),
    MetricRecord(
        "rcdiag/ess_token",
        "ESS of token weights (fraction)",
        "docs/metrics.md#rcdiags-diagnostics-rcdiag",
        "lower",
        (
            Band(
                "watch",
                0.3,
                "verl's documentation: ESS < 0.3 means few tokens carry the weight",
                "verl",
            ),
        ),
    ),
    MetricRecord(
        "rcdiag/catastrophic_token_fraction",
        "tokens with π_train/π_rollout < τ",
        "docs/metrics.md#rcdiags-diagnostics-rcdiag",
        "higher",
        (
            Band(
                "watch", 1e-5, "rcdiag: from 1 in 100,000 tokens a max criterion pays off", "rcdiag"
            ),
        ),
    ),
    MetricRecord(
        "rcdiag/veto_fraction",
        "sequences holding a catastrophic token",
        "docs/metrics.md#rcdiags-diagnostics-rcdiag",
        "higher",
        (Band("act", 0.1, "verl's documentation: veto fraction > 0.1", "verl"),),
        Gauge(0.0, 0.5, log=False),
    ),
    MetricRecord(
        "rollout_corr/rollout_is_veto_fraction",
        "sequences vetoed (verl, legacy)",
        "docs/metrics.md#verls-off-policy-metrics-rollout_corr-every-dialect",
        "higher",
        (Band("act", 0.1, "verl's documentation: veto fraction > 0.1"),),
    ),
    MetricRecord(
        "rollout_corr/rollout_is_mean",
        "mean IS weight",
        "docs/presets.md",
        "outside",
        (Band("watch", (0.5, 2.0), "verl's documentation: the IS weight mean stays in [0.5, 2]"),),
    ),
    MetricRecord(
        "rollout_corr/rollout_is_eff_sample_size",
        "ESS of the IS weights",
        "docs/presets.md",
        "lower",
        (Band("watch", 0.3, "verl's documentation: IS effective sample size < 0.3"),),
    ),
    MetricRecord(
        "rollout_corr/rollout_is_std",
        "std of the IS weights",
        "docs/presets.md",
        "higher",
        (Band("watch", 1.0, "verl's documentation: IS weight std > 1.0"),),
    ),
)

REGISTRY: dict[str, MetricRecord] = {r.name: r for r in RECORDS}
"""Records by metric name."""

SLIME_GATE = (
    "slime's CI asserts train/train_rollout_logprob_abs_diff ≤ 0.1 "
    "(slime/backends/megatron_utils/model.py, --ci-test)"
)
NEMO_MULT_GATE = (
    "NeMo-RL's tests fail a run with a step's token_mult_prob_error ≥ 1.05 (25 functional and "
    "recipe tests, e.g. tests/functional/grpo_dynamo.sh, main 7ea279a, 2026-08)"
)
NEMO_KL_GATE = (
    "NeMo-RL's strictest recipe gate on the mean gen_kl_error, 1e-3 (tests/test_suites/llm/"
    "dapo-nanov3.5-30BA3B-4n8g-automodel.sh, main 7ea279a, 2026-08; others gate at 2e-3 to 2e-2)"
)

FRAMEWORK_RECORDS: tuple[MetricRecord, ...] = (
    MetricRecord(
        "slime/train_rollout_logprob_abs_diff",
        "slime: per-sample mean |Δ log p|, averaged over samples",
        "docs/frameworks.md#slime",
        "higher",
        (Band("act", 0.1, SLIME_GATE),),
    ),
    MetricRecord(
        "nemo_rl/token_mult_prob_error",
        "NeMo-RL: token mean of exp|Δ log p|",
        "docs/frameworks.md#nemo-rl",
        "higher",
        (Band("act", 1.05, NEMO_MULT_GATE),),
    ),
    MetricRecord(
        "nemo_rl/gen_kl_error",
        "NeMo-RL: token mean K3 KL of generation against training",
        "docs/frameworks.md#nemo-rl",
        "higher",
        (Band("act", 1e-3, NEMO_KL_GATE),),
    ),
)
"""The CI gates other frameworks put on their own metrics (``analyze --frameworks``): judged in the
document's ``frameworks`` section, not in the verdict (rcdiag's own records judge the same
mismatch)."""

FRAMEWORK_REGISTRY: dict[str, MetricRecord] = {r.name: r for r in FRAMEWORK_RECORDS}


def worst(statuses: Iterable[Status | None]) -> Status:
    """The most severe status (``healthy`` for none).

    Example:
        >>> worst(["healthy", None, "watch"]), worst([])
        ('watch', 'healthy')
    """
    found: Status = "healthy"
    for status in statuses:
        if status is not None and _RANK[status] > _RANK[found]:
            found = status
    return found


def rank(status: Status) -> int:
    """0 for healthy, 1 for watch, 2 for act."""
    return _RANK[status]


def judge_frameworks(metrics: Mapping[str, float | None]) -> list[MetricStatus]:
    """The status of every framework gate (:data:`FRAMEWORK_RECORDS`) present in ``metrics``."""
    return judge(metrics, records=FRAMEWORK_RECORDS)


def judge(
    metrics: Mapping[str, float | None],
    skip: Iterable[str] = (),
    records: Iterable[MetricRecord] = RECORDS,
) -> list[MetricStatus]:
    """The status of every registry metric present (not null, not in ``skip``) in ``metrics``
    (the ``checks`` of a result document: :class:`~rcdiag.model.diagnosis.MetricStatus`)."""
    skipped = set(skip)
    out = []
    for record in records:
        value = metrics.get(record.name)
        status = record.status(value)
        if status is None or value is None or record.name in skipped:
            continue
        breached = record.band(status)
        out.append(
            MetricStatus(
                metric=record.name,
                value=float(value),
                status=status,
                band=record.limit_text(breached) if breached else None,
                source=breached.source if breached else None,
            )
        )
    return out
