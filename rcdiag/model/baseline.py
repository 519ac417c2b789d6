"""A baseline: a reference run's metrics with their bootstrap replicates (``rcdiag baseline``).

``rcdiag check --baseline`` compares a run with it (docs/rules.md, "Baselines"). The document is the
reference run's analyze document (``source``, ``options``, ``overall``, ``steps``) with a ``kind``,
the time it was made and the ``bootstrap`` replicates of every bootstrapped overall metric.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from rcdiag.dialects import DIALECTS, Dialect
from rcdiag.metrics.ragged import F64
from rcdiag.model.diagnosis import Diagnosis
from rcdiag.model.display import Displayed
from rcdiag.model.fields import Field, JsonRecord, Origin, json_safe, safe_numbers, shown
from rcdiag.model.parts import Metrics, RunOptions, SourceInfo, StepResult, read_steps
from rcdiag.model.tables import cached, polars_frame, step_table, to_pandas
from rcdiag.version import SCHEMA_VERSION, __version__

if TYPE_CHECKING:
    import pandas
    import polars as pl
    import pyarrow as pa

BASELINE_KIND = "rcdiag-baseline"
"""The ``kind`` field of a baseline document (an analyze JSON is not a baseline)."""
BOOTSTRAP_METHOD = "sequence-level Poisson bootstrap (docs/rules.md)"
"""The ``bootstrap.method`` rcdiag writes."""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True, eq=False, repr=False)
class Baseline(Displayed, JsonRecord):
    """A baseline document (module docstring).

    Attributes:
        dialect: ``latest`` or ``legacy``: a check must use the same.
        source: what the reference run read.
        options: the options of the reference run (a check must use the same veto threshold).
        overall: every metric of the reference run, the whole dump as one batch.
        step_results: the metrics of each of its steps (the ``steps`` of the JSON document;
            :attr:`steps` has them as a table).
        seed: the seed of the bootstrap weights.
        replicates: K, the bootstrap replicates of each metric.
        bootstrap: metric → its K replicates (NaN where a replicate is not finite; written as
            null); metrics without replicates (maxima, quantiles) are absent.
        created: when the baseline was made (ISO 8601 UTC, as written).
        method: how the replicates were drawn.
        rcdiag_version: the version of rcdiag that made it.
        diagnosis: the diagnosis of the reference run when the baseline was just made (not part
            of the file: None for a baseline read back).
    """

    dialect: Dialect
    source: SourceInfo
    options: RunOptions
    overall: Metrics
    step_results: tuple[StepResult, ...]
    seed: int
    replicates: int
    bootstrap: Mapping[str, F64]
    created: str
    method: str = BOOTSTRAP_METHOD
    rcdiag_version: str = __version__
    diagnosis: Diagnosis | None = None

    @property
    def steps(self) -> pl.DataFrame:
        """The reference run's metrics of each step as a polars DataFrame (as
        :attr:`rcdiag.model.AnalysisResult.steps`; needs polars: ``rcdiag[polars]``)."""
        return polars_frame(self.to_arrow(), "steps", "baseline")

    def to_arrow(self) -> pa.Table:
        """:attr:`steps` as a pyarrow Table."""
        return cached(self, "steps", lambda: step_table(self.step_results))

    def to_pandas(self) -> pandas.DataFrame:
        """:attr:`steps` as a pandas DataFrame (needs pandas: ``pip install pandas``)."""
        return to_pandas(self.to_arrow())

    @property
    def veto_threshold(self) -> float | None:
        """τ as given to the reference run (None: the default)."""
        return self.options.veto_threshold

    @property
    def effective_veto_threshold(self) -> float:
        """τ the reference run's catastrophic-token metrics used."""
        return self.options.effective_veto_threshold

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": BASELINE_KIND,
            "rcdiag_version": self.rcdiag_version,
            "dialect": self.dialect,
            "created": self.created,
            "source": self.source.to_json(),
            "options": self.options.to_json(),
            "bootstrap": {
                "method": self.method,
                "seed": self.seed,
                "replicates": self.replicates,
                "metrics": {
                    name: json_safe(values.tolist()) for name, values in self.bootstrap.items()
                },
            },
            "overall": safe_numbers(self.overall),
            "steps": [s.to_json() for s in self.step_results],
        }

    @classmethod
    def from_json(cls, obj: Any, *, source: str) -> Baseline:
        """Validate a baseline document read from ``source``.

        Raises:
            InputError: not a baseline, another schema version, or a malformed field (a field of
                the wrong type, a replicate list shorter or longer than ``bootstrap.replicates``
                says, as in a file cut short).
        """
        origin = Origin(
            source, "not a valid baseline ({problem}); re-create it with `rcdiag baseline`"
        )
        return cls.read(Field.root(obj, origin))

    @classmethod
    def read(cls, field: Field) -> Baseline:
        origin, document = field.origin, field.value
        if not isinstance(document, Mapping):
            raise origin.error("not a baseline (expected a JSON object)")
        if document.get("kind") != BASELINE_KIND:
            raise origin.error(
                "not a baseline made by `rcdiag baseline` (make one with "
                "`rcdiag baseline DUMP -o FILE`)"
            )
        version = document.get("schema_version")
        if version != SCHEMA_VERSION:
            raise origin.error(
                f"baseline schema_version {version!r}, but this rcdiag {__version__} reads "
                f"schema_version {SCHEMA_VERSION}; re-create the baseline with this version"
            )
        dialect = field["dialect"].string()
        if dialect not in DIALECTS:
            raise origin.error(f"unknown dialect {dialect!r} (expected {', '.join(DIALECTS)})")
        boot = field["bootstrap"]
        count = boot["replicates"].count()
        metrics = boot["metrics"]
        if metrics.mapping() and count < 2:
            raise boot["replicates"].problem(
                f"bootstrap.replicates is {count}; a bootstrap needs at least 2"
            )
        return cls(
            dialect=cast(Dialect, dialect),
            rcdiag_version=field["rcdiag_version"].string(),
            created=field["created"].string(),
            source=SourceInfo.read(field["source"]),
            options=RunOptions.read(field["options"]),
            overall=field["overall"].numbers(),
            step_results=read_steps(field["steps"]),
            method=boot["method"].string(),
            seed=boot["seed"].count(),
            replicates=count,
            bootstrap={name: _replicates(values, count) for name, values in metrics.entries()},
        )


def _replicates(field: Field, count: int) -> F64:
    """The ``count`` replicates of one metric (null: not finite)."""
    values = field.value
    if not isinstance(values, list):
        raise field.wrong("a list of numbers")
    if len(values) != count:
        raise field.problem(
            f"{field.path} holds {len(values)} replicates but bootstrap.replicates is {count}; "
            "was the file cut short?"
        )
    bad = next((v for v in values if v is not None and not _is_number(v)), None)
    if bad is not None:
        raise field.problem(f"{field.path} holds {shown(bad)}, expected numbers")
    return np.array([math.nan if v is None else v for v in values], dtype=np.float64)
