"""A check from start to finish: rules and baseline read, the plan made, the dump read once, the
rules evaluated (``rcdiag check`` and :func:`rcdiag.check`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from rcdiag.checks.baseline import check_compatible
from rcdiag.checks.catalog import analysis_metric_names, preset_metric_names
from rcdiag.checks.defaults import default_rules
from rcdiag.checks.evaluate import (
    CheckInputs,
    check_document,
    diagnosis_results,
    evaluate_rules,
)
from rcdiag.checks.rules import SETTING_NAMES, CheckSettings, Rule, RuleSet, parse_rule
from rcdiag.checks.rules_file import parse_rules_toml
from rcdiag.checks.validation import MetricCatalog, referenced_presets, validate_rules
from rcdiag.correction.compare import NamedConfig
from rcdiag.correction.loading import files_dialect, read_config_file, resolve_configs
from rcdiag.correction.presets import PRESETS
from rcdiag.dialects import DEFAULT_DIALECT, Dialect
from rcdiag.errors import UsageError
from rcdiag.io.documents import loads_json
from rcdiag.io.paths import printable, read_text_input
from rcdiag.metrics.analysis import AnalyzeOptions
from rcdiag.metrics.bootstrap import CHECK_STREAM
from rcdiag.metrics.ragged import F64
from rcdiag.model import AnalysisResult, Baseline, CheckResult, ConfigurationResult
from rcdiag.run.consumers import BootstrapRequest, Request
from rcdiag.run.dump import DumpSpec, Progress
from rcdiag.run.engine import run
from rcdiag.run.results import analysis_result, comparison_result


def load_rules(rules_file: Path | None, rule: Sequence[str]) -> RuleSet:
    """The rules file and the ``--rule`` flags, merged (file first)."""
    from_file = (
        parse_rules_toml(read_text_input(rules_file, "rules file"), str(rules_file))
        if rules_file is not None
        else RuleSet()
    )
    flags = tuple(parse_rule(text, "--rule") for text in rule)
    return RuleSet((*from_file.rules, *flags), from_file.settings, from_file.include_defaults)


def load_baseline(path: Path) -> Baseline:
    """A baseline file, parsed and validated (exit 2 when it is not one)."""
    text = read_text_input(
        path, "baseline", ": make a baseline with `rcdiag baseline DUMP -o FILE`"
    )
    try:
        document = loads_json(text, str(path))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise UsageError(f"{path}: not a baseline (JSON nested too deeply)") from None
    return Baseline.from_json(document, source=str(path))


def settings_of(file: RuleSet, given: Mapping[str, float | None]) -> CheckSettings:
    """The settings of a check: the rules file's, overridden by those given (not None)."""
    values = {**file.settings, **{k: v for k, v in given.items() if v is not None}}
    return CheckSettings(**{k: values[k] for k in SETTING_NAMES if k in values})


def _configs(
    rules: list[Rule], config_files: list[Path], dialect: Dialect, notes: list[str]
) -> tuple[list[NamedConfig], list[str]]:
    """The configurations the rules name (presets or --config files) and every available name;
    a note for each file no rule reads."""
    stems = {path.stem: path for path in config_files}
    available = [*PRESETS[dialect], *stems]
    wanted = [p for p in referenced_presets(rules) if p in available]
    for stem in stems:
        if stem not in wanted:
            notes.append(
                f"--config {printable(str(stems[stem]))}: no rule reads preset:{printable(stem)}/…"
            )
    if not wanted:
        return [], available
    preset_names = [p for p in wanted if p in PRESETS[dialect] and p not in stems]
    files = [stems[p] for p in wanted if p in stems]
    _, configs = resolve_configs(preset_names, files, dialect)
    return configs, available


class Plan(NamedTuple):
    """What a check will compute, decided before the dump is read."""

    options: AnalyzeOptions
    rules: list[Rule]
    configs: list[NamedConfig]
    catalog: MetricCatalog
    with_defaults: bool


def make_plan(
    ruleset: RuleSet,
    settings: CheckSettings,
    baseline: Baseline | None,
    baseline_origin: str | None,
    dialect: Dialect | None,
    veto_threshold: float | None,
    config_files: list[Path],
    notes: list[str],
) -> Plan:
    """Options (the baseline's dialect and veto threshold unless given), the rules (the defaults
    when none are given), the configurations they read; every rule validated.

    Raises:
        UsageError: an incompatible baseline, an unknown metric or preset.
    """
    given, given_by = dialect, "--dialect {dialect} was given"
    if given is None and baseline is not None:
        given = baseline.dialect
        named = f"the baseline {baseline_origin}" if baseline_origin else "the baseline"
        given_by = named + " is of the {dialect} dialect"
    files = {path: read_config_file(path) for path in config_files}
    chosen = files_dialect(files, given, given_by) or given or DEFAULT_DIALECT
    if veto_threshold is None and baseline is not None:
        veto_threshold = baseline.veto_threshold
    options = AnalyzeOptions(dialect=chosen, veto_threshold=veto_threshold)
    if baseline is not None:
        origin = baseline_origin or "the baseline"
        check_compatible(baseline, chosen, options.effective_veto_threshold, origin)
    names = analysis_metric_names(options)
    rules = list(ruleset.rules)
    with_defaults = not rules or ruleset.include_defaults
    if with_defaults:
        rules = [*default_rules(names, baseline is not None, settings.abs_tol), *rules]
    configs, available = _configs(rules, config_files, chosen, notes)
    catalog = MetricCatalog(
        analysis=names,
        presets=preset_metric_names(configs),
        available_presets=available,
        baseline=None if baseline is None else list(baseline.overall),
    )
    validate_rules(rules, catalog)
    return Plan(options, rules, configs, catalog, with_defaults)


def read_once(
    spec: DumpSpec,
    plan: Plan,
    baseline: Baseline | None,
    bootstrap: bool,
    progress: Progress | None = None,
) -> tuple[AnalysisResult, dict[str, ConfigurationResult], dict[str, F64] | None]:
    """One pass over the dump feeding the analysis, the preset comparison (when rules read a
    preset) and the bootstrap (when rules compare with a baseline).

    Returns the analyze result, the compared configurations by name and the replicates.
    """
    draws = None
    if bootstrap and baseline is not None:
        draws = BootstrapRequest(baseline.replicates, baseline.seed, CHECK_STREAM)
    done = run(spec, Request(plan.options, plan.configs, bootstrap=draws), progress)
    analysis = analysis_result(done)
    presets: dict[str, ConfigurationResult] = {}
    if done.comparison is not None:
        compared = comparison_result(done, plan.configs)
        presets = {entry.name: entry for entry in compared.presets}
    return analysis, presets, done.replicates()


def run_check(
    spec: DumpSpec,
    ruleset: RuleSet,
    settings: CheckSettings,
    baseline: Baseline | None = None,
    baseline_origin: str | None = None,
    dialect: Dialect | None = None,
    veto_threshold: float | None = None,
    config_files: Sequence[Path] = (),
    progress: Progress | None = None,
) -> CheckResult:
    """Plan the check, read the dump once, evaluate every rule (docs/rules.md); a ``baseline``
    is named by ``baseline_origin`` (its file) in messages and in the document.

    Raises:
        UsageError: an incompatible baseline, an unknown metric or preset, a bad configuration.
        InputError: unreadable input.
    """
    notes: list[str] = []
    plan = make_plan(
        ruleset,
        settings,
        baseline,
        baseline_origin,
        dialect,
        veto_threshold,
        list(config_files),
        notes,
    )
    rules, catalog = plan.rules, plan.catalog
    uses_baseline = any(r.baseline is not None for r in rules)
    if baseline is not None and not uses_baseline:
        notes.append(
            "--baseline given but no rule compares with it "
            "(write METRIC.overall <= baseline, or add --with-defaults)."
        )
    analysis, presets, replicates = read_once(spec, plan, baseline, uses_baseline, progress)
    validate_rules(
        rules,
        MetricCatalog(
            analysis=list(analysis.overall),
            presets={name: list(entry.overall) for name, entry in presets.items()},
            available_presets=catalog.available_presets,
            baseline=catalog.baseline,
        ),
    )
    inputs = CheckInputs(analysis, presets, replicates, baseline)
    results = evaluate_rules(rules, inputs, settings)
    if plan.with_defaults:
        results += diagnosis_results(analysis.diagnosis)
    document = check_document(inputs, results, settings, baseline_origin)
    return CheckResult(document, analysis, tuple(notes))
