"""Baselines: a reference run's metrics with bootstrap replicates, and the drift decision against it.

**Decision rule.** For a metric with baseline value b and current value c, the tolerance is
τ = max(τ_abs, τ_rel·|b|) and Δ = c − b. With bootstrap replicates of both runs, [L, H] is the central
``confidence`` interval of Δ (:func:`~rcdiag.checks.bootstrap.difference_interval`). A rule
``x <= baseline`` fails when L > τ: the current run is higher than the baseline by more than the
tolerance, with the interval excluding noise. ``x >= baseline`` fails when H < −τ; ``x == baseline``
fails on either. Without replicates (a maximum or a quantile) the point difference Δ takes the place
of L and H. With ``abs(…)``, |·| is applied to every value and replicate first.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np

from rcdiag import SCHEMA_VERSION, __version__
from rcdiag.checks.bootstrap import bootstrapped, difference_interval
from rcdiag.checks.rules import Direction
from rcdiag.dialects import DIALECTS, Dialect
from rcdiag.errors import UsageError
from rcdiag.metrics.ragged import F64

BASELINE_KIND = "rcdiag-baseline"
"""The ``kind`` field of a baseline document (an analyze JSON is not a baseline)."""


@dataclass(frozen=True)
class Baseline:
    """A parsed baseline document."""

    dialect: Dialect
    rcdiag_version: str
    created: str
    source: Mapping[str, Any]
    veto_threshold: float | None
    effective_veto_threshold: float
    seed: int
    replicates: int
    overall: Mapping[str, float | None]
    bootstrap: Mapping[str, F64]


def baseline_document(
    analysis: Mapping[str, Any],
    replicates: Mapping[str, F64],
    *,
    seed: int,
    created: datetime,
) -> dict[str, Any]:
    """The JSON document ``rcdiag baseline`` writes.

    Args:
        analysis: the analyze document of the reference dump.
        replicates: metric → K bootstrap replicates (non-bootstrapped metrics are dropped).
        seed: the bootstrap seed.
        created: when (timezone-aware; written in ISO 8601 UTC).
    """
    kept = bootstrapped(replicates)
    count = next(iter(replicates.values())).size if replicates else 0
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": BASELINE_KIND,
        "rcdiag_version": analysis["rcdiag_version"],
        "dialect": analysis["dialect"],
        "created": created.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source": analysis["source"],
        "options": analysis["options"],
        "bootstrap": {
            "method": "sequence-level Poisson bootstrap (docs/rules.md)",
            "seed": seed,
            "replicates": count,
            "metrics": {name: reps.tolist() for name, reps in kept.items()},
        },
        "overall": analysis["overall"],
        "steps": analysis["steps"],
    }


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Fields:
    """Typed access to a baseline document's fields; every problem names the file and the field."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def error(self, problem: str) -> UsageError:
        return UsageError(
            f"{self.origin}: not a valid baseline ({problem}); re-create it with `rcdiag baseline`"
        )

    def get(self, document: Mapping[str, Any], key: str, where: str, kind: str) -> Any:
        """``document[key]`` of the given kind: ``object``, ``string``, ``count`` (an integer ≥ 0)
        or ``number``."""
        name = f"{where}.{key}" if where else key
        if key not in document:
            raise self.error(f"no {name!r}")
        value = document[key]
        valid = {
            "object": isinstance(value, Mapping),
            "string": isinstance(value, str),
            "count": isinstance(value, int) and not isinstance(value, bool) and value >= 0,
            "number": _is_number(value),
        }[kind]
        if not valid:
            wanted = {"count": "an integer ≥ 0", "object": "an object"}.get(kind, f"a {kind}")
            raise self.error(f"{name} is {_json_repr(value)}, expected {wanted}")
        return value

    def numbers(self, values: Mapping[str, Any], where: str) -> dict[str, float | None]:
        """A mapping of names to numbers or nulls."""
        for name, value in values.items():
            if value is not None and not _is_number(value):
                raise self.error(f"{where}[{name!r}] is {_json_repr(value)}, expected a number")
        return dict(values)

    def replicates(self, name: str, values: Any, count: int) -> F64:
        """The ``count`` replicates of one metric (null: not finite)."""
        where = f"bootstrap.metrics[{name!r}]"
        if not isinstance(values, list):
            raise self.error(f"{where} is {_json_repr(values)}, expected a list of numbers")
        if len(values) != count:
            raise self.error(
                f"{where} holds {len(values)} replicates but bootstrap.replicates is {count}; "
                "was the file cut short?"
            )
        bad = next((v for v in values if v is not None and not _is_number(v)), None)
        if bad is not None:
            raise self.error(f"{where} holds {_json_repr(bad)}, expected numbers")
        return np.array([math.nan if v is None else v for v in values], dtype=np.float64)


def _json_repr(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def parse_baseline(document: Any, origin: str) -> Baseline:
    """Validate a baseline document read from ``origin``.

    Raises:
        UsageError: not a baseline, another schema version, or a malformed field (a field of the
            wrong type, a replicate list shorter or longer than ``bootstrap.replicates`` says).
    """
    if not isinstance(document, Mapping):
        raise UsageError(f"{origin}: not a baseline (expected a JSON object)")
    version = document.get("schema_version")
    if document.get("kind") != BASELINE_KIND:
        raise UsageError(
            f"{origin}: not a baseline made by `rcdiag baseline` (make one with "
            "`rcdiag baseline DUMP -o FILE`)"
        )
    if version != SCHEMA_VERSION:
        raise UsageError(
            f"{origin}: baseline schema_version {version!r}, but this rcdiag {__version__} reads "
            f"schema_version {SCHEMA_VERSION}; re-create the baseline with this version"
        )
    fields = _Fields(origin)
    dialect = fields.get(document, "dialect", "", "string")
    if dialect not in DIALECTS:
        raise UsageError(f"{origin}: unknown dialect {dialect!r} (expected {', '.join(DIALECTS)})")
    options = fields.get(document, "options", "", "object")
    boot = fields.get(document, "bootstrap", "", "object")
    overall = fields.numbers(fields.get(document, "overall", "", "object"), "overall")
    metrics = fields.get(boot, "metrics", "bootstrap", "object")
    count = fields.get(boot, "replicates", "bootstrap", "count")
    if metrics and count < 2:
        raise fields.error(f"bootstrap.replicates is {count}; a bootstrap needs at least 2")
    reps = {name: fields.replicates(name, values, count) for name, values in metrics.items()}
    veto = options.get("veto_threshold")
    if veto is not None and not (_is_number(veto) and veto > 0):
        raise fields.error(f"options.veto_threshold is {_json_repr(veto)}, expected a number > 0")
    effective = fields.get(options, "effective_veto_threshold", "options", "number")
    if not effective > 0:
        raise fields.error(f"options.effective_veto_threshold is {effective!r}, expected > 0")
    return Baseline(
        dialect=dialect,  # checked against DIALECTS above
        rcdiag_version=str(document.get("rcdiag_version", "?")),
        created=str(document.get("created", "?")),
        source=fields.get(document, "source", "", "object"),
        veto_threshold=None if veto is None else float(veto),
        effective_veto_threshold=float(effective),
        seed=fields.get(boot, "seed", "bootstrap", "count"),
        replicates=count,
        overall=overall,
        bootstrap=reps,
    )


def check_compatible(
    baseline: Baseline, dialect: str, effective_veto_threshold: float, origin: str
) -> None:
    """Refuse a baseline whose numbers do not mean the same as the current run's.

    Raises:
        UsageError: another dialect or another veto threshold.
    """
    if baseline.dialect != dialect:
        raise UsageError(
            f"{origin}: the baseline was made with --dialect {baseline.dialect}, this run uses "
            f"--dialect {dialect}; metrics of different dialects are not comparable"
        )
    if not math.isclose(baseline.effective_veto_threshold, effective_veto_threshold):
        raise UsageError(
            f"{origin}: the baseline used veto threshold {baseline.effective_veto_threshold:g}, "
            f"this run {effective_veto_threshold:g}; pass the same --veto-threshold"
        )


@dataclass(frozen=True)
class Drift:
    """The comparison of one metric with its baseline.

    Attributes:
        baseline, current: the point values (after ``abs`` when asked).
        delta: current − baseline.
        tolerance: τ = max(τ_abs, τ_rel·|baseline|).
        interval: the bootstrap interval of delta, or None (tolerance-only comparison).
        regressed: whether the rule fails.
    """

    baseline: float
    current: float
    delta: float
    tolerance: float
    interval: tuple[float, float] | None
    regressed: bool


def compare(
    current: float,
    baseline: float,
    direction: Direction,
    *,
    abs_tol: float,
    rel_tol: float,
    confidence: float,
    current_replicates: F64 | None = None,
    baseline_replicates: F64 | None = None,
    absolute: bool = False,
) -> Drift:
    """Apply the decision rule of the module docstring to one metric.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> b = rng.normal(1.0, 0.05, 200)
        >>> compare(1.02, 1.0, "higher", abs_tol=0, rel_tol=0.1, confidence=0.95,
        ...         current_replicates=b + 0.02, baseline_replicates=rng.normal(1.0, 0.05, 200)).regressed
        False
        >>> compare(2.0, 1.0, "higher", abs_tol=0, rel_tol=0.1, confidence=0.95,
        ...         current_replicates=2 * b, baseline_replicates=b).regressed
        True
    """
    if absolute:
        current, baseline = abs(current), abs(baseline)
        if current_replicates is not None:
            current_replicates = np.abs(current_replicates)
        if baseline_replicates is not None:
            baseline_replicates = np.abs(baseline_replicates)
    delta = current - baseline
    tolerance = max(abs_tol, rel_tol * abs(baseline))
    interval = None
    if current_replicates is not None and baseline_replicates is not None:
        interval = difference_interval(current_replicates, baseline_replicates, confidence)
    low, high = interval if interval is not None else (delta, delta)
    up = low > tolerance
    down = high < -tolerance
    regressed = {"higher": up, "lower": down, "either": up or down}[direction]
    return Drift(baseline, current, delta, tolerance, interval, regressed)
