"""One record per metric rcdiag shows: the only place its label, its unit, its formula's anchor in
docs/, which way is worse and its health bands (with who published each) are written.

Every output reads the record: the terminal tables and sentences, the report's cards, gauges and
charts, ``check``'s default rules, the verdict. A module refers to a metric through its record
(``K3_KL.name``, ``K3_KL.label``), never by spelling its name again; only the tables that compute
verl's metrics under verl's names (:mod:`rcdiag.metrics.offpolicy`) write the names themselves.

Statuses (:mod:`rcdiag.status`): a value past a ``watch`` band calls for attention, past an ``act``
band for a fix or a correction (docs/metrics.md, "Health bands").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from rcdiag.status import Status, rank, worst

Worse = Literal["higher", "lower", "abs", "outside"]
"""Which values are worse: above the limit, below it, |value| above it, or outside [lo, hi]."""


@dataclass(frozen=True)
class Band:
    """Values past ``limit`` (in the record's worse direction) have ``status``; ``source`` says who
    published the limit; ``name`` is its short name in chart legends (``NeMo-RL gate``)."""

    status: Status
    limit: float | tuple[float, float]
    source: str
    name: str = ""


@dataclass(frozen=True)
class GaugeRange:
    """How the report draws the metric on a gauge: axis range, log or linear, reference marks."""

    lo: float
    hi: float
    log: bool = True
    marks: tuple[tuple[float, str], ...] = ()


VERL_DOCS = "docs/metrics.md#verls-off-policy-metrics-rollout_corr-every-dialect"
RCDIAG_DOCS = "docs/metrics.md#rcdiags-diagnostics-rcdiag"
BANDS_DOCS = "docs/metrics.md#health-bands"


@dataclass(frozen=True)
class MetricRecord:
    """One metric (module docstring).

    Attributes:
        name: the name it is logged under (``rollout_corr/k3_kl``).
        label: how every output names it (``k3_kl``, ``mean |Δ log p|``).
        what: what it measures, in one sentence (the report's cards).
        docs: where its formula is documented.
        share: a fraction of tokens or sequences, shown as a percentage.
        worse: which values are worse (:data:`Worse`).
        bands: its ``watch`` and ``act`` bands (none: shown, never judged).
        gauge: how the report draws it on a gauge (None: no gauge).
        column: its header in the terminal's narrow per-step table (default: the label).
        stderr: the metric holding its per-step standard error, when one is computed (the
            growth test weighs the steps with it, :mod:`rcdiag.metrics.growth`).
        negative_judged_by: the metric that judges a negative value of this one (χ² < 0: the
            sampled weights average below 1, their mass lies in tails the dump did not sample;
            how badly is the ESS's to say), so a collapse is never labelled healthy.
    """

    name: str
    label: str
    what: str
    docs: str = VERL_DOCS
    share: bool = False
    worse: Worse = "higher"
    bands: tuple[Band, ...] = ()
    gauge: GaugeRange | None = None
    column: str = ""
    stderr: str | None = None
    negative_judged_by: str | None = None

    @property
    def header(self) -> str:
        """The header of the metric's column in a narrow table."""
        return self.column or self.label

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
        """The most severe band ``value`` breaches (``healthy`` when none; None without a value).

        Example:
            >>> K3_KL.status(0.02), K3_KL.status(1e-5), K3_KL.status(None)
            ('watch', 'healthy', None)
        """
        if value is None or math.isnan(value):
            return None
        found: Status = "healthy"
        for band in self.bands:
            if self.breaches(value, band) and rank(band.status) > rank(found):
                found = band.status
        return found

    def band(self, status: Status) -> Band | None:
        """The band of ``status`` (None when the metric has none)."""
        return next((b for b in self.bands if b.status == status), None)

    def limit(self, status: Status) -> float:
        """The limit of the band of ``status`` (a one-sided band)."""
        band = self.band(status)
        assert band is not None and isinstance(band.limit, float), (self.name, status)
        return band.limit

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
CHI2_WHAT = (
    "{sq} − 1 of the {w}: ≈ their variance when their mean is ≈ 1; negative when the weights "
    "are below 1 on average."
)

K3_KL_STDERR = MetricRecord(
    "rcdiag/k3_kl_stderr",
    "k3_kl standard error",
    "The sequence-clustered standard error of k3_kl.",
    docs=RCDIAG_DOCS,
)
K3_KL = MetricRecord(
    "rollout_corr/k3_kl",
    "k3_kl",
    "Token-level KL(π_rollout‖π_train), K3 estimator.",
    bands=(
        Band("watch", 1e-3, NEMO_RL, "NeMo-RL gate"),
        Band("act", 1e-1, MOE_RANGE, "top of MoE range"),
    ),
    gauge=GaugeRange(1e-6, 1.0, marks=((1e-3, "NeMo-RL gate"),)),
    stderr=K3_KL_STDERR.name,
)
ABS_LOG_RATIO_MEAN = MetricRecord(
    "rcdiag/abs_log_ratio_mean",
    "mean |Δ log p|",
    "Average per-token disagreement |log π_train − log π_rollout|.",
    docs=RCDIAG_DOCS,
    bands=(
        Band("watch", 0.02, BF16_LEVEL, "2× healthy bf16"),
        Band("act", 0.1, SLIME, "slime gate"),
    ),
    gauge=GaugeRange(
        1e-3, 1.0, marks=((0.01, "healthy bf16 ≈ 0.01"), (0.27, "fp8 rollout ≈ 0.27"))
    ),
    column="|Δlogp|",
)
KL = MetricRecord(
    "rollout_corr/kl",
    "kl",
    "Mean log π_rollout − log π_train: > 0 when the rollout engine is over-confident.",
    worse="abs",
    bands=(
        Band(
            "watch",
            1e-3,
            "kl estimates the same KL as k3_kl (the k1 estimator): judged on k3_kl's scale; "
            + NEMO_RL,
            "NeMo-RL gate",
        ),
        Band("act", 0.1, "verl's documentation: |kl| > 0.1 is a large mismatch", "verl"),
    ),
    gauge=GaugeRange(1e-6, 1.0, marks=((1e-3, "NeMo-RL gate"),)),
)
CHI2_TOKEN = MetricRecord(
    "rollout_corr/chi2_token",
    "χ²_token",
    CHI2_WHAT.format(w="token IS weights ρ", sq="E[ρ²]"),
    bands=(Band("act", 1.0, "verl's documentation: chi2_token > 1 is severe", "verl: severe"),),
    gauge=GaugeRange(1e-5, 100.0),
    column="χ² tok",
    negative_judged_by="rcdiag/ess_token",
)
CHI2_SEQ = MetricRecord(
    "rollout_corr/chi2_seq",
    "χ²_seq",
    CHI2_WHAT.format(w="sequence IS weights ∏ρ", sq="E[(∏ρ)²]"),
    bands=(
        Band("watch", 1.0, "verl's χ² > 1 alarm, applied to sequence weights (rcdiag)", "rcdiag"),
    ),
    gauge=GaugeRange(1e-3, 1e4),
    column="χ² seq",
    negative_judged_by="rcdiag/ess_seq",
)
ESS_SEQ = MetricRecord(
    "rcdiag/ess_seq",
    "ESS_seq",
    "Effective share of sequences once weighted by ∏ρ.",
    docs=RCDIAG_DOCS,
    worse="lower",
    bands=(
        Band("watch", 0.5, "rcdiag: below half, sequence-level weights are unreliable", "rcdiag"),
    ),
)
ESS_TOKEN = MetricRecord(
    "rcdiag/ess_token",
    "ESS_token",
    "Effective share of tokens once weighted by ρ.",
    docs=RCDIAG_DOCS,
    worse="lower",
    bands=(
        Band(
            "watch",
            0.3,
            "verl's documentation: ESS < 0.3 means few tokens carry the weight",
            "verl",
        ),
    ),
    column="ESS tok",
)
CATASTROPHIC_TOKENS = MetricRecord(
    "rcdiag/catastrophic_token_fraction",
    "catastrophic tokens",
    "Tokens with π_train/π_rollout < τ (τ = 1e-4 unless set).",
    docs=RCDIAG_DOCS,
    share=True,
    bands=(
        Band("watch", 1e-5, "rcdiag: from 1 in 100,000 tokens a max criterion pays off", "rcdiag"),
    ),
)
VETO_FRACTION = MetricRecord(
    "rcdiag/veto_fraction",
    "catastrophic sequences",
    "Sequences holding a token with π_train/π_rollout < τ.",
    docs=RCDIAG_DOCS,
    share=True,
    bands=(Band("act", 0.1, "verl's documentation: veto fraction > 0.1", "verl"),),
    gauge=GaugeRange(0.0, 0.5, log=False),
    column="veto",
)
VERL_VETO_FRACTION = MetricRecord(
    "rollout_corr/rollout_is_veto_fraction",
    "vetoed sequences",
    "Sequences verl's legacy veto rejects (0.0 when the veto is off).",
    share=True,
    bands=(Band("act", 0.1, "verl's documentation: veto fraction > 0.1"),),
)
IS_MEAN = MetricRecord(
    "rollout_corr/rollout_is_mean",
    "mean IS weight",
    "The mean of the importance weights a configuration applies.",
    docs=BANDS_DOCS,
    worse="outside",
    bands=(
        Band("watch", (0.5, 2.0), "verl's documentation: the IS weight mean stays in [0.5, 2]"),
    ),
)
IS_ESS = MetricRecord(
    "rollout_corr/rollout_is_eff_sample_size",
    "ESS of the IS weights",
    "The effective share of samples under a configuration's importance weights.",
    docs=BANDS_DOCS,
    worse="lower",
    bands=(Band("watch", 0.3, "verl's documentation: IS effective sample size < 0.3"),),
)
IS_STD = MetricRecord(
    "rollout_corr/rollout_is_std",
    "std of the IS weights",
    "The spread of a configuration's importance weights.",
    docs=BANDS_DOCS,
    bands=(Band("watch", 1.0, "verl's documentation: IS weight std > 1.0"),),
)
LOG_PPL_ABS_DIFF = MetricRecord(
    "rollout_corr/log_ppl_abs_diff",
    "log_ppl_abs_diff",
    "Mean over sequences of |mean token Δ log p|: what geometric rejection filters.",
)
PPL_RATIO = MetricRecord(
    "rollout_corr/ppl_ratio",
    "ppl_ratio",
    "Mean over sequences of the training over the rollout perplexity.",
    column="ppl ratio",
)
RATIO_OUTSIDE_HALF_TWO = MetricRecord(
    "rcdiag/ratio_outside_0.5_2",
    "tokens with ρ ∉ [0.5, 2]",
    "Tokens whose probability differs by more than 2× between the engines.",
    docs=RCDIAG_DOCS,
    share=True,
)
ABS_LOG_RATIO_MAX = MetricRecord(
    "rcdiag/abs_log_ratio_max",
    "max |Δ log p|",
    "The largest per-token disagreement |log π_train − log π_rollout|.",
    docs=RCDIAG_DOCS,
)
RATIO_OUTSIDE_TENTH = MetricRecord(
    "rcdiag/ratio_outside_0.9_1.1",
    "tokens with ρ ∉ [0.9, 1.1]",
    "Tokens whose probability differs by more than 10% between the engines.",
    docs=RCDIAG_DOCS,
    share=True,
)
RESPONSE_LENGTH_MAX = MetricRecord(
    "rcdiag/response_length_max",
    "longest response",
    "Valid tokens of the longest sequence.",
    docs=RCDIAG_DOCS,
)
RESPONSE_LENGTH_MEAN = MetricRecord(
    "rcdiag/response_length_mean",
    "response length",
    "Valid tokens per sequence (mean; max in the note).",
    docs=RCDIAG_DOCS,
)

RECORDS: tuple[MetricRecord, ...] = (
    K3_KL,
    ABS_LOG_RATIO_MEAN,
    KL,
    CHI2_TOKEN,
    CHI2_SEQ,
    ESS_SEQ,
    ESS_TOKEN,
    CATASTROPHIC_TOKENS,
    VETO_FRACTION,
    VERL_VETO_FRACTION,
    IS_MEAN,
    IS_ESS,
    IS_STD,
    LOG_PPL_ABS_DIFF,
    PPL_RATIO,
    RATIO_OUTSIDE_HALF_TWO,
    RATIO_OUTSIDE_TENTH,
    ABS_LOG_RATIO_MAX,
    RESPONSE_LENGTH_MEAN,
    RESPONSE_LENGTH_MAX,
    K3_KL_STDERR,
)
"""Every metric with a record, the judged ones (with bands) first."""

JUDGED: tuple[MetricRecord, ...] = tuple(r for r in RECORDS if r.bands)
"""The metrics with health bands: the ``checks`` of a document, ``check``'s default rules."""

REGISTRY: dict[str, MetricRecord] = {r.name: r for r in RECORDS}
"""Records by metric name."""

KEY_METRICS: tuple[MetricRecord, ...] = (
    K3_KL,
    ABS_LOG_RATIO_MEAN,
    KL,
    CHI2_TOKEN,
    CHI2_SEQ,
    ESS_TOKEN,
    ESS_SEQ,
    VETO_FRACTION,
    CATASTROPHIC_TOKENS,
    LOG_PPL_ABS_DIFF,
    RATIO_OUTSIDE_HALF_TWO,
    RESPONSE_LENGTH_MEAN,
)
"""The report's key-metric cards, in order."""

STEP_COLUMNS: tuple[MetricRecord, ...] = (
    KL,
    K3_KL,
    CHI2_TOKEN,
    CHI2_SEQ,
    PPL_RATIO,
    ABS_LOG_RATIO_MEAN,
    ESS_TOKEN,
    VETO_FRACTION,
)
"""The columns of ``rcdiag analyze``'s per-step table."""


def record(name: str) -> MetricRecord | None:
    """The record of the metric ``name`` (None for a metric without one)."""
    return REGISTRY.get(name)


def label(name: str) -> str:
    """How every output names the metric ``name`` (its record's label, else its last part)."""
    found = REGISTRY.get(name)
    return found.label if found is not None else name.rsplit("/", 1)[-1]


def worst_status(metrics: Mapping[str, float | None]) -> Status:
    """The most severe status of the judged metrics present in ``metrics`` (``healthy`` for none).

    Example:
        >>> worst_status({K3_KL.name: 0.02, KL.name: 0.01}), worst_status({})
        ('watch', 'healthy')
    """
    return worst(r.status(metrics.get(r.name)) for r in JUDGED)


def is_share(name: str) -> bool:
    """Whether the metric ``name`` is a share (shown as a percentage)."""
    found = REGISTRY.get(name)
    return found is not None and found.share
