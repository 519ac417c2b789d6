"""The parts every result document shares: its header, where the numbers come from
(:class:`SourceInfo`), with which options (:class:`RunOptions`) and every metric of one step
(:class:`StepResult`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from rcdiag.dialects import DIALECTS, Dialect
from rcdiag.model.diagnosis import MetricStatus
from rcdiag.model.fields import Field, JsonRecord, Number, safe_number, safe_numbers
from rcdiag.version import SCHEMA_VERSION, __version__

Metrics = Mapping[str, Number]
"""Metric name → value (None: not defined, e.g. a step without valid tokens, or not finite)."""


def header(dialect: str, rcdiag_version: str = __version__) -> dict[str, Any]:
    """The first keys of every result document."""
    return {"schema_version": SCHEMA_VERSION, "rcdiag_version": rcdiag_version, "dialect": dialect}


@dataclass(frozen=True)
class Header:
    """What the first keys of a result document say: which rcdiag wrote it, for which dialect."""

    rcdiag_version: str
    dialect: Dialect


def read_header(field: Field) -> Header:
    """Check that ``field`` is a result document of this schema version, with a dialect and a
    ``source`` object; every problem is one sentence naming the file.

    Raises:
        InputError: not a results document, another ``schema_version``, an unknown dialect.
    """
    origin = field.origin
    document = field.value
    if not isinstance(document, Mapping) or "schema_version" not in document:
        raise origin.error(
            "not rcdiag results (expected the JSON of rcdiag report, analyze or compare-presets, "
            "with a schema_version)"
        )
    if document["schema_version"] != SCHEMA_VERSION:
        raise origin.error(
            f"results schema_version {document['schema_version']!r}; this rcdiag reads "
            f"{SCHEMA_VERSION}"
        )
    dialect = document.get("dialect")
    if dialect not in DIALECTS:
        raise origin.error(f"unknown dialect {dialect!r} (expected {', '.join(DIALECTS)})")
    if not isinstance(document.get("source"), Mapping):
        raise origin.error("not rcdiag results (no 'source' object)")
    return Header(field["rcdiag_version"].string(), cast(Dialect, dialect))


@dataclass(frozen=True)
class SourceInfo(JsonRecord):
    """What was read (the ``source`` object of every result document).

    Attributes:
        paths: the parquet files, in reading order.
        rows: sequences (rows) read, in the selected steps.
        tokens: response positions of those rows, masked or not.
        valid_tokens: positions with ``response_mask`` 1 (what every metric averages over).
        steps: training steps read.
        empty_steps: steps without a valid token (their metrics are null).
        dropped_nonfinite: non-finite log-probs masked by ``--drop-nonfinite``.
        positive_log_probs: valid log-probs above 0 (a log-probability cannot be positive).
        first_positive_log_prob: where the first of those is (file, row, step, column), or None.
        left_out: samples of another trainer's dump not read, by reason (``aborted``, ``failed``,
            ``padding``; docs/formats.md), in the JSON only when there are some.
    """

    paths: tuple[str, ...]
    rows: int
    tokens: int
    valid_tokens: int
    steps: int
    empty_steps: tuple[int, ...]
    dropped_nonfinite: int
    positive_log_probs: int
    first_positive_log_prob: str | None
    left_out: tuple[tuple[str, int], ...] = ()

    def to_json(self) -> dict[str, Any]:
        left_out = {"left_out": dict(self.left_out)} if self.left_out else {}
        return {
            "paths": list(self.paths),
            "rows": self.rows,
            "tokens": self.tokens,
            "valid_tokens": self.valid_tokens,
            "steps": self.steps,
            "empty_steps": list(self.empty_steps),
            "dropped_nonfinite": self.dropped_nonfinite,
            "positive_log_probs": self.positive_log_probs,
            "first_positive_log_prob": self.first_positive_log_prob,
        } | left_out

    @classmethod
    def read(cls, field: Field) -> SourceInfo:
        return cls(
            paths=field["paths"].strings(),
            rows=field["rows"].count(),
            tokens=field["tokens"].count(),
            valid_tokens=field["valid_tokens"].count(),
            steps=field["steps"].count(),
            empty_steps=field["empty_steps"].integers(),
            dropped_nonfinite=field["dropped_nonfinite"].count(),
            positive_log_probs=field["positive_log_probs"].count(),
            first_positive_log_prob=field["first_positive_log_prob"].optional_string(),
            left_out=tuple((k, v.count()) for k, v in left.entries())
            if (left := field.get("left_out")) is not None
            else (),
        )


@dataclass(frozen=True)
class RunOptions(JsonRecord):
    """The options the numbers were computed with (the ``options`` object).

    Attributes:
        veto_threshold: τ as given (``--veto-threshold``), None when not given.
        effective_veto_threshold: τ used for rcdiag's catastrophic-token metrics (1e-4 by default).
        selected_steps: the steps analysed when a selection was given (``--step``, ``--steps``),
            None for every step.
        top_k: offending sequences listed per ranking (report documents only, else None).
    """

    veto_threshold: float | None
    effective_veto_threshold: float
    selected_steps: tuple[int, ...] | None = None
    top_k: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "veto_threshold": safe_number(self.veto_threshold),
            "effective_veto_threshold": safe_number(self.effective_veto_threshold),
            "selected_steps": None if self.selected_steps is None else list(self.selected_steps),
        }
        if self.top_k is not None:
            out["top_k"] = self.top_k
        return out

    @classmethod
    def read(cls, field: Field) -> RunOptions:
        selected = field["selected_steps"]
        top_k = field.get("top_k")
        return cls(
            veto_threshold=field["veto_threshold"].optional_positive(),
            effective_veto_threshold=field["effective_veto_threshold"].positive(),
            selected_steps=None if selected.is_null() else selected.integers(),
            top_k=None if top_k is None else top_k.count(),
        )


@dataclass(frozen=True)
class StepResult(JsonRecord):
    """The metrics of one training step (one verl batch): an entry of ``steps``.

    Attributes:
        step: the training step.
        rows: sequences of the step.
        valid_tokens: valid response tokens of the step (0: every metric is None).
        metrics: every metric of the step by name (docs/metrics.md).
    """

    step: int
    rows: int
    valid_tokens: int
    metrics: Metrics

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "rows": self.rows,
            "valid_tokens": self.valid_tokens,
            "metrics": safe_numbers(self.metrics),
        }

    @classmethod
    def read(cls, field: Field) -> StepResult:
        return cls(
            step=field["step"].integer(),
            rows=field["rows"].count(),
            valid_tokens=field["valid_tokens"].count(),
            metrics=field["metrics"].numbers(),
        )


def read_steps(field: Field) -> tuple[StepResult, ...]:
    """A list of :class:`StepResult`."""
    return tuple(StepResult.read(item) for item in field.items())


def read_checks(field: Field) -> tuple[MetricStatus, ...]:
    """A list of :class:`~rcdiag.model.diagnosis.MetricStatus`."""
    return tuple(MetricStatus.read(item) for item in field.items())
