"""rcdiag from Python: what each command computes, as typed results (docs/python-api.md).

:func:`analyze`, :func:`compare_presets`, :func:`report` (:func:`write_report` writes its page),
:func:`check` and :func:`baseline` (from :mod:`rcdiag.checks.api`), all also ``rcdiag.<name>``. Each
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
    >>> result.overall["rollout_corr/k3_kl"] > 0, result.diagnosis.verdict in ("watch", "act")
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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rcdiag.analysis import AnalyzeOptions
from rcdiag.argument_checks import (
    check_arguments,
    check_report_output,
    configs_of,
    names,
    python_names,
)
from rcdiag.arguments import (
    PathLike,
    Paths,
    Progress,
    dialect_of,
    documented,
    dump_spec,
    spec_of,
)
from rcdiag.checks.api import baseline, check
from rcdiag.dialects import DEFAULT_DIALECT
from rcdiag.errors import UsageError
from rcdiag.metrics.profile import DEFAULT_TOP_K
from rcdiag.model import AnalysisResult, ComparisonResult, ReportDocument

if TYPE_CHECKING:
    from rcdiag.correction.compare import NamedConfig
    from rcdiag.frameworks.base import Framework

__all__ = [
    "PathLike",
    "Paths",
    "Progress",
    "analyze",
    "baseline",
    "check",
    "compare_presets",
    "dump_spec",
    "report",
    "write_report",
]


@python_names
@documented
def analyze(
    paths: Paths,
    *,
    dialect: str | None = None,
    veto_threshold: float | None = None,
    step: int | Sequence[int] | None = None,
    steps: str | tuple[int | None, int | None] | None = None,
    rollout_col: str | None = None,
    training_col: str | None = None,
    mask_col: str | None = None,
    step_col: str | None = None,
    drop_nonfinite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    engine: str = "local",
    ray_address: str | None = None,
    frameworks: str | Sequence[str] | None = None,
    progress: Progress | None = None,
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
        {dump_arguments}

    Returns:
        The result: ``overall``, ``steps`` (polars, one row per step), ``checks``, ``diagnosis``,
        ``to_json()`` (the ``analyze --json`` document).

    Raises:
        InputError: unreadable input, or a dump (or step selection) without any valid token.
        UsageError: a bad argument.
    """
    from rcdiag.results import analyze_dump

    check_arguments(locals())
    spec = spec_of(paths, locals())
    options = AnalyzeOptions(
        dialect=dialect_of(dialect) or DEFAULT_DIALECT, veto_threshold=veto_threshold
    )
    return analyze_dump(spec, options, progress, frameworks_of(frameworks, "--frameworks"))


@python_names
@documented
def compare_presets(
    paths: Paths,
    *,
    presets: Sequence[str] | None = None,
    configs: Sequence[PathLike] | Mapping[str, Mapping[str, Any]] = (),
    sweep: str | None = None,
    grid: Sequence[str | float] | None = None,
    dialect: str | None = None,
    step: int | Sequence[int] | None = None,
    steps: str | tuple[int | None, int | None] | None = None,
    rollout_col: str | None = None,
    training_col: str | None = None,
    mask_col: str | None = None,
    step_col: str | None = None,
    drop_nonfinite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    engine: str = "local",
    ray_address: str | None = None,
    framework: str | Sequence[str] | None = None,
    progress: Progress | None = None,
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
        framework: also dry-run these frameworks' own correction modes with their defaults
            (``"trl,slime"``; ``--framework``; docs/frameworks.md).
        {dump_arguments}

    Returns:
        The comparison: ``presets`` (one entry per configuration), ``overall`` (name → figures
        and metrics), ``configurations`` (the same as a polars DataFrame), ``steps`` (polars, one
        row per step and configuration), ``sweep``, ``diagnosis`` and ``recommendation`` (what
        ``rcdiag recommend`` advises), ``to_json()`` (the ``compare-presets --json`` document).

    Raises:
        InputError: unreadable input. UsageError: an unknown preset, a bad configuration.
    """
    from rcdiag.correction.loading import resolve_configs
    from rcdiag.correction.sweep import build_sweep
    from rcdiag.results import compare_and_recommend

    check_arguments(locals())
    presets, configs = names("presets", presets), configs_of(configs)
    inline = dict(configs) if isinstance(configs, Mapping) else {}
    files = [] if isinstance(configs, Mapping) else [Path(os.fspath(c)) for c in configs]
    if grid is not None and sweep is None:
        raise UsageError("grid needs a sweep")
    modes = framework_modes(framework)
    nothing = presets is not None and not presets and not files and not inline
    if nothing and sweep is None and not modes:
        raise UsageError("no preset, configuration, sweep or framework: nothing to compare")
    chosen, named = resolve_configs(presets, files, dialect_of(dialect), inline)
    named = [*named, *modes]
    planned = None
    if sweep is not None:
        values = None if grid is None else [str(v) for v in grid]
        if values == []:
            raise UsageError("grid: no threshold")
        planned = build_sweep(sweep, chosen, values)
        if presets is None and not files and not inline and not modes:
            named = []  # a sweep alone: only its grid
    return compare_and_recommend(spec_of(paths, locals()), named, chosen, planned, progress)


@python_names
@documented
def report(
    paths: Paths | None = None,
    *,
    from_json: PathLike | None = None,
    dialect: str | None = None,
    veto_threshold: float | None = None,
    top: int = DEFAULT_TOP_K,
    step: int | Sequence[int] | None = None,
    steps: str | tuple[int | None, int | None] | None = None,
    rollout_col: str | None = None,
    training_col: str | None = None,
    mask_col: str | None = None,
    step_col: str | None = None,
    drop_nonfinite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    engine: str = "local",
    ray_address: str | None = None,
    frameworks: str | Sequence[str] | None = None,
    progress: Progress | None = None,
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
        {dump_arguments}

    Returns:
        The report document: ``overall``, ``steps`` (polars), ``diagnosis``, ``presets``,
        ``preset_steps`` (polars), ``verdict``, ``recommendation`` (``["choices"][0]`` is the
        recommended configuration), ``to_json()`` (the ``report --json`` document).

    Raises:
        InputError: unreadable input. UsageError: both or neither of a dump and ``from_json``.
    """
    from rcdiag.report.run import ReportOptions, build_report_document, complete, load_document

    check_arguments(locals())
    explicit = dialect_of(dialect)
    if top < 0:
        raise UsageError(f"top must be ≥ 0, got {top}")
    chosen = frameworks_of(frameworks, "--frameworks")
    if from_json is not None:
        if paths:
            raise UsageError("give either dump paths or --from results.json, not both")
        if chosen:
            raise UsageError("--frameworks needs the dump: it cannot be computed from --from")
        source = Path(os.fspath(from_json))
        document = load_document(source)
        if explicit is not None and explicit != document.dialect:
            raise UsageError(
                f"--dialect {explicit}: {source} holds results of the "
                f"{document.dialect} dialect; recompute them from the dump"
            )
        return complete(document)
    if not paths:
        raise UsageError(
            "no input: give a dump (parquet files, a glob or a directory) or --from results.json"
        )
    options = ReportOptions(
        dialect=explicit or DEFAULT_DIALECT,
        veto_threshold=veto_threshold,
        top_k=top,
        frameworks=tuple(chosen),
    )
    return build_report_document(spec_of(paths, locals()), options, progress)


@python_names
def write_report(
    result: ReportDocument | AnalysisResult | ComparisonResult,
    path: PathLike,
    plotlyjs: str = "embed",
) -> int:
    """Write the self-contained HTML report of a result to ``path`` (atomically; it opens offline
    in any browser). A result of :func:`analyze` or :func:`compare_presets` gives the page of
    what it holds (as ``rcdiag report --from``); :func:`report` gives the whole page.

    Returns:
        The size of the page in bytes.

    Raises:
        UsageError: ``path`` is a file of the dump or a directory, or lies in a directory that
            cannot be written.
        OSError: writing failed (the disk is full, say); any file at ``path`` is left as it was.
    """
    from rcdiag.io.paths import check_outputs
    from rcdiag.io.remote import is_remote
    from rcdiag.report.render import write_html
    from rcdiag.report.run import document_of, page_json

    check_report_output(result, path, plotlyjs)
    if isinstance(result, ReportDocument):
        document = result
    elif isinstance(result, AnalysisResult):
        document = ReportDocument.of(result)
    else:
        document = document_of(result.to_json(), "the comparison")
    inputs = [Path(p) for p in document.source.paths if not is_remote(p)]
    target = check_outputs({"path": os.fspath(path)}, {"a file of the dump": inputs})["path"]
    return write_html(target, page_json(document), plotlyjs)


def frameworks_of(value: str | Sequence[str] | None, option: str) -> list[Framework]:
    """The frameworks of a ``frameworks=`` / ``framework=`` argument (none when not given)."""
    from rcdiag.frameworks import parse_frameworks

    return [] if value is None else parse_frameworks(value, option)


def framework_modes(value: str | Sequence[str] | None) -> list[NamedConfig]:
    """The correction modes of the ``framework=`` frameworks, with their defaults.

    Raises:
        UsageError: an unknown framework, or one whose modes rcdiag does not dry-run.
    """
    from rcdiag.correction.compare import NamedConfig
    from rcdiag.frameworks import FRAMEWORKS

    modes: list[NamedConfig] = []
    for chosen in frameworks_of(value, "--framework"):
        if not chosen.presets:
            with_modes = ", ".join(f.id for f in FRAMEWORKS.values() if f.presets)
            raise UsageError(
                f"--framework {chosen.id}: rcdiag dry-runs no correction mode of {chosen.title} "
                f"(its metrics: analyze --frameworks {chosen.id}); modes exist for {with_modes}"
            )
        modes += [NamedConfig(p.name, p.config, p.plan) for p in chosen.presets]
    return modes
