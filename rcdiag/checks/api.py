"""``rcdiag.check`` and ``rcdiag.baseline`` (:mod:`rcdiag.api`): CI gates on a dump, and the
reference they compare with."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rcdiag.analysis import AnalyzeOptions
from rcdiag.argument_checks import check_arguments, names, path_list, python_names
from rcdiag.arguments import PathLike, Paths, Progress, dialect_of, documented, spec_of
from rcdiag.checks.bootstrap import DEFAULT_REPLICATES, DEFAULT_SEED
from rcdiag.dialects import DEFAULT_DIALECT
from rcdiag.errors import UsageError
from rcdiag.model import Baseline, CheckResult


@python_names
@documented
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
    progress: Progress | None = None,
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
        {dump_arguments}

    Returns:
        The check: ``passed``, ``exit_code``, ``rules`` (polars, one row per rule), ``overall``,
        ``steps`` and ``diagnosis`` of the dump, ``notes``, ``to_json()`` (``check --json``).

    Raises:
        InputError: unreadable input. UsageError: a bad rule, an incompatible baseline.
    """
    from rcdiag.checks.rules import RuleSet
    from rcdiag.checks.run import load_baseline, load_rules, run_check, settings_of

    check_arguments(locals())
    rules, configs = names("rules", rules) or [], path_list("configs", configs)
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
        spec_of(paths, locals()),
        ruleset,
        settings,
        baseline,
        origin,
        dialect_of(dialect),
        veto_threshold,
        [Path(os.fspath(c)) for c in configs],
        progress,
    )


@python_names
@documented
def baseline(
    paths: Paths,
    *,
    seed: int = DEFAULT_SEED,
    replicates: int = DEFAULT_REPLICATES,
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
    progress: Progress | None = None,
) -> Baseline:
    """A reference run's metrics and bootstrap replicates, for :func:`check` (``rcdiag baseline``;
    ``to_json()`` is the file it writes).

    Args:
        paths: the reference dump (as :func:`analyze`).
        seed: seed of the bootstrap weights (reproducible).
        replicates: bootstrap replicates K (≥ 10).
        dialect: ``latest`` (default) or ``legacy``.
        veto_threshold: τ of the catastrophic-token metrics (as :func:`analyze`).
        {dump_arguments}

    Raises:
        InputError: unreadable input. UsageError: a bad seed or number of replicates.
    """
    from rcdiag.checks.baseline import make_baseline
    from rcdiag.checks.bootstrap import BASELINE_STREAM, MAX_REPLICATES
    from rcdiag.pipeline import BootstrapRequest, Request, run
    from rcdiag.results import analysis_result

    check_arguments(locals())
    if seed < 0:
        raise UsageError(f"seed must be ≥ 0, got {seed}")
    if not 10 <= replicates <= MAX_REPLICATES:
        raise UsageError(f"replicates must lie in [10, {MAX_REPLICATES:,}], got {replicates}")
    options = AnalyzeOptions(
        dialect=dialect_of(dialect) or DEFAULT_DIALECT, veto_threshold=veto_threshold
    )
    request = Request(options, bootstrap=BootstrapRequest(replicates, seed, BASELINE_STREAM))
    done = run(spec_of(paths, locals()), request, progress)
    replicated = done.replicates()
    assert replicated is not None
    return make_baseline(
        analysis_result(done), replicated, seed=seed, created=datetime.now(timezone.utc)
    )
