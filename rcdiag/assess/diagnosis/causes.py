"""Root-cause diagnosis: a bug in how the dump was made, or a real mismatch, and what to do.

A pure function of :class:`Observations` (:func:`diagnose`), giving a
:class:`~rcdiag.model.diagnosis.Diagnosis` of :class:`~rcdiag.model.diagnosis.Cause` s (the
``diagnosis`` of every result document). Each cause of :data:`CAUSES` tests
one statistic against limits written once in :data:`DETECTOR_LIMITS`; docs/diagnosis.md states
every statistic, its false-positive control and the detection rates measured on planted bugs.

**Dump bugs** (the fix is in the pipeline that made the dump; no IS/RS configuration is ever
recommended for them), tested in this order, the first that fires explaining the dump:
``logits_not_logprobs``, ``identical_columns``, ``constant_column``, ``misaligned_tokens``,
``unpaired_rows``, ``padding_in_mask``, ``context_mismatch``, ``swapped_columns``,
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

from collections.abc import Sequence

from rcdiag.assess.diagnosis.dump_bugs import DUMP_BUG_CAUSES
from rcdiag.assess.diagnosis.mismatch import MISMATCH_CAUSES
from rcdiag.assess.diagnosis.observations import CauseRecord, Observations
from rcdiag.model.diagnosis import Diagnosis, Spike
from rcdiag.status import Status, worst

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
