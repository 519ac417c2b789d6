"""The result of ``rcdiag analyze``.

:class:`AnalysisResult` is the ``rcdiag analyze --json`` document (docs/report.md, "Results JSON"):
where the numbers come from (:class:`~rcdiag.model.parts.SourceInfo`), with which options
(:class:`~rcdiag.model.parts.RunOptions`), every metric overall and per step
(:class:`~rcdiag.model.parts.StepResult`), the registry status of the judged metrics and the
diagnosis (:mod:`rcdiag.model.diagnosis`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rcdiag.dialects import Dialect
from rcdiag.model.advice import Verdict
from rcdiag.model.diagnosis import Diagnosis, MetricStatus
from rcdiag.model.display import Displayed
from rcdiag.model.fields import Field, JsonRecord, json_safe, safe_numbers
from rcdiag.model.frameworks import FrameworkResult, read_frameworks
from rcdiag.model.parts import (
    Metrics,
    RunOptions,
    SourceInfo,
    StepResult,
    header,
    read_checks,
    read_header,
    read_steps,
)
from rcdiag.model.tables import cached, polars_frame, step_table, to_pandas
from rcdiag.version import __version__

if TYPE_CHECKING:
    import pandas
    import polars as pl
    import pyarrow as pa


@dataclass(frozen=True, repr=False)
class AnalysisResult(Displayed, JsonRecord):
    """The result of ``rcdiag analyze``: every off-policy metric overall and per step, the status
    of the judged metrics and the diagnosis (``to_json()`` is the ``--json`` document).

    Attributes:
        dialect: ``latest`` or ``legacy`` (which verl the metrics follow).
        source: what was read.
        options: the options the numbers were computed with.
        overall: every metric of the whole dump taken as one batch, by name.
        step_results: the metrics of each step, by step (the ``steps`` of the JSON document;
            :attr:`steps` has them as a table).
        checks: the registry status of each judged metric present in ``overall``.
        diagnosis: the verdict and the diagnosed causes.
        rcdiag_version: the version of rcdiag that computed the numbers.
        frameworks: other frameworks' metrics under their own names (``--frameworks``; None
            when not asked for, and then not in the document).
        verdict: the verdict (status, headline, deciding gauges), decided once when the result
            is built (:mod:`rcdiag.assess.verdict`); None in a document written before it.
    """

    dialect: Dialect
    source: SourceInfo
    options: RunOptions
    overall: Metrics
    step_results: tuple[StepResult, ...]
    checks: tuple[MetricStatus, ...]
    diagnosis: Diagnosis
    rcdiag_version: str = __version__
    frameworks: tuple[FrameworkResult, ...] | None = None
    verdict: Verdict | None = None

    @property
    def steps(self) -> pl.DataFrame:
        """The metrics of each step as a polars DataFrame, one row per step: ``step``, ``rows``,
        ``valid_tokens``, then one Float64 column per metric (null where not defined), the values
        of ``to_json()["steps"]`` (docs/python-api.md). Needs polars (``rcdiag[polars]``)."""
        return polars_frame(self.to_arrow(), "steps", "result")

    def to_arrow(self) -> pa.Table:
        """:attr:`steps` as a pyarrow Table (what ``--csv`` and ``--parquet`` write)."""
        return cached(self, "steps", lambda: step_table(self.step_results))

    def to_pandas(self) -> pandas.DataFrame:
        """:attr:`steps` as a pandas DataFrame (needs pandas: ``pip install pandas``)."""
        return to_pandas(self.to_arrow())

    def to_json(self) -> dict[str, Any]:
        out = {
            **header(self.dialect, self.rcdiag_version),
            "source": self.source.to_json(),
            "options": self.options.to_json(),
            "overall": safe_numbers(self.overall),
            "steps": [s.to_json() for s in self.step_results],
            "checks": [c.to_json() for c in self.checks],
            "diagnosis": self.diagnosis.to_json(),
        }
        if self.frameworks is not None:
            out["frameworks"] = [f.to_json() for f in self.frameworks]
        if self.verdict is not None:
            out["verdict"] = json_safe(self.verdict.to_json())
        return out

    @classmethod
    def read(cls, field: Field) -> AnalysisResult:
        head = read_header(field)
        return cls(
            dialect=head.dialect,
            rcdiag_version=head.rcdiag_version,
            source=SourceInfo.read(field["source"]),
            options=RunOptions.read(field["options"]),
            overall=field["overall"].numbers(),
            step_results=read_steps(field["steps"]),
            checks=read_checks(field["checks"]),
            diagnosis=Diagnosis.read(field["diagnosis"]),
            frameworks=None if (f := field.get("frameworks")) is None else read_frameworks(f),
            verdict=None if (v := field.get("verdict")) is None else Verdict.read(v),
        )
