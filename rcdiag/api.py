"""rcdiag from Python: what each command computes, as typed results (docs/python-api.md).

:func:`analyze`, :func:`compare_presets`, :func:`report` (:func:`write_report` writes its page),
:func:`check` and :func:`baseline`, all also ``rcdiag.<name>``. Each
reads the dump once, as its command does, and returns the command's typed result
(:mod:`rcdiag.model`): ``overall`` (metric → value), ``steps`` (a polars DataFrame, one row per
step), ``diagnosis``, ``to_json()`` (what ``--json`` writes), ``to_arrow()`` and ``to_pandas()``.
The keyword arguments mirror the command-line flags (``--veto-threshold`` is ``veto_threshold=``);
the commands call these functions for everything they compute. Errors are
:class:`~rcdiag.errors.InputError` (the dump) and :class:`~rcdiag.errors.UsageError` (the
arguments), with the one-line message the command prints.

Example:
    >>> import tempfile, rcdiag
    >>> from rcdiag.synth import config_for, write_synthetic_dump
    >>> tmp = tempfile.TemporaryDirectory()
    >>> config = config_for("drift", steps=3, rows_per_step=16, mean_length=32)
    >>> _ = write_synthetic_dump(f"{tmp.name}/run", config, shards=True)
    >>> result = rcdiag.analyze(f"{tmp.name}/run")
    >>> result.steps.select("step", "rows").rows()
    [(0, 16), (1, 16), (2, 16)]
    >>> result.overall["rollout_corr/ppl_ratio"] > 0, result.diagnosis.verdict in ("watch", "act")
    (True, True)
    >>> compared = rcdiag.compare_presets(
    ...     f"{tmp.name}/run", presets=["decoupled_seq_is", "decoupled_token_is"]
    ... )
    >>> compared.steps.select("step", "configuration").rows()[:3]
    [(0, 'decoupled_seq_is'), (0, 'decoupled_token_is'), (1, 'decoupled_seq_is')]
    >>> tmp.cleanup()
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rcdiag.argument_checks import (
    check_arguments,
    check_report_output,
    configs_of,
    names,
    path_list,
)
from rcdiag.argument_names import renamed
from rcdiag.dialects import DEFAULT_DIALECT
from rcdiag.errors import UsageError
from rcdiag.metrics.analysis import AnalyzeOptions
from rcdiag.metrics.bootstrap import DEFAULT_REPLICATES, DEFAULT_SEED
from rcdiag.metrics.profile import DEFAULT_TOP_K
from rcdiag.model import (
    AnalysisResult,
    Baseline,
    CheckResult,
    ComparisonResult,
    Recommendation,
    ReportDocument,
)
from rcdiag.report import notebook as _notebook  # noqa: F401 (results draw themselves in notebooks)
from rcdiag.report.progress import shows_progress_in_notebooks
from rcdiag.run.dump import (
    DumpArguments,
    PathLike,
    Paths,
    Progress,
    dialect_of,
    dump_spec,
    spec_of,
)
from rcdiag.run.plans import frameworks_of
from rcdiag.run.python_words import speaks_python

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from rcdiag.run.convert import Converted


__all__ = [
    "PathLike",
    "Paths",
    "Progress",
    "analyze",
    "baseline",
    "check",
    "compare_presets",
    "convert",
    "dump_spec",
    "recommend",
    "report",
    "write_report",
]


@speaks_python
@shows_progress_in_notebooks
def analyze(
    paths: Paths,
    *,
    dialect: str | None = None,
    veto_threshold: float | None = None,
    frameworks: str | Sequence[str] | None = None,
    progress: Progress | None = None,
    **dump: Unpack[DumpArguments],
) -> AnalysisResult:
    """Every off-policy metric verl logs, per step and overall, with verdicts (``rcdiag analyze``).

    Args:
        paths: parquet files, directories (read recursively, ``step=N/`` shards), globs or URLs
            (``s3://bucket/run/``), one or a list.
        dialect: ``latest`` (default) or ``legacy`` (verl PR #4070's metric set).
        veto_threshold: τ of the catastrophic-token metrics (default 1e-4; in the legacy dialect
            it also enables verl's veto metrics).
        frameworks: also the mismatch metrics other frameworks log, under their own names
            (``"trl,slime"``, a list, or ``"all"``; ``--frameworks``; docs/frameworks.md).
        progress: called as ``progress(rows_read, total_rows)`` after each batch.
        **dump: where the dump is and how to read it: ``step``, ``steps``, ``rollout_col``,
            ``training_col``, ``mask_col``, ``step_col``, ``drop_nonfinite``,
            ``storage_options``, ``engine``, ``ray_address`` (:class:`~rcdiag.run.dump.DumpArguments`).

    Returns:
        The result: ``overall``, ``steps`` (polars, one row per step), ``checks``, ``diagnosis``,
        ``to_json()`` (the ``analyze --json`` document).

    Raises:
        InputError: unreadable input, or a dump (or step selection) without any valid token.
        UsageError: a bad argument.
    """
    check_arguments({**locals(), **dump})
    from rcdiag.run.results import analyze_dump

    spec = spec_of(paths, dump, "analyze")
    options = AnalyzeOptions(
        dialect=dialect_of(dialect) or DEFAULT_DIALECT, veto_threshold=veto_threshold
    )
    return analyze_dump(spec, options, progress, frameworks_of(frameworks, "--frameworks"))


@speaks_python
@renamed(framework="frameworks")
@shows_progress_in_notebooks
def compare_presets(
    paths: Paths,
    *,
    presets: Sequence[str] | None = None,
    configs: Sequence[PathLike] | Mapping[str, Mapping[str, Any]] = (),
    sweep: str | None = None,
    grid: Sequence[str | float] | None = None,
    dialect: str | None = None,
    frameworks: str | Sequence[str] | None = None,
    progress: Progress | None = None,
    **dump: Unpack[DumpArguments],
) -> ComparisonResult:
    """What each rollout-correction configuration would do to a dump (``rcdiag compare-presets``).

    Args:
        paths: the dump (as :func:`analyze`).
        presets: the presets to compare (``--preset``; ``rcdiag presets`` lists them); None: every
            preset of the dialect, or none when only a ``sweep`` is given; ``[]``: none.
        configs: your configurations (``--config``): YAML files, named after the file, or a mapping
            name → verl's rollout-correction keys (``{"mine": {"rollout_is": "token",
            "rollout_is_threshold": 2.0}}``).
        sweep: also evaluate a grid of thresholds for a criterion (``seq_mean_k1``) or an IS level
            (``is_token``, ``is_sequence``; docs/presets.md).
        grid: the thresholds of the ``sweep`` (default: per target).
        dialect: ``latest`` or ``legacy``; default: the one the configurations' keys imply, else
            ``latest``.
        frameworks: also dry-run these frameworks' own correction modes with their defaults
            (``"trl,slime"``, a list, or ``"all"``; ``--frameworks``; docs/frameworks.md).
        progress: called as ``progress(rows_read, total_rows)`` after each batch.
        **dump: where the dump is and how to read it: ``step``, ``steps``, ``rollout_col``,
            ``training_col``, ``mask_col``, ``step_col``, ``drop_nonfinite``,
            ``storage_options``, ``engine``, ``ray_address`` (:class:`~rcdiag.run.dump.DumpArguments`).

    Returns:
        The comparison: ``presets`` (one entry per configuration), ``overall`` (name → figures
        and metrics), ``configurations`` (the same as a polars DataFrame), ``steps`` (polars, one
        row per step and configuration), ``sweep``, ``diagnosis`` and ``recommendation`` (what
        ``rcdiag recommend`` advises), ``to_json()`` (the ``compare-presets --json`` document).

    Raises:
        InputError: unreadable input. UsageError: an unknown preset, a bad configuration.
    """
    check_arguments({**locals(), **dump})
    presets, configs = names("presets", presets), configs_of(configs)
    from rcdiag.run.plans import comparison_plan
    from rcdiag.run.results import compare_and_recommend

    named, chosen, planned = comparison_plan(presets, configs, sweep, grid, dialect, frameworks)
    return compare_and_recommend(
        spec_of(paths, dump, "compare_presets"), named, chosen, planned, progress
    )


@speaks_python
@shows_progress_in_notebooks
def report(
    paths: Paths | None = None,
    *,
    from_json: PathLike | None = None,
    dialect: str | None = None,
    veto_threshold: float | None = None,
    top: int = DEFAULT_TOP_K,
    frameworks: str | Sequence[str] | None = None,
    translate: str | None = None,
    progress: Progress | None = None,
    **dump: Unpack[DumpArguments],
) -> ReportDocument:
    """Everything the HTML report shows (``rcdiag report``, and ``rcdiag recommend``'s advice):
    the analysis, every preset, the candidate sweeps, the mismatch profile, the verdict and the
    recommended configuration; :func:`write_report` writes the page.

    Args:
        paths: the dump (as :func:`analyze`); None with ``from_json``.
        from_json: read a results JSON (of ``report --json``, ``analyze --json`` or
            ``compare-presets --json``) instead of a dump (``--from``).
        dialect: ``latest`` (default) or ``legacy``.
        veto_threshold: τ of the catastrophic-token metrics (as :func:`analyze`).
        top: offending sequences listed per ranking (``--top``).
        frameworks: also other frameworks' logged metrics (as :func:`analyze`).
        translate: also give the recommended configuration in this framework's own keys
            (``"trl"``; the recommendation's ``framework``; ``recommend --framework``).
        progress: called as ``progress(rows_read, total_rows)`` after each batch.
        **dump: where the dump is and how to read it: ``step``, ``steps``, ``rollout_col``,
            ``training_col``, ``mask_col``, ``step_col``, ``drop_nonfinite``,
            ``storage_options``, ``engine``, ``ray_address`` (:class:`~rcdiag.run.dump.DumpArguments`).

    Returns:
        The report document: ``overall``, ``steps`` (polars), ``diagnosis``, ``presets``,
        ``preset_steps`` (polars), ``verdict``, ``recommendation`` (``["choices"][0]`` is the
        recommended configuration), ``to_json()`` (the ``report --json`` document).

    Raises:
        InputError: unreadable input. UsageError: both or neither of a dump and ``from_json``.
    """
    check_arguments({**locals(), **dump})
    from rcdiag.run.documents import ReportOptions, build_report_document
    from rcdiag.run.plans import report_from_json, report_target

    explicit = dialect_of(dialect)
    if top < 0:
        raise UsageError(f"top must be ≥ 0, got {top}")
    chosen = frameworks_of(frameworks, "--frameworks")
    target = report_target(paths, from_json, chosen, translate)
    if from_json is not None:
        return _translated(report_from_json(Path(os.fspath(from_json)), explicit), target)
    assert paths
    options = ReportOptions(
        dialect=explicit or DEFAULT_DIALECT,
        veto_threshold=veto_threshold,
        top_k=top,
        frameworks=tuple(chosen),
    )
    document = build_report_document(spec_of(paths, dump, "report"), options, progress)
    return _translated(document, target)


def _translated(document: ReportDocument, framework: str | None) -> ReportDocument:
    from rcdiag.run.documents import complete, translated

    document = complete(document)
    return document if framework is None else translated(document, framework)


@speaks_python
@renamed(framework="translate")
@shows_progress_in_notebooks
def recommend(
    paths: Paths | None = None,
    *,
    from_json: PathLike | None = None,
    translate: str | None = None,
    dialect: str | None = None,
    veto_threshold: float | None = None,
    top: int = DEFAULT_TOP_K,
    progress: Progress | None = None,
    **dump: Unpack[DumpArguments],
) -> Recommendation:
    """Which rollout-correction configuration to use for a dump, and why (``rcdiag recommend``;
    the advice of :func:`report`, docs/recommendation.md).

    Args:
        paths: the dump (as :func:`analyze`); None with ``from_json``.
        from_json: read a results JSON instead of a dump (as :func:`report`).
        translate: also give the recommended configuration in this framework's own keys
            (``"trl"``, ``"slime"``, ``"openrlhf"``: the recommendation's ``framework``;
            ``recommend --framework``).
        dialect: ``latest`` (default) or ``legacy``.
        veto_threshold: τ of the catastrophic-token metrics (as :func:`analyze`).
        top: offending sequences listed per ranking (as :func:`report`).
        progress: called as ``progress(rows_read, total_rows)`` after each batch.
        **dump: where the dump is and how to read it: ``step``, ``steps``, ``rollout_col``,
            ``training_col``, ``mask_col``, ``step_col``, ``drop_nonfinite``,
            ``storage_options``, ``engine``, ``ray_address`` (as :func:`analyze`).

    Returns:
        The recommendation: ``recommended`` (``choices[0]``, None when nothing is recommended,
        e.g. for a dump bug), ``choices``, ``rules``, ``avoid``, ``notes``, ``to_json()``.

    Raises:
        InputError: unreadable input. UsageError: a bad argument.
    """
    document = report(
        paths,
        from_json=from_json,
        dialect=dialect,
        veto_threshold=veto_threshold,
        top=top,
        translate=translate,
        progress=progress,
        **dump,
    )
    assert document.recommendation is not None, "a built report document holds its advice"
    return document.recommendation


@speaks_python
@shows_progress_in_notebooks
def check(
    paths: Paths,
    *,
    rules: Sequence[str] = (),
    rules_file: PathLike | None = None,
    with_defaults: bool = False,
    baseline: PathLike | Baseline | None = None,
    abs_tol: float | None = None,
    rel_tol: float | None = None,
    confidence: float | None = None,
    trend_alpha: float | None = None,
    configs: Sequence[PathLike] = (),
    dialect: str | None = None,
    veto_threshold: float | None = None,
    progress: Progress | None = None,
    **dump: Unpack[DumpArguments],
) -> CheckResult:
    """Evaluate CI rules on a dump (``rcdiag check``; docs/rules.md).

    Args:
        paths: the dump (as :func:`analyze`).
        rules: rules such as ``"rollout_corr/k3_kl.overall < 1e-3"`` (``--rule``).
        rules_file: a TOML rules file (``--rules``), read before ``rules``.
        with_defaults: also evaluate the built-in rules when rules are given; without rules they
            are the rules.
        baseline: a baseline (made by :func:`baseline`, or its file): adds drift rules.
        abs_tol, rel_tol, confidence, trend_alpha: settings of the baseline and trend tests
            (default 0, 0.1, 0.99, 0.05; a rules file may set them).
        configs: YAML configurations rules read as ``preset:<file stem>/…`` (``--config``).
        dialect: ``latest`` or ``legacy``; default: the baseline's, else ``latest``.
        veto_threshold: τ (default: the baseline's, else 1e-4).
        progress: called as ``progress(rows_read, total_rows)`` after each batch.
        **dump: where the dump is and how to read it: ``step``, ``steps``, ``rollout_col``,
            ``training_col``, ``mask_col``, ``step_col``, ``drop_nonfinite``,
            ``storage_options``, ``engine``, ``ray_address`` (:class:`~rcdiag.run.dump.DumpArguments`).

    Returns:
        The check: ``passed``, ``exit_code``, ``rules`` (polars, one row per rule), ``overall``,
        ``steps`` and ``diagnosis`` of the dump, ``notes``, ``to_json()`` (``check --json``).

    Raises:
        InputError: unreadable input. UsageError: a bad rule, an incompatible baseline.
    """
    check_arguments({**locals(), **dump})
    rules, configs = names("rules", rules) or [], path_list("configs", configs)
    from rcdiag.checks.rules import RuleSet
    from rcdiag.run.check import load_baseline, load_rules, run_check, settings_of

    rules_path = None if rules_file is None else Path(os.fspath(rules_file))
    ruleset = load_rules(rules_path, list(rules))
    if with_defaults:
        ruleset = RuleSet(ruleset.rules, ruleset.settings, include_defaults=True)
    settings = settings_of(
        ruleset,
        {
            "abs_tol": abs_tol,
            "rel_tol": rel_tol,
            "confidence": confidence,
            "trend_alpha": trend_alpha,
        },
    )
    origin = None
    if baseline is not None and not isinstance(baseline, Baseline):
        origin = os.fspath(baseline)
        baseline = load_baseline(Path(origin))
    return run_check(
        spec_of(paths, dump, "check"),
        ruleset,
        settings,
        baseline,
        origin,
        dialect_of(dialect),
        veto_threshold,
        [Path(os.fspath(c)) for c in configs],
        progress,
    )


@speaks_python
@shows_progress_in_notebooks
def baseline(
    paths: Paths,
    *,
    seed: int = DEFAULT_SEED,
    replicates: int = DEFAULT_REPLICATES,
    dialect: str | None = None,
    veto_threshold: float | None = None,
    progress: Progress | None = None,
    **dump: Unpack[DumpArguments],
) -> Baseline:
    """A reference run's metrics and bootstrap replicates, for :func:`check` (``rcdiag baseline``;
    ``to_json()`` is the file it writes).

    Args:
        paths: the reference dump (as :func:`analyze`).
        seed: seed of the bootstrap weights (reproducible).
        replicates: bootstrap replicates K (≥ 10).
        dialect: ``latest`` (default) or ``legacy``.
        veto_threshold: τ of the catastrophic-token metrics (as :func:`analyze`).
        progress: called as ``progress(rows_read, total_rows)`` after each batch.
        **dump: where the dump is and how to read it: ``step``, ``steps``, ``rollout_col``,
            ``training_col``, ``mask_col``, ``step_col``, ``drop_nonfinite``,
            ``storage_options``, ``engine``, ``ray_address`` (:class:`~rcdiag.run.dump.DumpArguments`).

    Raises:
        InputError: unreadable input. UsageError: a bad seed or number of replicates.
    """
    check_arguments({**locals(), **dump})
    from rcdiag.checks.baseline import make_baseline
    from rcdiag.metrics.bootstrap import BASELINE_STREAM, MAX_REPLICATES
    from rcdiag.run.consumers import BootstrapRequest, Request
    from rcdiag.run.engine import run
    from rcdiag.run.results import analysis_result

    if seed < 0:
        raise UsageError(f"seed must be ≥ 0, got {seed}")
    if not 10 <= replicates <= MAX_REPLICATES:
        raise UsageError(f"replicates must lie in [10, {MAX_REPLICATES:,}], got {replicates}")
    options = AnalyzeOptions(
        dialect=dialect_of(dialect) or DEFAULT_DIALECT, veto_threshold=veto_threshold
    )
    request = Request(options, bootstrap=BootstrapRequest(replicates, seed, BASELINE_STREAM))
    done = run(spec_of(paths, dump, "baseline"), request, progress)
    replicated = done.replicates()
    assert replicated is not None
    return make_baseline(
        analysis_result(done), replicated, seed=seed, created=datetime.now(timezone.utc)
    )


@speaks_python
@shows_progress_in_notebooks
def convert(
    paths: Paths,
    output: PathLike,
    *,
    compression: str = "zstd",
    progress: Progress | None = None,
    **dump: Unpack[DumpArguments],
) -> Converted:
    """Write a dump rcdiag reads (slime, Miles, NeMo-RL, SkyRL or parquet) as one rcdiag parquet
    dump, atomically (``rcdiag convert``; docs/formats.md, "Converting").

    Args:
        paths: the dump (as :func:`analyze`).
        output: the parquet file to write; never one of the inputs.
        compression: parquet codec (``zstd``, ``snappy``, ``gzip``, ``none``).
        progress: called as ``progress(rows_read, total_rows)`` after each batch.
        **dump: where the dump is and how to read it (as :func:`analyze`; ``engine`` must be
            ``"local"``): ``step``, ``steps``, ``rollout_col``, ``training_col``, ``mask_col``,
            ``step_col``, ``drop_nonfinite``, ``storage_options``, ``format``, ``trust_pickle``.

    Returns:
        What was written: ``rows``, ``tokens``, ``steps``, ``files``, ``left_out``.

    Raises:
        InputError: unreadable input (nothing is written). UsageError: a bad argument.
    """
    check_arguments({**locals(), **dump})
    from rcdiag.io.paths import PARQUET_SUFFIXES, check_outputs
    from rcdiag.io.remote import is_remote
    from rcdiag.run.convert import convert_dump

    spec = spec_of(paths, dump, "convert")
    if spec.engine != "local":
        raise UsageError("convert reads the dump in this process: leave out engine")
    target = Path(os.fspath(output))
    if target.suffix.lower() not in PARQUET_SUFFIXES:
        raise UsageError(f"output {target}: give a .parquet file name")
    inputs = [Path(p) for p in spec.paths if not is_remote(p)]
    target = check_outputs({"output": os.fspath(target)}, {"a file of the dump": inputs})["output"]
    return convert_dump(spec, target, compression, progress)


@speaks_python
@renamed(path="output")
def write_report(
    result: ReportDocument | AnalysisResult | ComparisonResult,
    output: PathLike,
    plotlyjs: str = "embed",
) -> int:
    """Write the self-contained HTML report of a result to ``output`` (atomically; it opens offline
    in any browser). A result of :func:`analyze` or :func:`compare_presets` gives the page of
    what it holds (as ``rcdiag report --from``); :func:`report` gives the whole page.

    Returns:
        The size of the page in bytes.

    Raises:
        UsageError: ``output`` is a file of the dump or a directory, or lies in a directory that
            cannot be written.
        OSError: writing failed (the disk is full, say); any file at ``output`` is left as it was.
    """
    check_report_output(result, output, plotlyjs)
    from rcdiag.io.paths import check_outputs
    from rcdiag.io.remote import is_remote
    from rcdiag.report.render import write_html
    from rcdiag.run.documents import document_of, page_json

    if isinstance(result, ReportDocument):
        document = result
    elif isinstance(result, AnalysisResult):
        document = ReportDocument.of(result)
    else:
        document = document_of(result.to_json(), "the comparison")
    inputs = [Path(p) for p in document.source.paths if not is_remote(p)]
    target = check_outputs({"output": os.fspath(output)}, {"a file of the dump": inputs})["output"]
    return write_html(target, page_json(document), plotlyjs)
