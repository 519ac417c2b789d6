"""Judging metrics against their records' bands (:mod:`rcdiag.metrics.records`), and the CI gates
other frameworks put on their own metrics.

``rcdiag analyze`` shows the status of each judged metric, ``rcdiag check``'s default rules fail on
``act`` and report ``watch``, the report draws its gauges from the bands, and the verdict of
:mod:`rcdiag.assess.verdict` is the worst status among the metrics and the diagnosed causes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rcdiag.metrics.records import JUDGED, REGISTRY, Band, MetricRecord
from rcdiag.model.diagnosis import MetricStatus

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
        "train_rollout_logprob_abs_diff",
        "slime: per-sample mean |Δ log p|, averaged over samples",
        docs="docs/frameworks.md#slime",
        bands=(Band("act", 0.1, SLIME_GATE),),
    ),
    MetricRecord(
        "nemo_rl/token_mult_prob_error",
        "token_mult_prob_error",
        "NeMo-RL: token mean of exp|Δ log p|",
        docs="docs/frameworks.md#nemo-rl",
        bands=(Band("act", 1.05, NEMO_MULT_GATE),),
    ),
    MetricRecord(
        "nemo_rl/gen_kl_error",
        "gen_kl_error",
        "NeMo-RL: token mean K3 KL of generation against training",
        docs="docs/frameworks.md#nemo-rl",
        bands=(Band("act", 1e-3, NEMO_KL_GATE),),
    ),
)
"""The CI gates other frameworks put on their own metrics (``analyze --frameworks``): judged in the
document's ``frameworks`` section, not in the verdict (rcdiag's own records judge the same
mismatch)."""

FRAMEWORK_REGISTRY: dict[str, MetricRecord] = {r.name: r for r in FRAMEWORK_RECORDS}


def judge_frameworks(metrics: Mapping[str, float | None]) -> list[MetricStatus]:
    """The status of every framework gate (:data:`FRAMEWORK_RECORDS`) present in ``metrics``."""
    return judge(metrics, records=FRAMEWORK_RECORDS)


def judge(
    metrics: Mapping[str, float | None],
    skip: Iterable[str] = (),
    records: Iterable[MetricRecord] = JUDGED,
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
        if record.negative_judged_by is not None and value < 0:
            negative = _judged_below_zero(record, metrics)
            if negative is not None:
                out.append(negative)
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


def _judged_below_zero(
    record: MetricRecord, metrics: Mapping[str, float | None]
) -> MetricStatus | None:
    """A negative χ² judged by its ESS (``record.negative_judged_by``): its status when the ESS is
    past a band, None when the ESS is healthy (then χ² is judged by its own bands)."""
    assert record.negative_judged_by is not None
    companion = REGISTRY[record.negative_judged_by]
    value, other = metrics.get(record.name), metrics.get(companion.name)
    status = companion.status(other)
    if value is None or status in (None, "healthy"):
        return None
    band = companion.band(status)
    assert band is not None
    short = record.name.rsplit("/", 1)[-1]
    return MetricStatus(
        metric=record.name,
        value=float(value),
        status=status,
        band=f"{short} < 0 with {companion.limit_text(band)}",
        source=(
            "rcdiag: below 0 the sampled weights average under 1, their mass in tails the dump "
            f"did not sample; judged with {companion.label}: {band.source}"
        ),
    )
