"""Threshold sweeps: one configuration per grid point, evaluated in the same pass as the presets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rcdiag.correction.compare import NamedConfig
from rcdiag.correction.config import RS_OPTIONS, ConfigError, parse_config
from rcdiag.dialects import Dialect

IS_GRID = ("1.1", "1.5", "2", "3", "5", "10", "100")
DEFAULT_GRIDS: dict[str, tuple[str, ...]] = {
    "token_k1": ("1.1", "1.2", "1.5", "2", "3", "5", "10"),
    "seq_sum_k1": ("1.1", "1.5", "2", "3", "5", "10", "100", "1000"),
    "seq_mean_k1": ("1.0005", "1.001", "1.002", "1.005", "1.01", "1.02", "1.05", "1.1"),
    "token_k2": ("0.001", "0.01", "0.05", "0.1", "0.5", "1", "2", "5"),
    "token_k3": ("0.001", "0.01", "0.05", "0.1", "0.5", "1", "2", "5"),
    "seq_sum_k2": ("0.01", "0.1", "1", "5", "10", "50", "100"),
    "seq_sum_k3": ("0.01", "0.1", "1", "5", "10", "50", "100"),
    "seq_mean_k2": ("0.0001", "0.0005", "0.001", "0.005", "0.01", "0.05", "0.1"),
    "seq_mean_k3": ("0.0001", "0.0005", "0.001", "0.005", "0.01", "0.05", "0.1"),
    "seq_max_k2": ("0.1", "0.5", "1", "2", "5", "10", "20", "42.4"),
    "seq_max_k3": ("0.1", "0.5", "1", "2", "5", "8.21", "20", "50"),
    "is_token": IS_GRID,
    "is_sequence": IS_GRID,
    "rs_token": ("1.1", "1.5", "2", "3", "5", "10"),
    "rs_sequence": ("1.1", "1.5", "2", "3", "5", "10", "100"),
    "rs_geometric": ("1.0005", "1.001", "1.002", "1.005", "1.01", "1.02", "1.05", "1.1"),
}
"""Default grids: symmetric bounds for ratio criteria (x means [1/x, x]), upper bounds for k2/k3."""

ALIASES = {"token": "is_token", "sequence": "is_sequence", "geometric": "rs_geometric"}


@dataclass(frozen=True)
class Sweep:
    """A target and the configuration of each grid point (named ``<target>@<threshold>``)."""

    target: str
    thresholds: tuple[str, ...]
    configs: tuple[NamedConfig, ...]


def sweep_targets(dialect: Dialect) -> list[str]:
    """What ``--sweep`` accepts in a dialect."""
    if dialect == "latest":
        return [*RS_OPTIONS, "is_token", "is_sequence"]
    return ["is_token", "is_sequence", "rs_token", "rs_sequence", "rs_geometric"]


def _config(target: str, threshold: str, dialect: Dialect) -> dict[str, Any]:
    if target.startswith("is_"):
        value: Any = threshold if dialect == "latest" else float(threshold)
        return {"rollout_is": target[3:], "rollout_is_threshold": value}
    if target.startswith("rs_"):
        return {"rollout_rs": target[3:], "rollout_rs_threshold": float(threshold)}
    return {"rollout_rs": target, "rollout_rs_threshold": threshold}


def build_sweep(target: str, dialect: Dialect, grid: Sequence[str] | None = None) -> Sweep:
    """The grid of configurations for ``target`` (a criterion, ``is_<level>`` or ``rs_<level>``).

    Raises:
        ConfigError: unknown target for the dialect, or a grid value verl would reject.
    """
    target = ALIASES.get(target, target)
    accepted = sweep_targets(dialect)
    if target not in accepted:
        raise ConfigError(
            f"--sweep {target!r} is not available in the {dialect} dialect; "
            f"expected one of {', '.join(accepted)}"
        )
    thresholds = tuple(grid) if grid else DEFAULT_GRIDS[target]
    configs = []
    for threshold in thresholds:
        try:
            config = _config(target, threshold, dialect)
            plan = parse_config(config, dialect)
        except ValueError:
            raise ConfigError(f"--grid value {threshold!r} is not a number") from None
        except ConfigError as exc:
            raise ConfigError(f"--grid value {threshold!r}: {exc}") from None
        configs.append(NamedConfig(f"{target}@{threshold}", config, plan))
    return Sweep(target, thresholds, tuple(configs))
