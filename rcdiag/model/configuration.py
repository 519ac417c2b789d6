"""What one rollout-correction configuration would do to a dump, and a threshold sweep.

Each configuration (:class:`ConfigurationResult`) has every metric verl logs for it and rcdiag's
comparison figures (its ``summary``: :data:`~rcdiag.correction.figures.SUMMARY_FIGURES`), overall
and per step (:class:`PresetStep`); a threshold sweep (:class:`SweepResult`) has the figures of each
grid point (:class:`SweepPoint`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from rcdiag.model.fields import (
    Field,
    JsonRecord,
    Number,
    Scalar,
    plain_numbers,
    safe_number,
    safe_numbers,
)
from rcdiag.model.parts import Metrics

Figures = Mapping[str, Number]
"""rcdiag's comparison figures by name (``kept_token_share``, ``ess``, …; None: not defined)."""
Config = Mapping[str, Scalar]
"""A configuration: verl's rollout-correction keys as given."""

_SUMMARY_LISTS = ("worst_steps", "fully_rejected_steps")


@dataclass(frozen=True)
class WorstStep(JsonRecord):
    """Where a comparison figure is worst.

    Attributes:
        step: the step where it is worst.
        value: the figure's value there.
    """

    step: int
    value: Number

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "value": safe_number(self.value)}

    @classmethod
    def read(cls, field: Field) -> WorstStep:
        return cls(step=field["step"].integer(), value=field["value"].optional_number())


def read_figures(field: Field) -> dict[str, Number]:
    """A ``summary`` object's figures (every key but ``worst_steps`` and ``fully_rejected_steps``)."""
    values = field.mapping()
    if any(k in values for k in _SUMMARY_LISTS):
        values = {k: v for k, v in values.items() if k not in _SUMMARY_LISTS}
    return field.holding(values).numbers()


@dataclass(frozen=True)
class PresetStep(JsonRecord):
    """One step of a configuration.

    Attributes:
        step: the training step.
        summary: rcdiag's comparison figures on that step.
        metrics: every metric verl logs for the configuration on that step; None where the
            document keeps the figures only (the report's).
    """

    step: int
    summary: Figures
    metrics: Metrics | None = None

    def to_json(self) -> dict[str, Any]:
        if self.metrics is None:
            return {"step": self.step, "summary": safe_numbers(self.summary)}
        return {
            "step": self.step,
            "metrics": safe_numbers(self.metrics),
            "summary": safe_numbers(self.summary),
        }

    @classmethod
    def read(cls, field: Field) -> PresetStep:
        entry = field.value  # a document holds one per step and configuration: a quick path first
        if type(entry) is dict and type(entry.get("step")) is int:
            summary: Any = entry.get("summary")
            metrics: Any = entry.get("metrics")
            if plain_numbers(summary) and (
                plain_numbers(metrics) or (metrics is None and "metrics" not in entry)
            ):
                return cls(entry["step"], dict(summary), None if metrics is None else dict(metrics))
        metrics = field.get("metrics")
        return cls(
            step=field["step"].integer(),
            summary=field["summary"].numbers(),
            metrics=None if metrics is None else metrics.numbers(),
        )


class PresetSteps(Sequence[PresetStep]):
    """A configuration's steps held as columns: one float64 row per figure (and per metric) with
    one value per step, and where each is defined; a :class:`PresetStep` is built when read, so
    that many steps and configurations cost 8 bytes a value, not a dictionary per step.

    Args:
        steps: the steps, in increasing order.
        figures: names of the comparison figures, their values (figures × steps) and where they
            are defined.
        metrics: the same for verl's metrics, or None where the document keeps figures only.

    Example:
        >>> import numpy as np
        >>> steps = PresetSteps([3], (("ess",), np.array([[0.5]]), np.array([[True]])), None)
        >>> steps[0]
        PresetStep(step=3, summary={'ess': 0.5}, metrics=None)
    """

    def __init__(self, steps: Sequence[int], figures: Columns, metrics: Columns | None) -> None:
        self._steps = [int(s) for s in steps]
        self._figures = figures
        self._metrics = metrics

    def __len__(self) -> int:
        return len(self._steps)

    @overload
    def __getitem__(self, index: int) -> PresetStep: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[PresetStep, ...]: ...

    def __getitem__(self, index: int | slice) -> PresetStep | tuple[PresetStep, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        j = range(len(self._steps))[index]
        return PresetStep(
            self._steps[j],
            _point(self._figures, j),
            None if self._metrics is None else _point(self._metrics, j),
        )

    def __iter__(self) -> Iterator[PresetStep]:
        figures = _points(self._figures)
        metrics = None if self._metrics is None else _points(self._metrics)
        for j, step in enumerate(self._steps):
            yield PresetStep(step, figures[j], None if metrics is None else metrics[j])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or len(other) != len(self):
            return False
        return all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PresetSteps({len(self)} steps)"


Columns = tuple[Sequence[str], Any, Any]
"""Names, a float64 matrix of values (names × steps) and a bool matrix of where each is defined."""


def _point(columns: Columns, j: int) -> dict[str, Number]:
    names, values, defined = columns
    column_values, column_defined = values[:, j].tolist(), defined[:, j].tolist()
    return {
        n: v if d else None for n, v, d in zip(names, column_values, column_defined, strict=True)
    }


def _points(columns: Columns) -> list[dict[str, Number]]:
    """Every step's values, converted in one sweep (columns to Python floats once)."""
    names, values, defined = columns
    rows = values.T.tolist()
    flags = defined.T.tolist()
    return [
        {n: v if d else None for n, v, d in zip(names, row, where, strict=True)}
        for row, where in zip(rows, flags, strict=True)
    ]


@dataclass(frozen=True)
class ConfigurationResult(JsonRecord):
    """What one configuration (a preset, a ``--config`` file) would do to the dump: an entry of
    ``presets``.

    Attributes:
        name: the preset's name or the configuration file's stem.
        config: its verl keys.
        overall: every metric verl logs for it, the whole dump as one batch.
        summary: rcdiag's comparison figures over the whole dump.
        worst_steps: for each figure, the step where it is worst (None: no step has a value).
        fully_rejected_steps: steps where it rejects every valid token.
        steps: the figures (and, in compare-presets documents, the metrics) of each step.
        purpose: what the preset is for (report documents only, else None).
        framework: the framework whose correction mode this is (docs/frameworks.md); None for
            verl's, and then not in the document. ``config`` then holds that framework's keys and
            ``overall`` the metrics it logs.
    """

    name: str
    config: Config
    overall: Metrics
    summary: Figures
    worst_steps: Mapping[str, WorstStep | None]
    fully_rejected_steps: tuple[int, ...]
    steps: Sequence[PresetStep]
    purpose: str | None = None
    framework: str | None = None

    def without_steps(self) -> ConfigurationResult:
        """The entry without its per-step figures and metrics (for what reads only the whole
        dump's: the terminal, the verdict, the recommendation), so many steps are not copied."""
        return dataclasses.replace(self, steps=())

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.framework is not None:
            out["framework"] = self.framework
        if self.purpose is not None:
            out["purpose"] = self.purpose
        out |= {
            "config": dict(self.config),
            "overall": safe_numbers(self.overall),
            "summary": {
                **safe_numbers(self.summary),
                "worst_steps": {
                    k: None if w is None else w.to_json() for k, w in self.worst_steps.items()
                },
                "fully_rejected_steps": list(self.fully_rejected_steps),
            },
            "steps": [s.to_json() for s in self.steps],
        }
        return out

    @classmethod
    def read(cls, field: Field) -> ConfigurationResult:
        summary = field["summary"]
        purpose = field.get("purpose")
        framework = field.get("framework")
        return cls(
            name=field["name"].string(),
            framework=None if framework is None else framework.string(),
            purpose=None if purpose is None else purpose.string(),
            config=field["config"].scalars(),
            overall=field["overall"].numbers(),
            summary=read_figures(summary),
            worst_steps={
                figure: None if w.is_null() else WorstStep.read(w)
                for figure, w in summary["worst_steps"].entries()
            },
            fully_rejected_steps=summary["fully_rejected_steps"].integers(),
            steps=tuple(PresetStep.read(s) for s in field["steps"].items()),
        )


PerStep = Mapping[str, tuple[Number, ...]]
"""Figures by name, each a tuple of one value per step (None: no valid token that step)."""


def _per_step_json(values: PerStep) -> dict[str, list[Number]]:
    return {name: [safe_number(v) for v in column] for name, column in values.items()}


def read_per_step(field: Field, length: int | None = None) -> dict[str, tuple[Number, ...]]:
    """An object of equally long lists of numbers or nulls (``length``: the number of steps)."""
    out: dict[str, tuple[Number, ...]] = {}
    for name, column in field.entries():
        values = tuple(column.number_list())
        if length is not None and len(values) != length:
            raise column.problem(f"has {len(values)} values, one per step ({length}) expected")
        out[name] = values
    return out


@dataclass(frozen=True)
class StepCounts(JsonRecord):
    """The steps of a sweep's per-step figures and what each holds (what its shares are of).

    Attributes:
        steps: the training steps, in order.
        valid_tokens: valid tokens of each step; sequences: sequences with a valid token.
    """

    steps: tuple[int, ...]
    valid_tokens: tuple[int, ...]
    sequences: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "step": list(self.steps),
            "valid_tokens": list(self.valid_tokens),
            "sequences": list(self.sequences),
        }

    @classmethod
    def read(cls, field: Field) -> StepCounts:
        steps = field["step"].integers()
        columns = {n: field[n].integers() for n in ("valid_tokens", "sequences")}
        for name, column in columns.items():
            if len(column) != len(steps):
                raise field[name].problem(f"has {len(column)} values for {len(steps)} steps")
        return cls(steps, columns["valid_tokens"], columns["sequences"])


@dataclass(frozen=True)
class SweepPoint(JsonRecord):
    """One grid point of a sweep.

    Attributes:
        threshold: the swept threshold as written in the grid (``1.001``).
        config: the complete configuration of the point.
        summary: rcdiag's comparison figures of that configuration over the whole dump.
        per_step: its figures at each step of the sweep's ``steps``, one list each, in report
            documents: ``kept_token_share`` and ``kept_sequence_share`` unless it keeps every
            token and sequence of the dump (1 at every step), ``weight_mass_removed`` when its
            truncation removes IS weight mass; else None.
    """

    threshold: str
    config: Config
    summary: Figures
    per_step: PerStep | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "threshold": self.threshold,
            "config": dict(self.config),
            "summary": safe_numbers(self.summary),
        }
        if self.per_step is not None:
            out["per_step"] = _per_step_json(self.per_step)
        return out

    @classmethod
    def read(cls, field: Field) -> SweepPoint:
        per_step = field.get("per_step")
        return cls(
            threshold=field["threshold"].string(),
            config=field["config"].scalars(),
            summary=field["summary"].numbers(),
            per_step=None if per_step is None else read_per_step(per_step),
        )


@dataclass(frozen=True)
class SweepResult(JsonRecord):
    """A threshold sweep: configurations that differ in one threshold, overall figures each.

    ``compare-presets --sweep`` writes one as ``sweep`` (``target`` and ``points``); the report
    lists its candidate sweeps under ``sweeps``, each also with a ``key`` and a ``title``.

    Attributes:
        target: the swept verl option (``seq_mean_k1``, ``is_token``, …).
        points: the grid points, in grid order.
        key: the report's name of the sweep (``geo``, ``max``, ``geo+max``, ``is``), or None.
        title: what the sweep shows, for the report (None in compare-presets documents).
        steps: the steps of the points' ``per_step`` figures (report documents), else None.
    """

    target: str
    points: tuple[SweepPoint, ...]
    key: str | None = None
    title: str | None = None
    steps: StepCounts | None = None

    def to_json(self) -> dict[str, Any]:
        points = [p.to_json() for p in self.points]
        if self.title is None:
            return {"target": self.target, "points": points}
        out: dict[str, Any] = {"key": self.key, "target": self.target, "title": self.title}
        if self.steps is not None:
            out["steps"] = self.steps.to_json()
        return {**out, "points": points}

    @classmethod
    def read(cls, field: Field) -> SweepResult:
        title = field.get("title")
        key = field.get("key") if title is not None else None
        steps = field.get("steps") if title is not None else None
        counts = None if steps is None else StepCounts.read(steps)
        items = field["points"].items()
        points = tuple(SweepPoint.read(p) for p in items)
        for item, point in zip(items, points, strict=True):
            if point.per_step is None:
                continue
            if counts is None:
                raise item["per_step"].problem("holds per-step figures but the sweep no steps")
            read_per_step(item["per_step"], len(counts.steps))
        return cls(
            target=field["target"].string(),
            points=points,
            key=None if key is None else key.optional_string(),
            title=None if title is None else title.string(),
            steps=counts,
        )


def read_presets(field: Field) -> tuple[ConfigurationResult, ...]:
    """A list of :class:`ConfigurationResult`."""
    return tuple(ConfigurationResult.read(p) for p in field.items())
