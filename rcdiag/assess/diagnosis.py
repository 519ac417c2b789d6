"""Root-cause diagnosis: a bug in how the dump was made, or a real mismatch, and what to do.

A pure function of :class:`Observations` (:func:`diagnose`), giving a
:class:`~rcdiag.model.diagnosis.Diagnosis` of :class:`~rcdiag.model.diagnosis.Cause` s (the
``diagnosis`` of every result document). Each detector of :data:`DETECTORS` tests
one statistic against limits written once in :data:`LIMITS`; docs/diagnosis.md states every statistic,
its false-positive control and the detection rates measured on planted bugs.

**Dump bugs** (the fix is in the pipeline that made the dump; no IS/RS configuration is ever
recommended for them), tested in this order, the first that fires explaining the dump:
``logits_not_logprobs``, ``identical_columns``, ``misaligned_tokens``, ``swapped_columns``,
``processed_logprobs``, ``temperature_mismatch``.

**Real mismatch** (correction applies), tested when no dump bug fired: ``stale_policy``,
``growing_drift``, ``catastrophic_tokens``, ``heavy_tail``, ``long_sequence_compounding`` and
``numeric_mismatch``. Their severities come from the metric registry's bands
(:mod:`rcdiag.assess.registry`), so a cause is never more or less alarming than its numbers.

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

from rcdiag.assess import dump_bugs, mismatch
from rcdiag.assess.observations import Finding, Observations
from rcdiag.model.diagnosis import Cause, Diagnosis, Kind
from rcdiag.status import Status, worst


@dataclass(frozen=True)
class Detector:
    """A cause rcdiag can diagnose: its id, its kind and the test that finds it."""

    id: str
    kind: Kind
    test: Callable[[Observations], Finding | None]

    def run(self, observations: Observations) -> Cause | None:
        found = self.test(observations)
        if found is None:
            return None
        return Cause(
            self.id, self.kind, found.severity, found.summary, found.evidence, found.advice
        )


DUMP_BUG_DETECTORS: tuple[Detector, ...] = (
    Detector("logits_not_logprobs", "dump_bug", dump_bugs.logits_not_logprobs),
    Detector("identical_columns", "dump_bug", dump_bugs.identical_columns),
    Detector("misaligned_tokens", "dump_bug", dump_bugs.misaligned_tokens),
    Detector("swapped_columns", "dump_bug", dump_bugs.swapped_columns),
    Detector("processed_logprobs", "dump_bug", dump_bugs.processed_logprobs),
    Detector("temperature_mismatch", "dump_bug", dump_bugs.temperature_mismatch),
)
"""Dump bugs, in the order they are tested (the first that fires is the only cause)."""

MISMATCH_DETECTORS: tuple[Detector, ...] = (
    Detector("stale_policy", "mismatch", mismatch.stale_policy),
    Detector("growing_drift", "mismatch", mismatch.growing_drift),
    Detector("catastrophic_tokens", "mismatch", mismatch.catastrophic_tokens),
    Detector("heavy_tail", "mismatch", mismatch.heavy_tail),
    Detector("long_sequence_compounding", "mismatch", mismatch.long_sequence_compounding),
    Detector("numeric_mismatch", "mismatch", mismatch.numeric_mismatch),
)
"""Real mismatch, tested when no dump bug fired; every one that fires is reported."""

DETECTORS: tuple[Detector, ...] = DUMP_BUG_DETECTORS + MISMATCH_DETECTORS

CAUSE_TITLES: dict[str, str] = {
    "logits_not_logprobs": "Logits dumped instead of log-probs",
    "identical_columns": "The two log-prob columns are identical",
    "misaligned_tokens": "The two columns score different tokens",
    "swapped_columns": "The rollout and training columns are swapped",
    "processed_logprobs": "The engine reported log-probs after top-p/top-k",
    "temperature_mismatch": "The two sides use different temperatures",
    "stale_policy": "The rollout policy is stale",
    "growing_drift": "The mismatch grows during training",
    "catastrophic_tokens": "Catastrophic tokens",
    "heavy_tail": "Heavy tails in the log-ratio",
    "long_sequence_compounding": "The mismatch compounds over long responses",
    "numeric_mismatch": "The engines' numerics differ",
}
"""Each cause's name as a person reads it (the id stays in the JSON and the docs)."""


def diagnose(observations: Observations, metric_statuses: Sequence[Status] = ()) -> Diagnosis:
    """Causes and the verdict: the worst of the metric statuses and the causes' severities.

    A dump bug, when found, is the only cause: its numbers describe the bug, not the training.
    """
    for detector in DUMP_BUG_DETECTORS:
        cause = detector.run(observations)
        if cause is not None:
            return Diagnosis(verdict=cause.severity, causes=(cause,))
    causes = tuple(c for d in MISMATCH_DETECTORS if (c := d.run(observations)) is not None)
    return Diagnosis(
        verdict=worst([*metric_statuses, *(c.severity for c in causes)]), causes=causes
    )
