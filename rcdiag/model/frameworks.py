"""The ``frameworks`` section of a result document: other frameworks' metrics under their own
names (``analyze --frameworks``; docs/frameworks.md, docs/report.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rcdiag.model.diagnosis import MetricStatus
from rcdiag.model.fields import Field, JsonRecord, Number, safe_numbers

Metrics = Mapping[str, Number]


@dataclass(frozen=True)
class FrameworkStep(JsonRecord):
    """A framework's metrics on one step (that step taken as the framework's batch).

    Attributes:
        step: the training step.
        metrics: ``<framework>/<its name>`` → value (None: the step has no valid token).
    """

    step: int
    metrics: Metrics

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "metrics": safe_numbers(self.metrics)}

    @classmethod
    def read(cls, field: Field) -> FrameworkStep:
        return cls(step=field["step"].integer(), metrics=field["metrics"].numbers())


@dataclass(frozen=True)
class FrameworkResult(JsonRecord):
    """One framework's logged metrics: an entry of ``frameworks``.

    Attributes:
        framework: its id (``trl``, ``slime``, ``nemo_rl``, …).
        title: how it writes its name.
        overall: its metrics on the whole dump taken as one batch.
        steps: its metrics on each step.
        checks: the status of its metrics that the framework gates in CI (registry bands).
        aggregation: how a value maps onto what the framework logs, in words (what depends on a
            split into processes or micro-batches that a dump does not record).
    """

    framework: str
    title: str
    overall: Metrics
    steps: tuple[FrameworkStep, ...]
    checks: tuple[MetricStatus, ...]
    aggregation: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "framework": self.framework,
            "title": self.title,
            "overall": safe_numbers(self.overall),
            "steps": [s.to_json() for s in self.steps],
            "checks": [c.to_json() for c in self.checks],
            "aggregation": self.aggregation,
        }

    @classmethod
    def read(cls, field: Field) -> FrameworkResult:
        return cls(
            framework=field["framework"].string(),
            title=field["title"].string(),
            overall=field["overall"].numbers(),
            steps=tuple(FrameworkStep.read(s) for s in field["steps"].items()),
            checks=tuple(MetricStatus.read(c) for c in field["checks"].items()),
            aggregation=(field.get("aggregation") or field.holding("")).string(),
        )


def read_frameworks(field: Field) -> tuple[FrameworkResult, ...]:
    """A list of :class:`FrameworkResult`."""
    return tuple(FrameworkResult.read(item) for item in field.items())
