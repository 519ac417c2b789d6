"""The document of ``rcdiag report`` (docs/report.md, "Results first, HTML second").

A report document is the ``rcdiag analyze`` document with the preset comparison, the candidate
sweeps, the profile, and the verdict and recommendation computed from them. ``rcdiag report --from``
also reads a plain analyze or compare-presets document as one: every part is optional but the
header and ``source``, and the page says what is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from rcdiag.dialects import Dialect
from rcdiag.model.advice import Recommendation, Verdict
from rcdiag.model.analysis import AnalysisResult
from rcdiag.model.configuration import ConfigurationResult, SweepResult, read_presets
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
from rcdiag.model.profile import Profile
from rcdiag.model.tables import (
    cached,
    polars_frame,
    preset_step_table,
    step_table,
    to_pandas,
)
from rcdiag.version import __version__

if TYPE_CHECKING:
    import pandas
    import polars as pl
    import pyarrow as pa


@dataclass(frozen=True, repr=False)
class ReportDocument(Displayed, JsonRecord):
    """Everything the HTML report shows (``to_json()`` is ``rcdiag report --json``).

    Attributes:
        dialect: ``latest`` or ``legacy``.
        source: what was read.
        options: the analysis options, with ``top_k`` (None: not in the document).
        overall: every metric of the whole dump (None: not in the document, as below).
        step_results: the metrics of each step (the ``steps`` of the JSON document; :attr:`steps`
            has them as a table).
        checks: the registry status of each judged metric.
        diagnosis: the verdict and the diagnosed causes.
        presets: every preset of the dialect (aliases left out), figures only per step.
        preset_aliases: alias → the preset with identical settings it duplicates.
        sweeps: the candidate sweeps of docs/recommendation.md, overall figures per point.
        sweep: the ``--sweep`` of a compare-presets document read with ``--from``.
        profile: where the mismatch lives.
        verdict: the verdict object of :func:`rcdiag.assess.verdict.signals.verdict` (a pure function of
            the rest; the report recomputes it for a document read back).
        recommendation: the object of :func:`rcdiag.assess.recommendation.ranking.recommend` (likewise).
        frameworks: other frameworks' metrics under their own names (``--frameworks``).
        rcdiag_version: the version of rcdiag that computed the numbers.
    """

    dialect: Dialect
    source: SourceInfo
    options: RunOptions | None = None
    overall: Metrics | None = None
    step_results: tuple[StepResult, ...] | None = None
    checks: tuple[MetricStatus, ...] | None = None
    diagnosis: Diagnosis | None = None
    presets: tuple[ConfigurationResult, ...] | None = None
    preset_aliases: Mapping[str, str] | None = None
    sweeps: tuple[SweepResult, ...] | None = None
    sweep: SweepResult | None = None
    profile: Profile | None = None
    verdict: Verdict | None = None
    recommendation: Recommendation | None = None
    frameworks: tuple[FrameworkResult, ...] | None = None
    rcdiag_version: str = __version__

    @classmethod
    def of(cls, analysis: AnalysisResult, **parts: Any) -> ReportDocument:
        """The document of an analysis (its verdict included) and the report's other parts
        (keyword arguments)."""
        return cls(
            dialect=analysis.dialect,
            source=analysis.source,
            options=analysis.options,
            overall=analysis.overall,
            step_results=analysis.step_results,
            checks=analysis.checks,
            diagnosis=analysis.diagnosis,
            frameworks=analysis.frameworks,
            rcdiag_version=analysis.rcdiag_version,
            **{"verdict": analysis.verdict, **parts},
        )

    @property
    def steps(self) -> pl.DataFrame | None:
        """The metrics of each step as a polars DataFrame (as :attr:`AnalysisResult.steps`); None
        when the document has no per-step metrics (a compare-presets document read back). Needs
        polars (``rcdiag[polars]``)."""
        if self.step_results is None:
            return None
        return polars_frame(self.to_arrow(), "steps", "document")

    @property
    def preset_steps(self) -> pl.DataFrame | None:
        """The figures of each preset at each step, one row per step and preset (as
        :attr:`ComparisonResult.steps`; the report keeps no per-step verl metric); None when the
        document has no presets."""
        if self.presets is None:
            return None
        presets = self.presets
        table = cached(self, "preset_steps", lambda: preset_step_table(presets))
        return polars_frame(table, "preset_steps", "document")

    def to_arrow(self) -> pa.Table:
        """:attr:`steps` as a pyarrow Table.

        Raises:
            ValueError: the document has no per-step metrics.
        """
        steps = self.step_results
        if steps is None:
            raise ValueError("the document has no per-step metrics")
        return cached(self, "steps", lambda: step_table(steps))

    def to_pandas(self) -> pandas.DataFrame:
        """:attr:`steps` as a pandas DataFrame (needs pandas: ``pip install pandas``).

        Raises:
            ValueError: the document has no per-step metrics.
        """
        return to_pandas(self.to_arrow())

    @property
    def analysis(self) -> AnalysisResult | None:
        """The ``rcdiag analyze`` result inside the document (what ``analyze --json`` writes);
        None when the document lacks a part of it (a compare-presets document)."""
        if (
            self.options is None
            or self.overall is None
            or self.step_results is None
            or self.checks is None
            or self.diagnosis is None
        ):
            return None
        return AnalysisResult(
            dialect=self.dialect,
            source=self.source,
            options=replace(self.options, top_k=None),
            overall=self.overall,
            step_results=self.step_results,
            checks=self.checks,
            diagnosis=self.diagnosis,
            rcdiag_version=self.rcdiag_version,
            frameworks=self.frameworks,
            verdict=self.verdict,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            **header(self.dialect, self.rcdiag_version),
            "source": self.source.to_json(),
        }
        if self.options is not None:
            out["options"] = self.options.to_json()
        if self.overall is not None:
            out["overall"] = safe_numbers(self.overall)
        if self.step_results is not None:
            out["steps"] = [s.to_json() for s in self.step_results]
        if self.checks is not None:
            out["checks"] = [c.to_json() for c in self.checks]
        if self.diagnosis is not None:
            out["diagnosis"] = self.diagnosis.to_json()
        if self.frameworks is not None:
            out["frameworks"] = [f.to_json() for f in self.frameworks]
        if self.presets is not None:
            out["presets"] = [p.to_json() for p in self.presets]
        if self.preset_aliases is not None:
            out["preset_aliases"] = dict(self.preset_aliases)
        if self.sweep is not None:
            out["sweep"] = self.sweep.to_json()
        if self.sweeps is not None:
            out["sweeps"] = [s.to_json() for s in self.sweeps]
        if self.profile is not None:
            out["profile"] = self.profile.to_json()
        if self.verdict is not None:
            out["verdict"] = json_safe(self.verdict.to_json())
        if self.recommendation is not None:
            out["recommendation"] = json_safe(self.recommendation.to_json())
        return out

    @classmethod
    def read(cls, field: Field) -> ReportDocument:
        head = read_header(field)

        def part(key: str) -> Field | None:
            found = field.get(key)
            return None if found is None or found.is_null() else found

        options, overall, steps = part("options"), part("overall"), part("steps")
        checks, diagnosis, presets = part("checks"), part("diagnosis"), part("presets")
        aliases, sweeps, sweep = part("preset_aliases"), part("sweeps"), part("sweep")
        profile, verdict, recommendation = part("profile"), part("verdict"), part("recommendation")
        frameworks = part("frameworks")
        return cls(
            dialect=head.dialect,
            rcdiag_version=head.rcdiag_version,
            source=SourceInfo.read(field["source"]),
            options=None if options is None else RunOptions.read(options),
            overall=None if overall is None else overall.numbers(),
            step_results=None if steps is None else read_steps(steps),
            checks=None if checks is None else read_checks(checks),
            diagnosis=None if diagnosis is None else Diagnosis.read(diagnosis),
            presets=None if presets is None else read_presets(presets),
            preset_aliases=None
            if aliases is None
            else {alias: preset.string() for alias, preset in aliases.entries()},
            sweeps=None if sweeps is None else tuple(SweepResult.read(s) for s in sweeps.items()),
            sweep=None if sweep is None else SweepResult.read(sweep),
            profile=None if profile is None else Profile.read(profile),
            verdict=None if verdict is None else Verdict.read(verdict),
            recommendation=None if recommendation is None else Recommendation.read(recommendation),
            frameworks=None if frameworks is None else read_frameworks(frameworks),
        )
