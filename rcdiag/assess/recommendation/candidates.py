"""The configurations the report evaluates besides the presets: threshold sweeps as candidates.

Every sweep point is a *complete* configuration the recommendation may pick, so the figures it
quotes (kept share, ESS, …) are measured, not estimated. Rejection sweeps therefore carry token-level
TIS at C = 2 (:data:`TOKEN_TIS`): their ESS is that of the weights that survive the rejection. The
sweeps per dialect (grids from :data:`rcdiag.correction.sweep.DEFAULT_GRIDS`):

* ``geo`` — latest: TIS + ``seq_mean_k1`` at x (keeps 1/x ≤ geometric-mean ratio ≤ x);
  legacy: TIS + ``rollout_rs: geometric`` at U = x (lower 1/x).
* ``max`` — latest: TIS + ``seq_max_k2`` at h; legacy: TIS + veto τ.
* ``geo+max`` — both criteria, the max one at its veto equivalent (42.4, or τ = 1e-4).
* ``is`` — token TIS at C, no rejection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rcdiag.correction.compare import NamedConfig
from rcdiag.correction.config import parse_config
from rcdiag.correction.presets import PRESETS
from rcdiag.correction.sweep import DEFAULT_GRIDS, IS_GRID
from rcdiag.dialects import Dialect
from rcdiag.metrics.offpolicy import DEFAULT_VETO_THRESHOLD

TOKEN_TIS: dict[str, Any] = {"rollout_is": "token", "rollout_is_threshold": 2.0}
"""verl's default token-level truncated IS (``decoupled_token_is()``)."""

"""τ of verl's legacy veto: a token with π_train/π_rollout < τ is catastrophic (docs/correction.md)."""
MAX_K2_THRESHOLD = 42.4
"""h of ``seq_max_k2`` equivalent to the veto: ½(ln 10⁻⁴)² ≈ 42.41, i.e. reject a sequence holding a
token with |ℓ| > 9.21 (two-sided, docs/correction.md)."""
VETO_GRID = ("1e-06", "1e-05", "0.0001", "0.001", "0.01")


@dataclass(frozen=True)
class CandidateSweep:
    """A grid of complete configurations that differ in one threshold.

    Attributes:
        key: ``geo``, ``max``, ``geo+max`` or ``is`` (module docstring).
        target: the swept verl option (``seq_mean_k1``, ``seq_max_k2``, ``geometric``, ``veto``,
            ``is_token``).
        title: what the sweep shows, for the report.
        thresholds: the grid, as written in the configurations.
        configs: one per threshold, named ``<key>@<threshold>``.
    """

    key: str
    target: str
    title: str
    thresholds: tuple[str, ...]
    configs: tuple[NamedConfig, ...]


def base_config(dialect: Dialect) -> dict[str, Any]:
    """Every verl key of the dialect at its preset-base value (no IS, no RS)."""
    return dict(PRESETS[dialect]["disabled"].config)


def _sweep(
    key: str,
    target: str,
    title: str,
    dialect: Dialect,
    grid: tuple[str, ...],
    build: Callable[[str], dict[str, Any]],
) -> CandidateSweep:
    base = base_config(dialect)
    configs = []
    for threshold in grid:
        config = {**base, **build(threshold)}
        configs.append(NamedConfig(f"{key}@{threshold}", config, parse_config(config, dialect)))
    return CandidateSweep(key, target, title, grid, tuple(configs))


def candidate_sweeps(dialect: Dialect) -> tuple[CandidateSweep, ...]:
    """The sweeps the report evaluates for ``dialect`` (module docstring)."""
    token_is = _sweep(
        "is",
        "is_token",
        "token TIS threshold C",
        dialect,
        IS_GRID,
        lambda t: {"rollout_is": "token", "rollout_is_threshold": float(t)},
    )
    if dialect == "latest":
        geo_grid = DEFAULT_GRIDS["seq_mean_k1"]
        return (
            _sweep(
                "geo",
                "seq_mean_k1",
                "token TIS + geometric-mean rejection (seq_mean_k1)",
                dialect,
                geo_grid,
                lambda t: {**TOKEN_TIS, "rollout_rs": "seq_mean_k1", "rollout_rs_threshold": t},
            ),
            _sweep(
                "max",
                "seq_max_k2",
                "token TIS + max-token rejection (seq_max_k2)",
                dialect,
                DEFAULT_GRIDS["seq_max_k2"],
                lambda t: {
                    **TOKEN_TIS,
                    "rollout_rs": "seq_max_k2",
                    "rollout_rs_threshold": float(t),
                },
            ),
            _sweep(
                "geo+max",
                "seq_mean_k1",
                f"token TIS + seq_mean_k1 + seq_max_k2 at {MAX_K2_THRESHOLD}",
                dialect,
                geo_grid,
                lambda t: {
                    **TOKEN_TIS,
                    "rollout_rs": "seq_mean_k1,seq_max_k2",
                    "rollout_rs_threshold": f"{t},{MAX_K2_THRESHOLD}",
                },
            ),
            token_is,
        )
    geo_grid = DEFAULT_GRIDS["rs_geometric"]
    return (
        _sweep(
            "geo",
            "geometric",
            "token TIS + geometric rejection",
            dialect,
            geo_grid,
            lambda t: {**TOKEN_TIS, "rollout_rs": "geometric", "rollout_rs_threshold": float(t)},
        ),
        _sweep(
            "max",
            "veto",
            "token TIS + veto of sequences with a catastrophic token",
            dialect,
            VETO_GRID,
            lambda t: {**TOKEN_TIS, "rollout_token_veto_threshold": float(t)},
        ),
        _sweep(
            "geo+max",
            "geometric",
            f"token TIS + geometric rejection + veto at {DEFAULT_VETO_THRESHOLD:g}",
            dialect,
            geo_grid,
            lambda t: {
                **TOKEN_TIS,
                "rollout_rs": "geometric",
                "rollout_rs_threshold": float(t),
                "rollout_token_veto_threshold": DEFAULT_VETO_THRESHOLD,
            },
        ),
        token_is,
    )


def preset_configs(dialect: Dialect) -> tuple[list[NamedConfig], dict[str, str]]:
    """Every preset of the dialect, aliases with an identical configuration left out.

    Returns:
        The configurations, and ``alias → preset it duplicates`` for the ones left out.
    """
    kept: list[NamedConfig] = []
    seen: dict[str, str] = {}
    aliases: dict[str, str] = {}
    for preset in PRESETS[dialect].values():
        fingerprint = repr(sorted(preset.config.items()))
        if fingerprint in seen:
            aliases[preset.name] = seen[fingerprint]
            continue
        seen[fingerprint] = preset.name
        kept.append(NamedConfig(preset.name, preset.config, parse_config(preset.config, dialect)))
    return kept, aliases


def max_threshold(dialect: Dialect) -> str:
    """The grid value of the ``max`` sweep equivalent to the veto at τ = 1e-4."""
    return str(MAX_K2_THRESHOLD) if dialect == "latest" else "0.0001"
