"""Isolated spike steps: one step alone past a judged metric's band (docs/diagnosis.md).

A heavy-tailed metric (χ²_seq, ESS_seq, the catastrophic shares) of the whole dump can be set by a
handful of sequences of one step. When exactly one step of at least :data:`MIN_SPIKE_STEPS` is past
the band the overall value breaches, and the median step is inside every band, that step is a
spike: it is reported with its step, and the verdict, the causes and the advice are judged on the
other steps (the metric counts as healthy there; the advice reads the median step).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rcdiag.metrics.distributions import median
from rcdiag.metrics.records import REGISTRY
from rcdiag.model.diagnosis import MetricStatus, Spike
from rcdiag.model.parts import StepResult
from rcdiag.status import rank

MIN_SPIKE_STEPS = 4
"""Fewer steps with a value cannot tell a spike from the run."""


def isolated_spikes(
    statuses: Sequence[MetricStatus], steps: Sequence[StepResult]
) -> tuple[Spike, ...]:
    """The judged metrics whose overall status comes from one step alone (module docstring)."""
    spikes = []
    for judged in statuses:
        record = REGISTRY.get(judged.metric)
        if record is None or judged.status == "healthy":
            continue
        points = [
            (s.step, float(v))
            for s in steps
            if (v := s.metrics.get(judged.metric)) is not None and np.isfinite(v)
        ]
        if len(points) < MIN_SPIKE_STEPS:
            continue
        values = np.array([v for _, v in points])
        past = [i for i, (_, v) in enumerate(points) if rank(record.status(v) or "healthy") > 0]
        typical = median(values)
        if len(past) != 1 or record.status(typical) != "healthy":
            continue
        step, value = points[past[0]]
        others = median(np.delete(values, past[0]))
        spikes.append(Spike(judged.metric, step, value, others))
    return tuple(spikes)
