"""Typed results: what every command computes, as frozen dataclasses with ``to_json``/``from_json``.

``to_json()`` gives the JSON document docs/report.md ("Results JSON") describes (NaN and ±inf as
null); ``X.from_json(obj, source=name)`` checks a parsed JSON value field by field and raises
:class:`~rcdiag.errors.InputError` naming ``name`` and the field's path for the first value of the
wrong type. ``X.from_json(doc, source=...).to_json() == doc`` for every document rcdiag writes.

Documents:

* :class:`AnalysisResult` — ``rcdiag analyze --json``;
* :class:`ComparisonResult` — ``rcdiag compare-presets --json``;
* :class:`ReportDocument` — ``rcdiag report --json`` (and what ``report --from`` reads);
* :class:`Baseline` — ``rcdiag baseline``;
* :class:`CheckResult` — ``rcdiag check --json``, with the analysis the rules read.

The results a notebook reads also have tables, built as pyarrow Tables (``to_arrow()``), shown as
polars DataFrames (``steps``: one row per step, per step and configuration for a comparison; polars
is the ``polars`` extra, imported when first asked for) and converted by ``to_pandas()``
(docs/python-api.md).

Their parts: :class:`SourceInfo`, :class:`RunOptions`, :class:`StepResult`, :class:`MetricStatus`,
:class:`Diagnosis` and :class:`Cause`, :class:`ConfigurationResult` with :class:`PresetStep` and
:class:`WorstStep`, :class:`SweepResult` and :class:`SweepPoint`, :class:`Profile` with
:class:`Histogram`, :class:`Bucket` and :class:`TopSequence`.

This package only holds, writes and checks results; :mod:`rcdiag.run.results` builds them from a pass
over a dump, :mod:`rcdiag.assess` makes the judgements in them.
"""

from __future__ import annotations

from rcdiag.model.advice import Choice, Gauge, Recommendation, Verdict
from rcdiag.model.analysis import AnalysisResult
from rcdiag.model.baseline import BASELINE_KIND, Baseline
from rcdiag.model.check import CheckResult
from rcdiag.model.comparison import ComparisonResult
from rcdiag.model.configuration import (
    ConfigurationResult,
    PresetStep,
    PresetSteps,
    SweepPoint,
    SweepResult,
    WorstStep,
)
from rcdiag.model.diagnosis import STATUSES, Cause, Diagnosis, MetricStatus, Spike, Status
from rcdiag.model.fields import json_safe
from rcdiag.model.parts import RunOptions, SourceInfo, StepResult
from rcdiag.model.profile import Bucket, Histogram, Profile, TopSequence
from rcdiag.model.report import ReportDocument

__all__ = [
    "BASELINE_KIND",
    "STATUSES",
    "AnalysisResult",
    "Baseline",
    "Bucket",
    "Cause",
    "CheckResult",
    "Choice",
    "ComparisonResult",
    "ConfigurationResult",
    "Diagnosis",
    "Gauge",
    "Histogram",
    "MetricStatus",
    "PresetStep",
    "PresetSteps",
    "Profile",
    "Recommendation",
    "ReportDocument",
    "RunOptions",
    "SourceInfo",
    "Spike",
    "Status",
    "StepResult",
    "SweepPoint",
    "SweepResult",
    "TopSequence",
    "Verdict",
    "WorstStep",
    "json_safe",
]
