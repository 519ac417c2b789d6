"""The typed results of a pass over a dump (:mod:`rcdiag.model`; docs/report.md, "Results JSON").

The results built here from a :class:`~rcdiag.run.consumers.Pass` are the one thing the terminal view,
the HTML report and CI checks read; their ``to_json()`` is what ``--json`` writes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from rcdiag.assess.diagnosis.causes import Diagnosis, diagnose
from rcdiag.assess.diagnosis.observations import Observations
from rcdiag.assess.diagnosis.spikes import isolated_spikes
from rcdiag.assess.judge import judge
from rcdiag.assess.verdict.signals import verdict
from rcdiag.dialects import Dialect
from rcdiag.errors import InputError
from rcdiag.io.reader import DumpReader
from rcdiag.metrics.analysis import AnalyzeOptions, OffPolicyAnalysis
from rcdiag.metrics.grouped import GroupedStats
from rcdiag.metrics.records import K3_KL, K3_KL_STDERR, VERL_VETO_FRACTION
from rcdiag.model import (
    AnalysisResult,
    ComparisonResult,
    ConfigurationResult,
    PresetSteps,
    RunOptions,
    SourceInfo,
    StepResult,
    SweepPoint,
    SweepResult,
    WorstStep,
    json_safe,
)
from rcdiag.model.configuration import StepCounts
from rcdiag.model.diagnosis import MetricStatus
from rcdiag.run.consumers import Pass, Request
from rcdiag.run.dump import DumpSpec, Progress
from rcdiag.run.engine import run

if TYPE_CHECKING:  # the comparison's modules: imported by the passes that compare
    from rcdiag.correction.compare import NamedConfig, PresetComparison
    from rcdiag.correction.sweep import Sweep
    from rcdiag.frameworks.base import Framework

__all__ = [
    "analysis_result",
    "analyze_dump",
    "compare_and_recommend",
    "compare_dump",
    "comparison_result",
    "configuration_result",
    "source_info",
    "sweep_result",
]


def source_info(dump: DumpSpec, reader: DumpReader, stats: GroupedStats) -> SourceInfo:
    """The ``source`` of every result, from the per-step row statistics.

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
    return SourceInfo(
        paths=tuple(str(f.path) for f in reader.files),
        rows=int(totals["rows"]),
        tokens=int(totals["positions"]),
        valid_tokens=int(totals["valid_tokens"]),
        steps=int(steps.size),
        empty_steps=tuple(steps[valid_tokens == 0].tolist()),
        dropped_nonfinite=reader.dropped_nonfinite,
        positive_log_probs=reader.positive_log_probs,
        first_positive_log_prob=reader.first_positive,
        left_out=tuple(sorted(reader.left_out.items())),
    )


def analyze_dump(
    dump: DumpSpec,
    options: AnalyzeOptions,
    progress: Progress | None = None,
    frameworks: Sequence[Framework] = (),
) -> AnalysisResult:
    """Read the dump once and return the ``rcdiag analyze`` result (with the ``frameworks``'
    logged metrics when some are given).

    Raises:
        InputError: unreadable input, or a dump (or step selection) without any valid token.
    """
    return analysis_result(run(dump, Request(options, frameworks=frameworks), progress))


def analysis_result(done: Pass) -> AnalysisResult:
    """The ``rcdiag analyze`` result of a finished pass."""
    dump, reader, analysis = done.dump, done.reader, done.analysis
    options = analysis.options
    source = source_info(dump, reader, analysis.stats)
    steps = [StepResult(*s) for s in analysis.step_results()]
    statuses, diagnosis = assess(analysis, steps, reader.positive_log_probs)
    result = AnalysisResult(
        dialect=options.dialect,
        source=source,
        options=RunOptions(
            veto_threshold=options.veto_threshold,
            effective_veto_threshold=options.effective_veto_threshold,
            selected_steps=None if dump.selection.is_everything else tuple(s.step for s in steps),
        ),
        overall=analysis.overall(),
        step_results=tuple(steps),
        checks=tuple(statuses),
        diagnosis=diagnosis,
        frameworks=None if done.frameworks is None else done.frameworks.results(),
    )
    return dataclasses.replace(result, verdict=verdict(result.to_json()))


def assess(
    analysis: OffPolicyAnalysis, steps: Sequence[StepResult], positive_log_probs: int
) -> tuple[list[MetricStatus], Diagnosis]:
    """The registry status of every overall metric and the diagnosis of the dump."""
    overall = analysis.overall()
    # verl logs its veto metrics as 0.0 when the veto is off: no verdict on those
    skip = () if analysis.options.legacy_veto else (VERL_VETO_FRACTION.name,)
    statuses = judge(overall, skip=skip)
    spikes = isolated_spikes(statuses, steps)
    evidence = analysis.evidence.groups()
    observations = Observations(
        overall=overall,
        totals={**analysis.stats.total(), **analysis.evidence.total()},
        step_evidence=[evidence[s.step] for s in steps],
        k3_steps=[(s.step, s.metrics[K3_KL.name], s.metrics[K3_KL_STDERR.name]) for s in steps],
        lags=analysis.lags.table() or None,
        positive_log_probs=positive_log_probs,
        spikes={spike.metric: spike.step for spike in spikes},
    )
    spiked = {spike.metric for spike in spikes}
    verdict_statuses = [m.status for m in statuses if m.metric not in spiked]
    return statuses, diagnose(observations, verdict_statuses, spikes)


def configuration_result(
    comparison: PresetComparison,
    named: NamedConfig,
    per_step_metrics: bool = True,
    purpose: str | None = None,
) -> ConfigurationResult:
    """What one configuration would do (an entry of a comparison's ``presets``, docs/report.md);
    without ``per_step_metrics`` the steps carry only rcdiag's summary figures (smaller
    documents); ``purpose``: the preset's, for the report."""
    from rcdiag.correction.figures import worst_steps

    steps = comparison.steps()
    figures = comparison.summary_columns(named.name)  # every step at once, as columns
    kept = figures.names.index("kept_token_share")
    fully_rejected = np.flatnonzero(figures.defined[kept] & (figures.values[kept] == 0.0))
    worst = worst_steps(steps, figures)
    return ConfigurationResult(
        name=named.name,
        framework=None if named.framework == "verl" else named.framework,
        purpose=purpose,
        config=dict(named.config),
        overall=comparison.metrics(named.name),
        summary=comparison.summary(named.name),
        worst_steps={
            figure: None if w is None else WorstStep(step=w["step"], value=w["value"])
            for figure, w in worst.items()
        },
        fully_rejected_steps=tuple(np.asarray(steps)[fully_rejected].tolist()),
        steps=PresetSteps(
            steps,
            figures,
            comparison.metric_columns(named.name) if per_step_metrics else None,
        ),
    )


def sweep_result(
    comparison: PresetComparison,
    target: str,
    thresholds: Sequence[str],
    configs: Sequence[NamedConfig],
    key: str | None = None,
    title: str | None = None,
    per_step: bool = False,
) -> SweepResult:
    """The overall figures of each grid point of a sweep evaluated in the comparison's pass; with
    ``per_step`` (a titled sweep of the report) also each point's kept shares at every step,
    unless it keeps every token and sequence of the dump (then 1 at every step), and the IS
    weight mass it truncates at every step when it truncates some."""

    def point(threshold: str, named: NamedConfig) -> SweepPoint:
        summary = comparison.summary(named.name)
        # a point that keeps every token and sequence of the dump keeps all of each step
        everything = all(summary[k] == 1.0 for k in STEP_SHARES)
        truncates = (summary["weight_mass_removed"] or 0.0) > 0.0
        if not per_step or (everything and not truncates):
            return SweepPoint(threshold, dict(named.config), summary)
        figures = comparison.step_figures(named.name)[1]
        names = (*(() if everything else STEP_SHARES), *(STEP_MASS if truncates else ()))
        shares = {k: tuple(figures[k].tolist()) for k in names}
        return SweepPoint(threshold, dict(named.config), summary, shares)

    return SweepResult(
        target=target,
        points=tuple(point(t, c) for t, c in zip(thresholds, configs, strict=True)),
        key=key,
        title=title,
        steps=step_counts(comparison) if per_step else None,
    )


STEP_SHARES = ("kept_token_share", "kept_sequence_share")
"""The per-step figures a report's sweep points carry (what the recommendation judges them on)."""
STEP_MASS = ("weight_mass_removed",)
"""… and, for a point whose truncation removes IS weight mass, that share at each step."""


def step_counts(comparison: PresetComparison) -> StepCounts:
    """The steps of a comparison, with their valid tokens and sequences holding one."""
    steps, valid = comparison.base.column("valid_tokens")
    sequences = comparison.base.column("nonempty_rows")[1]
    return StepCounts(
        tuple(steps.tolist()),
        tuple(int(v) for v in valid.tolist()),
        tuple(int(v) for v in sequences.tolist()),
    )


def compare_dump(
    dump: DumpSpec,
    configs: Sequence[NamedConfig],
    dialect: Dialect,
    sweep: Sweep | None = None,
    progress: Progress | None = None,
) -> ComparisonResult:
    """Read the dump once and return the ``rcdiag compare-presets`` result.

    Sweep points, when asked for, are evaluated in the same pass and listed under ``sweep``.
    """
    request = Request(
        AnalyzeOptions(dialect=dialect), configs, summary_only=sweep.configs if sweep else ()
    )
    return comparison_result(run(dump, request, progress), configs, sweep)


def compare_and_recommend(
    dump: DumpSpec,
    configs: Sequence[NamedConfig],
    dialect: Dialect,
    sweep: Sweep | None = None,
    progress: Progress | None = None,
) -> ComparisonResult:
    """:func:`compare_dump`, with the diagnosis of the dump and the recommendation ``rcdiag
    recommend`` gives for it (:func:`rcdiag.assess.recommendation.ranking.recommend`, docs/recommendation.md),
    from the same pass (``diagnosis`` and ``recommendation`` of the result).

    The recommendation's candidate sweeps are evaluated beside the configurations (summary figures
    only) and are not part of the document. Its ``choices[0]`` is the recommended configuration;
    there is none when the dump shows a bug in how it was made.
    """
    from rcdiag.assess.recommendation.candidates import candidate_sweeps
    from rcdiag.assess.recommendation.ranking import recommend
    from rcdiag.correction.compare import NamedConfig
    from rcdiag.correction.presets import PRESETS

    # "/" cannot be in a preset name nor a file stem: no clash with the compared names
    candidates = [
        (s, [NamedConfig(f"recommend/{c.name}", c.config, c.plan) for c in s.configs])
        for s in candidate_sweeps(dialect)
    ]
    summary_only = [*(sweep.configs if sweep else ()), *(c for _, cs in candidates for c in cs)]
    done = run(dump, Request(AnalyzeOptions(dialect=dialect), configs, summary_only), progress)
    result = comparison_result(done, configs, sweep)
    comparison = done.comparison
    assert comparison is not None
    presets = PRESETS[dialect]
    analysis = analysis_result(done)
    advice_input = {
        **analysis.to_json(),
        "presets": [  # compared presets only (a --config file may carry a preset's name), without
            # their per-step figures, which the recommendation does not read
            entry.without_steps().to_json()
            for entry in result.presets
            if entry.name in presets and dict(entry.config) == dict(presets[entry.name].config)
        ],
        "sweeps": [
            sweep_result(comparison, s.target, s.thresholds, named, s.key, s.title, True).to_json()
            for s, named in candidates
        ],
    }
    return dataclasses.replace(
        result, diagnosis=analysis.diagnosis, recommendation=recommend(json_safe(advice_input))
    )


def comparison_result(
    done: Pass, configs: Sequence[NamedConfig], sweep: Sweep | None = None
) -> ComparisonResult:
    """The ``rcdiag compare-presets`` result of a finished pass."""
    comparison = done.comparison
    assert comparison is not None, "the pass compared no configuration"
    return ComparisonResult(
        dialect=done.analysis.options.dialect,
        source=source_info(done.dump, done.reader, comparison.base),
        presets=tuple(configuration_result(comparison, c) for c in configs),
        sweep=None
        if sweep is None
        else sweep_result(comparison, sweep.target, sweep.thresholds, sweep.configs),
    )
