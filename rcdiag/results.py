"""The serializable results of a pass over a dump (docs/report.md, "Results JSON").

The JSON documents built here from a :class:`~rcdiag.pipeline.Pass` are the one thing the terminal
view, the HTML report and CI checks read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rcdiag import SCHEMA_VERSION, __version__
from rcdiag.analysis import AnalyzeOptions, OffPolicyAnalysis, StepResult
from rcdiag.assess.diagnosis import Diagnosis, diagnose
from rcdiag.assess.observations import Observations
from rcdiag.assess.registry import MetricStatus, judge
from rcdiag.correction.compare import NamedConfig, PresetComparison, worst_steps
from rcdiag.correction.sweep import Sweep
from rcdiag.dialects import Dialect
from rcdiag.errors import InputError
from rcdiag.io.reader import DumpReader
from rcdiag.metrics.grouped import GroupedStats
from rcdiag.metrics.trend import detect_trend
from rcdiag.pipeline import DumpSpec, Pass, Progress, Request, run


def source_info(dump: DumpSpec, reader: DumpReader, stats: GroupedStats) -> dict[str, Any]:
    """The ``source`` object of every result document, from the per-step row statistics.

    Raises:
        InputError: the dump (or the selected steps) holds no row or no valid token.
    """
    totals = stats.total()
    steps, valid_tokens = stats.column("valid_tokens")
    where = ", ".join(str(f.path) for f in reader.files[:3]) + (
        ", …" if len(reader.files) > 3 else ""
    )
    selected = "" if dump.selection.is_everything else " in the selected steps"
    if totals["rows"] == 0:
        raise InputError(f"{where}: the dump holds no rows{selected}")
    if totals["valid_tokens"] == 0:
        raise InputError(
            f"{where}: no valid token{selected} (every response_mask position is 0); "
            "verl would raise 'response_mask must contain at least one valid token'"
        )
    return {
        "paths": [str(f.path) for f in reader.files],
        "rows": int(totals["rows"]),
        "tokens": int(totals["positions"]),
        "valid_tokens": int(totals["valid_tokens"]),
        "steps": int(steps.size),
        "empty_steps": steps[valid_tokens == 0].tolist(),
        "dropped_nonfinite": reader.dropped_nonfinite,
        "positive_log_probs": reader.positive_log_probs,
        "first_positive_log_prob": reader.first_positive,
    }


def header(dialect: str) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "rcdiag_version": __version__, "dialect": dialect}


def analyze_dump(
    dump: DumpSpec, options: AnalyzeOptions, progress: Progress | None = None
) -> dict[str, Any]:
    """Read the dump once and return the ``rcdiag analyze`` JSON document.

    Raises:
        InputError: unreadable input, or a dump (or step selection) without any valid token.
    """
    return analysis_document(run(dump, Request(options), progress))


def analysis_document(done: Pass) -> dict[str, Any]:
    """The ``rcdiag analyze`` document of a finished pass."""
    dump, reader, analysis = done.dump, done.reader, done.analysis
    options = analysis.options
    source = source_info(dump, reader, analysis.stats)
    overall = analysis.overall()
    steps = analysis.step_results()
    statuses, diagnosis = assess(analysis, steps, reader.positive_log_probs)
    return {
        **header(options.dialect),
        "source": source,
        "options": {
            "veto_threshold": options.veto_threshold,
            "effective_veto_threshold": options.effective_veto_threshold,
            "selected_steps": None if dump.selection.is_everything else [s.step for s in steps],
        },
        "overall": overall,
        "steps": [
            {"step": s.step, "rows": s.rows, "valid_tokens": s.valid_tokens, "metrics": s.metrics}
            for s in steps
        ],
        "checks": [status.to_json() for status in statuses],
        "diagnosis": diagnosis.to_json(),
    }


DRIFT_ALPHA = 0.01
"""Significance level of the change-point test behind the ``growing_drift`` diagnosis."""


def assess(
    analysis: OffPolicyAnalysis, steps: Sequence[StepResult], positive_log_probs: int
) -> tuple[list[MetricStatus], Diagnosis]:
    """The registry status of every overall metric and the diagnosis of the dump."""
    overall = analysis.overall()
    # verl logs its veto metrics as 0.0 when the veto is off: no verdict on those
    skip = () if analysis.options.legacy_veto else ("rollout_corr/rollout_is_veto_fraction",)
    statuses = judge(overall, skip=skip)
    k3 = np.array(
        [np.nan if (v := s.metrics["rollout_corr/k3_kl"]) is None else v for s in steps],
        dtype=np.float64,
    )
    finite = k3[np.isfinite(k3)]
    recent = float(np.median(finite[-max(1, finite.size // 4) :])) if finite.size > 1 else None
    evidence = analysis.evidence.groups()
    observations = Observations(
        overall=overall,
        totals={**analysis.stats.total(), **analysis.evidence.total()},
        step_evidence=[evidence[s.step] for s in steps],
        k3_trend=detect_trend([s.step for s in steps], k3, alpha=DRIFT_ALPHA),
        recent_k3_kl=recent,
        lags=analysis.lags.table() or None,
        positive_log_probs=positive_log_probs,
    )
    return statuses, diagnose(observations, [m.status for m in statuses])


def configuration_result(
    comparison: PresetComparison, named: NamedConfig, per_step_metrics: bool = True
) -> dict[str, Any]:
    """One entry of a compare-presets document's ``presets`` (docs/report.md); without
    ``per_step_metrics`` the steps carry only rcdiag's summary figures (smaller documents)."""
    steps = comparison.steps()
    step_summaries = [(s, comparison.summary(named.name, s)) for s in steps]
    summary: dict[str, Any] = dict(comparison.summary(named.name))
    summary["worst_steps"] = worst_steps(step_summaries)
    summary["fully_rejected_steps"] = [
        s for s, fig in step_summaries if fig["kept_token_share"] == 0.0
    ]
    return {
        "name": named.name,
        "config": dict(named.config),
        "overall": comparison.metrics(named.name),
        "summary": summary,
        "steps": [
            {"step": s, "metrics": comparison.metrics(named.name, s), "summary": fig}
            if per_step_metrics
            else {"step": s, "summary": fig}
            for s, fig in step_summaries
        ],
    }


def compare_dump(
    dump: DumpSpec,
    configs: Sequence[NamedConfig],
    dialect: Dialect,
    sweep: Sweep | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Read the dump once and return the ``rcdiag compare-presets`` JSON document.

    Sweep points, when asked for, are evaluated in the same pass and listed under ``sweep``.
    """
    request = Request(
        AnalyzeOptions(dialect=dialect), configs, summary_only=sweep.configs if sweep else ()
    )
    return comparison_document(run(dump, request, progress), configs, sweep)


def compare_and_recommend(
    dump: DumpSpec,
    configs: Sequence[NamedConfig],
    dialect: Dialect,
    sweep: Sweep | None = None,
    progress: Progress | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """:func:`compare_dump`, and the recommendation ``rcdiag recommend`` gives for the same dump
    (:func:`rcdiag.assess.recommend.recommend`, docs/recommendation.md), from the same pass.

    The recommendation's candidate sweeps are evaluated beside the configurations (summary figures
    only) and are not part of the document. Its ``choices[0]`` is the recommended configuration;
    there is none when the dump shows a bug in how it was made.
    """
    from rcdiag.assess.candidates import candidate_sweeps
    from rcdiag.assess.recommend import recommend
    from rcdiag.correction.presets import PRESETS

    # "/" cannot be in a preset name nor a file stem: no clash with the compared names
    candidates = [
        (s, [NamedConfig(f"recommend/{c.name}", c.config, c.plan) for c in s.configs])
        for s in candidate_sweeps(dialect)
    ]
    summary_only = [*(sweep.configs if sweep else ()), *(c for _, cs in candidates for c in cs)]
    done = run(dump, Request(AnalyzeOptions(dialect=dialect), configs, summary_only), progress)
    document = comparison_document(done, configs, sweep)
    comparison = done.comparison
    assert comparison is not None
    presets = PRESETS[dialect]
    advice_input = {
        **analysis_document(done),
        "presets": [  # compared presets only (a --config file may carry a preset's name)
            entry
            for entry in document["presets"]
            if entry["name"] in presets and entry["config"] == dict(presets[entry["name"]].config)
        ],
        "sweeps": [
            {
                "key": s.key,
                "target": s.target,
                "points": [
                    {
                        "threshold": t,
                        "config": dict(c.config),
                        "summary": comparison.summary(c.name),
                    }
                    for t, c in zip(s.thresholds, named, strict=True)
                ],
            }
            for s, named in candidates
        ],
    }
    return document, recommend(json_safe(advice_input))


def comparison_document(
    done: Pass, configs: Sequence[NamedConfig], sweep: Sweep | None = None
) -> dict[str, Any]:
    """The ``rcdiag compare-presets`` document of a finished pass."""
    comparison = done.comparison
    assert comparison is not None, "the pass compared no configuration"
    source = source_info(done.dump, done.reader, comparison.base)
    document: dict[str, Any] = {
        **header(done.analysis.options.dialect),
        "source": source,
        "presets": [configuration_result(comparison, c) for c in configs],
    }
    if sweep is not None:
        document["sweep"] = {
            "target": sweep.target,
            "points": [
                {
                    "threshold": threshold,
                    "config": dict(c.config),
                    "summary": comparison.summary(c.name),
                }
                for threshold, c in zip(sweep.thresholds, sweep.configs, strict=True)
            ],
        }
    return document


def json_safe(value: Any) -> Any:
    """NaN and ±inf become ``null`` (docs/report.md); containers are converted recursively."""
    if isinstance(value, float):
        return value + 0.0 if math.isfinite(value) else None  # + 0.0 turns -0.0 into 0.0
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def empty_steps(document: dict[str, Any]) -> list[int]:
    """Steps without any valid token (their metrics are null)."""
    return list(document["source"].get("empty_steps", []))
