"""``rcdiag check``: CI gates on the rollout/training mismatch; exit 0 pass, 1 fail, 2 bad input."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import typer

from rcdiag.analysis import AnalyzeOptions
from rcdiag.checks.baseline import check_compatible
from rcdiag.checks.bootstrap import CHECK_STREAM
from rcdiag.checks.catalog import analysis_metric_names, preset_metric_names
from rcdiag.checks.defaults import default_rules
from rcdiag.checks.evaluate import (
    CheckInputs,
    check_document,
    diagnosis_results,
    evaluate_rules,
)
from rcdiag.checks.outputs import junit_xml, markdown, verdict_line
from rcdiag.checks.rules import (
    SETTING_NAMES,
    CheckSettings,
    MetricCatalog,
    Rule,
    RuleSet,
    parse_rule,
    parse_rules_toml,
    referenced_presets,
    validate_rules,
)
from rcdiag.commands._check_terminal import show
from rcdiag.commands._common import (
    ALL_STEPS,
    EXIT_CHECKS_FAILED,
    DebugOption,
    DialectOption,
    DumpOptions,
    JsonOption,
    PathsArgument,
    VetoOption,
    cli_errors,
    outputs,
    parse_dialect,
    reads_dump,
    shown,
    stderr,
    stdout,
    write_output,
)
from rcdiag.commands._terminal import progress_bar, warn_about_input
from rcdiag.correction.compare import NamedConfig
from rcdiag.correction.loading import files_dialect, read_config_file, resolve_configs
from rcdiag.correction.presets import PRESETS
from rcdiag.dialects import DEFAULT_DIALECT, Dialect
from rcdiag.errors import UsageError
from rcdiag.io.paths import read_text_input
from rcdiag.metrics.ragged import F64
from rcdiag.model import AnalysisResult, Baseline, ConfigurationResult
from rcdiag.pipeline import BootstrapRequest, DumpSpec, Request, run
from rcdiag.results import analysis_result, comparison_result


def load_rules(rules_file: Path | None, rule: list[str]) -> RuleSet:
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
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise UsageError(f"{path}: not a baseline (JSON nested too deeply)") from None
    return Baseline.from_json(document, source=str(path))


def _settings(file: RuleSet, given: dict[str, float | None]) -> CheckSettings:
    values = {**file.settings, **{k: v for k, v in given.items() if v is not None}}
    return CheckSettings(**{k: values[k] for k in SETTING_NAMES if k in values})


def _configs(
    rules: list[Rule], config_files: list[Path], dialect: Dialect
) -> tuple[list[NamedConfig], list[str]]:
    """The configurations the rules name (presets or --config files) and every available name."""
    stems = {path.stem: path for path in config_files}
    available = [*PRESETS[dialect], *stems]
    wanted = [p for p in referenced_presets(rules) if p in available]
    for stem in stems:
        if stem not in wanted:
            stderr.print(
                f"[yellow]Note:[/] --config {shown(stems[stem])}: no rule reads "
                f"preset:{shown(stem)}/…"
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
    baseline_path: Path | None,
    dialect: str | None,
    veto_threshold: float | None,
    config_files: list[Path] | None,
) -> Plan:
    """Options (the baseline's dialect and veto threshold unless given), the rules (the defaults
    when none are given), the configurations they read; every rule validated.

    Raises:
        UsageError: an incompatible baseline, an unknown metric or preset.
    """
    explicit = parse_dialect(dialect)
    given, given_by = explicit, "--dialect {dialect} was given"
    if given is None and baseline is not None:
        given, given_by = (
            baseline.dialect,
            f"the baseline {baseline_path} is of the {{dialect}} dialect",
        )
    files = {path: read_config_file(path) for path in config_files or []}
    chosen = files_dialect(files, given, given_by) or given or DEFAULT_DIALECT
    if veto_threshold is None and baseline is not None:
        veto_threshold = baseline.veto_threshold
    options = AnalyzeOptions(dialect=chosen, veto_threshold=veto_threshold)
    if baseline is not None:
        check_compatible(baseline, chosen, options.effective_veto_threshold, str(baseline_path))
    names = analysis_metric_names(options)
    rules = list(ruleset.rules)
    with_defaults = not rules or ruleset.include_defaults
    if with_defaults:
        rules = [*default_rules(names, baseline is not None, settings.abs_tol), *rules]
    configs, available = _configs(rules, config_files or [], chosen)
    catalog = MetricCatalog(
        analysis=names,
        presets=preset_metric_names(configs),
        available_presets=available,
        baseline=None if baseline is None else list(baseline.overall),
    )
    validate_rules(rules, catalog)
    return Plan(options, rules, configs, catalog, with_defaults)


def read_once(
    spec: DumpSpec, plan: Plan, baseline: Baseline | None, bootstrap: bool, quiet: bool
) -> tuple[AnalysisResult, dict[str, ConfigurationResult], dict[str, F64] | None]:
    """One pass over the dump feeding the analysis, the preset comparison (when rules read a
    preset) and the bootstrap (when rules compare with a baseline).

    Returns the analyze result, the compared configurations by name and the replicates.
    """
    draws = None
    if bootstrap and baseline is not None:
        draws = BootstrapRequest(baseline.replicates, baseline.seed, CHECK_STREAM)
    with progress_bar(quiet) as advance:
        done = run(spec, Request(plan.options, plan.configs, bootstrap=draws), advance)
    analysis = analysis_result(done)
    warn_about_input(analysis.source, quiet)
    presets: dict[str, ConfigurationResult] = {}
    if done.comparison is not None:
        compared = comparison_result(done, plan.configs)
        presets = {entry.name: entry for entry in compared.presets}
    return analysis, presets, done.replicates()


@reads_dump
def check(
    paths: PathsArgument,
    rules_file: Annotated[
        Path | None,
        typer.Option("--rules", help="A TOML rules file (schema: docs/rules.md)."),
    ] = None,
    rule: Annotated[
        list[str] | None,
        typer.Option(
            "--rule",
            "-r",
            help="A rule, e.g. 'rollout_corr/k3_kl.overall < 1e-3' (repeatable; docs/rules.md).",
        ),
    ] = None,
    with_defaults: Annotated[
        bool,
        typer.Option(
            "--with-defaults", help="Also evaluate the built-in rules when rules are given."
        ),
    ] = False,
    baseline_path: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            help="A baseline made by `rcdiag baseline`: adds drift-against-baseline rules.",
        ),
    ] = None,
    abs_tol: Annotated[
        float | None,
        typer.Option("--abs-tol", help="Absolute tolerance of baseline comparisons (default 0)."),
    ] = None,
    rel_tol: Annotated[
        float | None,
        typer.Option(
            "--rel-tol", help="Relative tolerance of baseline comparisons (default 0.1 = 10%)."
        ),
    ] = None,
    confidence: Annotated[
        float | None,
        typer.Option(
            "--confidence", help="Level of the bootstrap interval of the drift (default 0.99)."
        ),
    ] = None,
    trend_alpha: Annotated[
        float | None,
        typer.Option(
            "--trend-alpha", help="Significance level of the rise/fall change-point test (0.05)."
        ),
    ] = None,
    config: Annotated[
        list[Path] | None,
        typer.Option(
            "--config",
            "-c",
            help="A YAML rollout-correction configuration that rules can read as "
            "preset:<file stem>/… (repeatable).",
        ),
    ] = None,
    junit: Annotated[
        str | None,
        typer.Option("--junit", metavar="FILE", help="Write JUnit XML (one test case per rule)."),
    ] = None,
    markdown_path: Annotated[
        str | None,
        typer.Option(
            "--markdown",
            metavar="FILE",
            help="Write a Markdown summary (also appended to $GITHUB_STEP_SUMMARY when set).",
        ),
    ] = None,
    json_path: JsonOption = None,
    dialect: DialectOption = None,
    veto_threshold: VetoOption = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print nothing but errors and the verdict.")
    ] = False,
    debug: DebugOption = False,
    dump_options: DumpOptions = ALL_STEPS,
) -> None:
    """Evaluate CI rules on a dump: exit 0 when they hold, 1 when a rule fails, 2 on bad input.

    Without rules: published health thresholds, a trend gate, and drift against --baseline
    (docs/rules.md).
    """
    with cli_errors(debug):
        written = outputs(
            {
                "--json": json_path,
                "--junit": junit,
                "--markdown": markdown_path,
                "$GITHUB_STEP_SUMMARY": os.environ.get("GITHUB_STEP_SUMMARY") or None,
            },
            paths,
            {"--rules": rules_file, "--baseline": baseline_path, "--config": config},
        )
        ruleset = load_rules(rules_file, rule or [])
        if with_defaults:
            ruleset = RuleSet(ruleset.rules, ruleset.settings, include_defaults=True)
        settings = _settings(
            ruleset,
            {
                "abs_tol": abs_tol,
                "rel_tol": rel_tol,
                "confidence": confidence,
                "trend_alpha": trend_alpha,
            },
        )
        baseline = load_baseline(baseline_path) if baseline_path is not None else None
        plan = make_plan(
            ruleset, settings, baseline, baseline_path, dialect, veto_threshold, config
        )
        rules, catalog = plan.rules, plan.catalog
        uses_baseline = any(r.baseline is not None for r in rules)
        if baseline is not None and not uses_baseline:
            stderr.print(
                "[yellow]Note:[/] --baseline given but no rule compares with it "
                "(write METRIC.overall <= baseline, or add --with-defaults)."
            )

        spec = dump_options.spec(paths)
        analysis, presets, replicates = read_once(spec, plan, baseline, uses_baseline, quiet)
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
        document = check_document(
            inputs, results, settings, None if baseline_path is None else str(baseline_path)
        )
        write_outputs(document, written)
    if not quiet:
        show(document)
    else:
        stdout.print(f"rcdiag check: {verdict_line(document)}")
    if not document["passed"]:
        raise typer.Exit(EXIT_CHECKS_FAILED)


def write_outputs(document: dict[str, Any], written: dict[str, Path]) -> None:
    """Every requested file (option → checked path, :func:`outputs`), atomically; the Markdown is
    also appended to $GITHUB_STEP_SUMMARY when it is set."""
    if "--json" in written:
        write_output(written["--json"], document)
    if "--junit" in written:
        timestamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        write_output(written["--junit"], junit_xml(document, timestamp))
    md, summary = written.get("--markdown"), written.get("$GITHUB_STEP_SUMMARY")
    if md is None and summary is None:
        return
    text = markdown(document)
    if md is not None:
        write_output(md, text)
    if summary is not None:
        try:
            with open(summary, "a", encoding="utf-8", errors="backslashreplace") as handle:
                handle.write(text + "\n")
        except OSError as exc:
            raise UsageError(
                f"$GITHUB_STEP_SUMMARY {summary}: cannot append ({exc.strerror or exc})"
            ) from None
