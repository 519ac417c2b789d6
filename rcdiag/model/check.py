"""The result of ``rcdiag check``: the rules evaluated on a dump, and the analysis they read.

:class:`CheckResult` holds the ``check --json`` document (docs/rules.md) with the analysis of the
dump, so a notebook or a training script reads the per-step metrics beside the verdict of the rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rcdiag.model.analysis import AnalysisResult
from rcdiag.model.diagnosis import Diagnosis
from rcdiag.model.display import Displayed
from rcdiag.model.fields import Field, JsonRecord, json_safe
from rcdiag.model.parts import Metrics
from rcdiag.model.tables import cached, polars_frame, record_table, to_pandas
from rcdiag.version import SCHEMA_VERSION

if TYPE_CHECKING:
    import pandas
    import polars as pl
    import pyarrow as pa

CHECK_KIND = "rcdiag-check"
"""The ``kind`` of a check document."""

RULE_COLUMNS = (
    "name",
    "status",
    "severity",
    "metric",
    "preset",
    "aggregation",
    "value",
    "step",
    "detail",
)
"""The columns of :attr:`CheckResult.rules`, each a key of an entry of the document's ``rules``."""


@dataclass(frozen=True, eq=False, repr=False)
class CheckResult(Displayed, JsonRecord):
    """What ``rcdiag check`` decides (``to_json()`` is the ``--json`` document).

    Attributes:
        document: the ``check --json`` document (``passed``, ``counts``, ``rules``, …).
        analysis: the analysis of the dump the rules read (as ``rcdiag analyze`` gives it); None
            for a document read back with ``from_json`` (it holds no per-step metrics).
        notes: what the command prints as notes (a ``--config`` no rule reads, a baseline no rule
            compares with).
    """

    document: Mapping[str, Any]
    analysis: AnalysisResult | None = None
    notes: tuple[str, ...] = ()

    @classmethod
    def read(cls, field: Field) -> CheckResult:
        origin, document = field.origin, field.value
        if not isinstance(document, Mapping) or document.get("kind") != CHECK_KIND:
            raise origin.error("not a check document (expected the JSON of rcdiag check --json)")
        if document.get("schema_version") != SCHEMA_VERSION:
            raise origin.error(
                f"check schema_version {document.get('schema_version')!r}; this rcdiag reads "
                f"{SCHEMA_VERSION}"
            )
        if not isinstance(document.get("passed"), bool):
            raise field["passed"].wrong("true or false")
        for rule in field["rules"].items():
            rule["name"].string()
            rule["status"].string()
            rule["value"].optional_number()
        Diagnosis.read(field["diagnosis"])
        return cls(document=dict(document))

    @property
    def passed(self) -> bool:
        """Whether every ``fail`` rule holds (the command's exit code 0; else 1)."""
        return bool(self.document["passed"])

    @property
    def exit_code(self) -> int:
        """0 when the rules pass, 1 when a ``fail`` rule does not hold."""
        return 0 if self.passed else 1

    @property
    def overall(self) -> Metrics | None:
        """Every metric of the whole dump, by name (the analysis's; None when read back)."""
        return None if self.analysis is None else self.analysis.overall

    @property
    def diagnosis(self) -> Diagnosis:
        """The verdict and the diagnosed causes of the dump."""
        if self.analysis is not None:
            return self.analysis.diagnosis
        return Diagnosis.from_json(self.document["diagnosis"], source="the check document")

    @property
    def steps(self) -> pl.DataFrame | None:
        """The per-step metrics of the dump (:attr:`rcdiag.model.AnalysisResult.steps`; None
        when read back)."""
        return None if self.analysis is None else self.analysis.steps

    @property
    def rules(self) -> pl.DataFrame:
        """One row per rule, in evaluation order: ``name``, ``status`` (pass, fail, warn,
        skipped), ``severity``, ``metric``, ``preset``, ``aggregation``, ``value`` (Float64, null
        when skipped), ``step`` (Int64) and ``detail``. Needs polars (``rcdiag[polars]``)."""
        return polars_frame(self.to_arrow(), "rules", "result")

    def to_arrow(self) -> pa.Table:
        """:attr:`rules` as a pyarrow Table."""

        def build() -> pa.Table:
            entries = json_safe(list(self.document["rules"]))
            return record_table(entries, RULE_COLUMNS, {"value": "float64", "step": "int64"})

        return cached(self, "rules", build)

    def to_pandas(self) -> pandas.DataFrame:
        """:attr:`rules` as a pandas DataFrame (needs pandas: ``pip install pandas``)."""
        return to_pandas(self.to_arrow())

    def to_json(self) -> dict[str, Any]:
        """The ``rcdiag check --json`` document."""
        return dict(self.document)
