"""A result as per-step scalars: what every tracker logs (:mod:`rcdiag.trackers`)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from rcdiag.errors import UsageError
from rcdiag.metrics.records import worst_status
from rcdiag.model import AnalysisResult, ReportDocument
from rcdiag.status import Status, rank

PREFIX = "rcdiag/"
"""Every tag starts with it, so a tracker groups rcdiag's curves apart from the trainer's."""
STEP_STATUS = "rcdiag/step_status"
"""Each step's status on the registry's published ranges: 0 healthy, 1 watch, 2 act."""
VERDICT = "rcdiag/verdict"
"""The dump's verdict (0 healthy, 1 watch, 2 act), logged at its last step."""


def tag(metric: str) -> str:
    """The tracker's name of a metric: ``rcdiag/`` before it, once.

    Example:
        >>> tag("rollout_corr/kl"), tag("rcdiag/abs_log_ratio_mean")
        ('rcdiag/rollout_corr/kl', 'rcdiag/abs_log_ratio_mean')
    """
    return metric if metric.startswith(PREFIX) else PREFIX + metric


def status_number(status: Status) -> int:
    """0 for healthy, 1 for watch, 2 for act."""
    return rank(status)


@dataclass(frozen=True)
class StepScalars:
    """The scalars of one training step: tag → finite value (a metric not defined there is left
    out, as a tracker has no null)."""

    step: int
    values: Mapping[str, float]


def _finite(values: Mapping[str, float | None]) -> dict[str, float]:
    return {tag(k): float(v) for k, v in values.items() if v is not None and math.isfinite(v)}


def step_scalars(result: Any) -> list[StepScalars]:
    """The per-step scalars of an analysis or a report document, in step order (module
    docstring).

    Raises:
        UsageError: a result without per-step metrics (a compare-presets document).
    """
    analysis = result.analysis if isinstance(result, ReportDocument) else result
    if not isinstance(analysis, AnalysisResult):
        raise UsageError("the trackers log an analysis: this result has no per-step metrics")
    frameworks: dict[int, dict[str, float]] = {}
    for framework in analysis.frameworks or ():
        for logged in framework.steps:
            frameworks.setdefault(logged.step, {}).update(_finite(logged.metrics))
    out = []
    for entry in analysis.step_results:
        values = _finite(entry.metrics)
        values.update(frameworks.get(entry.step, {}))
        if entry.valid_tokens:
            values[STEP_STATUS] = float(status_number(worst_status(entry.metrics)))
        out.append(StepScalars(entry.step, values))
    if out:
        last = out[-1]
        verdict = float(status_number(analysis.diagnosis.verdict))
        out[-1] = StepScalars(last.step, {**last.values, VERDICT: verdict})
    return out


def flat(series: list[StepScalars]) -> Iterator[tuple[int, str, float]]:
    """Every ``(step, tag, value)`` of a series, by step."""
    for entry in series:
        for name, value in entry.values.items():
            yield entry.step, name, value


class NewPoints:
    """What a tracker that follows a growing run (``rcdiag watch``) has not logged yet: each step
    once, the first time an analysis holds it, and the verdict at the last step whenever that
    pair (step, verdict) is new. A re-analysis that adds no step (a file rewritten) logs nothing
    again, so no step has two points of the same metric."""

    def __init__(self) -> None:
        self.steps: set[int] = set()
        self.verdict: tuple[int, float] | None = None

    def of(self, series: list[StepScalars]) -> list[StepScalars]:
        """The points of ``series`` not logged yet, by step; remembered as logged."""
        out = []
        for index, entry in enumerate(series):
            values = {} if entry.step in self.steps else dict(entry.values)
            values.pop(VERDICT, None)
            if index == len(series) - 1 and VERDICT in entry.values:
                verdict = (entry.step, entry.values[VERDICT])
                if verdict != self.verdict:
                    values[VERDICT] = verdict[1]
                    self.verdict = verdict
            self.steps.add(entry.step)
            if values:
                out.append(StepScalars(entry.step, values))
        return out


__all__ = [
    "PREFIX",
    "STEP_STATUS",
    "VERDICT",
    "NewPoints",
    "StepScalars",
    "step_scalars",
    "tag",
]
