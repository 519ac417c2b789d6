"""The result of ``rcdiag compare-presets``: what each rollout-correction configuration would do
(:mod:`rcdiag.model.configuration`), as the ``--json`` document (:class:`ComparisonResult`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rcdiag.dialects import Dialect
from rcdiag.model.advice import Recommendation
from rcdiag.model.configuration import ConfigurationResult, SweepResult, read_presets
from rcdiag.model.diagnosis import Diagnosis
from rcdiag.model.display import Displayed
from rcdiag.model.fields import Field, JsonRecord, Number
from rcdiag.model.parts import SourceInfo, header, read_header
from rcdiag.model.tables import (
    cached,
    overall_table,
    polars_frame,
    preset_step_table,
    to_pandas,
)
from rcdiag.version import __version__

if TYPE_CHECKING:
    import pandas
    import polars as pl
    import pyarrow as pa


@dataclass(frozen=True, repr=False)
class ComparisonResult(Displayed, JsonRecord):
    """The result of ``rcdiag compare-presets`` (``to_json()`` is the ``--json`` document).

    Attributes:
        dialect: ``latest`` or ``legacy``.
        source: what was read.
        presets: every compared configuration, in the order asked for.
        sweep: the ``--sweep``, when one was asked for.
        rcdiag_version: the version of rcdiag that computed the numbers.
        diagnosis: the diagnosis of the dump (as ``rcdiag analyze`` gives it), computed in the
            same pass; not part of the JSON document (None for a document read back).
        recommendation: what ``rcdiag recommend`` advises for the dump
            (:func:`rcdiag.assess.recommendation.ranking.recommend`; its ``choices[0]`` is the recommended
            configuration), computed in the same pass; not part of the JSON document either.
    """

    dialect: Dialect
    source: SourceInfo
    presets: tuple[ConfigurationResult, ...]
    sweep: SweepResult | None = None
    rcdiag_version: str = __version__
    diagnosis: Diagnosis | None = dataclasses.field(default=None, compare=False)
    recommendation: Recommendation | None = dataclasses.field(
        default=None, compare=False, repr=False
    )

    @property
    def overall(self) -> dict[str, dict[str, Number]]:
        """Configuration name → its figures over the whole dump (``kept_token_share``, ``ess``,
        …) followed by every metric verl logs for it, the whole dump as one batch."""
        return {p.name: {**p.summary, **p.overall} for p in self.presets}

    @property
    def configurations(self) -> pl.DataFrame:
        """:attr:`overall` as a polars DataFrame: one row per configuration, in the order
        compared; ``configuration``, then the figures, then the metrics (Float64, null where a
        configuration does not log a metric). Needs polars (``rcdiag[polars]``)."""
        table = cached(self, "configurations", lambda: overall_table(self.presets))
        return polars_frame(table, "configurations", "result")

    @property
    def steps(self) -> pl.DataFrame:
        """Every configuration at every step as a polars DataFrame in long format: one row per
        step and configuration (by step, then in the order compared); ``step``,
        ``configuration``, rcdiag's figures, then every metric verl logs for a configuration
        (null where it does not log it). ``steps.pivot("configuration", index="step",
        values="ess")`` gives one column per configuration (docs/python-api.md). Needs polars
        (``rcdiag[polars]``)."""
        return polars_frame(self.to_arrow(), "steps", "result")

    def to_arrow(self) -> pa.Table:
        """:attr:`steps` as a pyarrow Table (what ``--csv`` and ``--parquet`` write)."""
        return cached(self, "steps", lambda: preset_step_table(self.presets))

    def to_pandas(self) -> pandas.DataFrame:
        """:attr:`steps` as a pandas DataFrame (needs pandas: ``pip install pandas``)."""
        return to_pandas(self.to_arrow())

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            **header(self.dialect, self.rcdiag_version),
            "source": self.source.to_json(),
            "presets": [p.to_json() for p in self.presets],
        }
        if self.sweep is not None:
            out["sweep"] = self.sweep.to_json()
        return out

    @classmethod
    def read(cls, field: Field) -> ComparisonResult:
        head = read_header(field)
        sweep = field.get("sweep")
        return cls(
            dialect=head.dialect,
            rcdiag_version=head.rcdiag_version,
            source=SourceInfo.read(field["source"]),
            presets=read_presets(field["presets"]),
            sweep=None if sweep is None else SweepResult.read(sweep),
        )
