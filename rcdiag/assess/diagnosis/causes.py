"""Root-cause diagnosis: a bug in how the dump was made, or a real mismatch, and what to do.

A pure function of :class:`Observations` (:func:`diagnose`), giving a
:class:`~rcdiag.model.diagnosis.Diagnosis` of :class:`~rcdiag.model.diagnosis.Cause` s (the
``diagnosis`` of every result document). Each cause of :data:`CAUSES` tests
one statistic against limits written once in :data:`DETECTOR_LIMITS`; docs/diagnosis.md states
every statistic, its false-positive control and the detection rates measured on planted bugs.

**Dump bugs** (the fix is in the pipeline that made the dump; no IS/RS configuration is ever
recommended for them), tested in this order, the first that fires explaining the dump:
``logits_not_logprobs``, ``identical_columns``, ``misaligned_tokens``, ``swapped_columns``,
``processed_logprobs``, ``temperature_mismatch``.

**Real mismatch** (correction applies), tested when no dump bug fired: ``stale_policy``,
``growing_drift``, ``catastrophic_tokens``, ``heavy_tail``, ``long_sequence_compounding`` and
``numeric_mismatch``. Their severities come from the metric registry's bands
(:mod:`rcdiag.assess.judge`), so a cause is never more or less alarming than its numbers.

Two identities drive the dump-bug tests. With tokens sampled from the rollout distribution q and
π the trainer's, E_q[ℓ] = −KL(q‖π) ≤ 0, so ``kl`` = −mean ℓ ≥ 0 up to noise (swapped columns make it
negative); and E_q[ρ] = Σ_{x: q(x)>0} π(x) = 1 when q has full support, so the mean token weight
stays at 1, its excess above 1 balancing its shortfall below 1. An engine that reports the log-probs
of a truncated, renormalised distribution (top-p, top-k, min-p) makes every ρ = Z ≤ 1, the nucleus
mass: the mean falls below 1 and the upper side vanishes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rcdiag.assess.diagnosis import dump_bugs, mismatch
from rcdiag.assess.diagnosis.observations import Detection, Observations
from rcdiag.model.diagnosis import Cause, Diagnosis, Kind, Spike
from rcdiag.status import Status, worst


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

DUMP_BUG_CAUSES: tuple[CauseRecord, ...] = (
    CauseRecord(
        "logits_not_logprobs",
        "dump_bug",
        "Logits dumped instead of log-probs",
        dump_bugs.logits_not_logprobs,
        ("positive_share",),
        DUMP_BUGS_DOCS,
    ),
    CauseRecord(
        "padding_in_mask",
        "dump_bug",
        "Padding is counted in the response mask",
        dump_bugs.padding_in_mask,
        ("pad_row_share", "min_pad_tokens"),
        DUMP_BUGS_DOCS,
    ),
    CauseRecord(
        "identical_columns",
        "dump_bug",
        "The two log-prob columns are identical",
        dump_bugs.identical_columns,
        (),
        DUMP_BUGS_DOCS,
    ),
    CauseRecord(
        "misaligned_tokens",
        "dump_bug",
        "The two columns score different tokens",
        dump_bugs.misaligned_tokens,
        ("misaligned_gap_ratio", "min_pairs"),
        DUMP_BUGS_DOCS,
    ),
    CauseRecord(
        "context_mismatch",
        "dump_bug",
        "The two sides scored different contexts",
        dump_bugs.context_mismatch,
        ("context_ratio", "context_gap", "min_context_tokens"),
        DUMP_BUGS_DOCS,
    ),
    CauseRecord(
        "swapped_columns",
        "dump_bug",
        "The rollout and training columns are swapped",
        dump_bugs.swapped_columns,
        ("z", "z_kl"),
        DUMP_BUGS_DOCS,
    ),
    CauseRecord(
        "processed_logprobs",
        "dump_bug",
        "The engine reported log-probs after top-p/top-k",
        dump_bugs.processed_logprobs,
        ("processed_shortfall", "processed_balance", "z"),
        DUMP_BUGS_DOCS,
    ),
    CauseRecord(
        "temperature_mismatch",
        "dump_bug",
        "The two sides use different temperatures",
        dump_bugs.temperature_mismatch,
        ("temperature_slope", "temperature_correlation", "temperature_steps"),
        DUMP_BUGS_DOCS,
    ),
)
"""Dump bugs, in the order they are tested (the first that fires is the only cause)."""

MISMATCH_CAUSES: tuple[CauseRecord, ...] = (
    CauseRecord(
        "stale_policy",
        "mismatch",
        "The rollout policy is stale",
        mismatch.stale_policy,
        ("stale_ratio", "min_lag_tokens"),
        MISMATCH_DOCS,
    ),
    CauseRecord(
        "growing_drift",
        "mismatch",
        "The mismatch grows during training",
        mismatch.growing_drift,
        ("drift_rise",),
        MISMATCH_DOCS,
    ),
    CauseRecord(
        "catastrophic_tokens",
        "mismatch",
        "Catastrophic tokens",
        mismatch.catastrophic_tokens,
        (),
        MISMATCH_DOCS,
    ),
    CauseRecord(
        "heavy_tail",
        "mismatch",
        "Heavy tails in the log-ratio",
        mismatch.heavy_tail,
        ("tail_ratio", "tail_size"),
        MISMATCH_DOCS,
    ),
    CauseRecord(
        "long_sequence_compounding",
        "mismatch",
        "The mismatch compounds over long responses",
        mismatch.long_sequence_compounding,
        (),
        MISMATCH_DOCS,
    ),
    CauseRecord(
        "numeric_mismatch",
        "mismatch",
        "The engines' numerics differ",
        mismatch.numeric_mismatch,
        (),
        MISMATCH_DOCS,
    ),
)
"""Real mismatch, tested when no dump bug fired; every one that fires is reported."""

CAUSES: tuple[CauseRecord, ...] = DUMP_BUG_CAUSES + MISMATCH_CAUSES
"""Every cause, by id in :data:`CAUSE_RECORDS`."""

CAUSE_RECORDS: dict[str, CauseRecord] = {c.id: c for c in CAUSES}

CAUSE_TITLES: dict[str, str] = {c.id: c.title for c in CAUSES}
"""Each cause's name as a person reads it (the id stays in the JSON and the docs)."""


def diagnose(
    observations: Observations,
    metric_statuses: Sequence[Status] = (),
    spikes: Sequence[Spike] = (),
) -> Diagnosis:
    """Causes and the verdict: the worst of the metric statuses and the causes' severities;
    ``spikes`` (isolated spike steps, :mod:`rcdiag.assess.diagnosis.spikes`) are reported beside.

    A dump bug, when found, is the only cause: its numbers describe the bug, not the training.
    """
    for record in DUMP_BUG_CAUSES:
        cause = record.run(observations)
        if cause is not None:
            return Diagnosis(verdict=cause.severity, causes=(cause,))
    causes = tuple(c for r in MISMATCH_CAUSES if (c := r.run(observations)) is not None)
    return Diagnosis(
        verdict=worst([*metric_statuses, *(c.severity for c in causes)]),
        causes=causes,
        spikes=tuple(spikes),
    )
