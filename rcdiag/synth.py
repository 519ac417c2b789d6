"""Synthetic dumps: realistic rollout / training log-probs with a mismatch of known shape.

Pure generation (seeded numpy, no printing) plus one writer. Per token the model is

.. math::
    \\ell = \\log\\pi_{train} - \\log\\pi_{rollout}
          = s_t\\,(\\beta\\,b + \\sigma Z + \\tau T_\\nu) - \\tfrac12 (s_t \\sigma)^2,
    \\qquad s_t = (1 + \\mathrm{drift}\\cdot t)^2,\\; t = \\tfrac{step}{steps - 1}

where b ≤ 0 is the token's base log-prob (mostly near 0, a long tail toward −14), Z ~ N(0, 1),
T_ν ~ Student-t(ν) (absent when ``tail_df`` is None), β = ``bias``, σ = ``noise``, τ = ``tail_scale``.
The −(s_t σ)²/2 makes the Gaussian part's weight ρ = e^ℓ average exactly 1, as it does for any tokens
sampled from the rollout policy (E_q[π/q] = Σ π = 1), so kl = σ²/2 ≥ 0 as in real dumps; a bias
β ≠ 0 (an engine systematically over- or under-confident, like a temperature) breaks that on purpose;
on a fraction ``catastrophic_rate``·s_t of tokens ℓ is replaced by −U(8, 15), and ℓ is clipped to
[−30, 14]. Then
log π_rollout = min(b, −ℓ) and log π_train = log π_rollout + ℓ, so both are ≤ 0 and ℓ is exactly
the configured mismatch (only the rollout log-prob of a confident token is lowered when ℓ > 0).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from rcdiag.errors import UsageError
from rcdiag.io.writer import atomic_write, write_dump

LengthDist = Literal["lognormal", "uniform", "fixed"]
LENGTH_DISTS: tuple[str, ...] = ("lognormal", "uniform", "fixed")
DTYPES: tuple[str, ...] = ("float32", "float64")

LENGTH_SIGMA = 0.6
"""σ of log(response length) for the lognormal length distribution."""

CONFIDENT_SHARE = 0.8
"""Share of tokens the rollout model is confident about: −log p ~ Exponential(mean 0.02)."""
CONFIDENT_NLL = 0.02
UNCERTAIN_BETA = (0.6, 0.9)
"""The other tokens have p ~ Beta(0.6, 0.9): E[−log p] ≈ 1.6 with a long tail toward 0."""
MIN_LOG_PROB = -14.0
"""Floor of the base log-prob (≈ log 8e-7): samplers with top-p/top-k never pick rarer tokens."""

CATASTROPHIC_RANGE = (8.0, 15.0)
"""A catastrophic token has ℓ = −U(8, 15): π_train is e⁻⁸ … e⁻¹⁵ times π_rollout."""
LOG_RATIO_CLIP = (-30.0, -MIN_LOG_PROB)
"""ℓ is clipped to this range so heavy tails stay finite: log π_rollout ≥ −14, log π_train ≥ −44."""


@dataclass(frozen=True)
class SynthConfig:
    """Everything that shapes a synthetic dump (module docstring: the model of ℓ).

    Args:
        seed: seed of the numpy generator; step k uses the stream ``(seed, k)``, so a step's data
            does not depend on how many steps are generated or how they are written.
        steps: training steps (verl batches).
        rows_per_step: responses per step.
        group_size: responses per prompt; consecutive rows share a ``uid``.
        mean_length: mean response length in tokens (before clipping to ``max_length``).
        length_dist: ``lognormal`` (σ = 0.6 in log space), ``uniform`` on [1, 2·mean − 1] or
            ``fixed``.
        max_length: longest response; longer draws are clipped.
        noise: σ, std of the Gaussian token noise in ℓ (bf16-like: 0.005 … 0.01); its mean is
            −σ²/2 so that E[e^ℓ] = 1 (module docstring).
        bias: β, systematic shift ℓ = β·log p (temperature-like): β > 0 makes the rollout engine
            over-confident (π_train < π_rollout), β < 0 under-confident; β ≥ −1.
        tail_df: ν, degrees of freedom of an extra Student-t noise term (heavy tails); None: none.
        tail_scale: τ, scale of the Student-t term.
        catastrophic_rate: share of valid tokens whose ℓ is −U(8, 15) (π_train ≪ π_rollout).
        drift: growth of the mismatch over steps: σ, β, τ and the catastrophic rate are multiplied
            by (1 + drift·step / (steps − 1))², so the last step has (1 + drift)² times the first.
        hole_rate: share of positions inside a response (not its last) that are masked; they hold
            NaN in both log-prob columns, to exercise masking.
        empty_row_rate: share of rows with no valid token (every position masked, NaN values).
        dtype: ``float32`` or ``float64`` log-probs.
    """

    seed: int = 0
    steps: int = 4
    rows_per_step: int = 64
    group_size: int = 8
    mean_length: int = 256
    length_dist: LengthDist = "lognormal"
    max_length: int = 2048
    noise: float = 0.01
    bias: float = 0.0
    tail_df: float | None = None
    tail_scale: float = 0.01
    catastrophic_rate: float = 0.0
    drift: float = 0.0
    hole_rate: float = 0.0
    empty_row_rate: float = 0.0
    dtype: Literal["float32", "float64"] = "float32"

    def __post_init__(self) -> None:
        def bad(field: str, rule: str) -> UsageError:
            flag = "--" + field.replace("_", "-")
            return UsageError(f"{flag} must be {rule}, got {getattr(self, field)!r}")

        if not self.seed >= 0:
            raise bad("seed", "≥ 0")
        for field in ("steps", "rows_per_step", "group_size", "mean_length", "max_length"):
            if not getattr(self, field) >= 1:
                raise bad(field, "≥ 1")
        if self.max_length < self.mean_length:
            raise UsageError(
                f"--max-length ({self.max_length}) must be ≥ --mean-length ({self.mean_length})"
            )
        if self.length_dist not in LENGTH_DISTS:
            raise bad("length_dist", f"one of {', '.join(LENGTH_DISTS)}")
        for field in ("noise", "tail_scale", "drift"):
            value = getattr(self, field)
            if not (value >= 0 and np.isfinite(value)):
                raise bad(field, "a finite number ≥ 0")
        if not (self.bias >= -1 and np.isfinite(self.bias)):
            raise bad("bias", "a finite number ≥ −1")
        if self.tail_df is not None and not (self.tail_df > 0 and np.isfinite(self.tail_df)):
            raise bad("tail_df", "a finite number > 0 (or unset for no heavy tail)")
        for field in ("catastrophic_rate", "hole_rate"):
            if not 0 <= getattr(self, field) <= 1:
                raise bad(field, "in [0, 1]")
        if not 0 <= self.empty_row_rate < 1:
            raise bad("empty_row_rate", "in [0, 1) (a dump needs rows with valid tokens)")
        if self.dtype not in DTYPES:
            raise bad("dtype", f"one of {', '.join(DTYPES)}")

    def drift_factor(self, step: int) -> float:
        """(1 + drift·step / (steps − 1))²: how much larger the mismatch is at ``step``."""
        return (1.0 + self.drift * step / max(self.steps - 1, 1)) ** 2


SCENARIOS: dict[str, dict[str, Any]] = {
    "bf16": {"noise": 0.008},
    "fp8": {"noise": 0.33},
    "heavy_tails": {
        "noise": 0.01,
        "tail_df": 2.0,
        "tail_scale": 0.02,
        "catastrophic_rate": 1e-3,
    },
    "long_responses": {
        "mean_length": 4000,
        "max_length": 8192,
        "rows_per_step": 32,
        "noise": 0.03,
    },
    "drift": {
        "steps": 20,
        "noise": 0.008,
        "bias": 0.002,
        "catastrophic_rate": 1e-5,
        "drift": 4.0,
    },
}
"""Named presets: overrides of :class:`SynthConfig` defaults (see :data:`SCENARIO_DESCRIPTIONS`)."""

SCENARIO_DESCRIPTIONS: dict[str, str] = {
    "bf16": "healthy bf16 rollout: tiny noise (σ 0.008), no bias",
    "fp8": "fp8 rollout: noise σ 0.33, mean |Δ log p| ≈ 0.27 (the published fp8 level)",
    "heavy_tails": "Student-t (ν = 2) noise and 1e-3 catastrophic tokens: veto fraction > 0.1",
    "long_responses": "~4000-token responses, noise 0.03: token metrics fine, sequence IS explodes",
    "drift": "20 steps starting bf16-like, mismatch ×(1 + 4·t)² toward collapse",
}


def config_for(scenario: str | None = None, **overrides: Any) -> SynthConfig:
    """The config of a named scenario (or the defaults), with ``overrides`` on top.

    Raises:
        UsageError: an unknown scenario, or a value out of range.

    Example:
        >>> config = config_for("fp8", seed=3)
        >>> config.noise, config.seed
        (0.33, 3)
    """
    base: dict[str, Any] = {}
    if scenario is not None:
        if scenario not in SCENARIOS:
            raise UsageError(f"--scenario {scenario!r}: expected one of {', '.join(SCENARIOS)}")
        base = dict(SCENARIOS[scenario])
    return SynthConfig(**{**base, **overrides})


@dataclass(frozen=True)
class SynthStep:
    """One generated step: padded [B, T] arrays as a verl batch holds them."""

    step: int
    rollout_log_probs: np.ndarray
    """log π_rollout, [B, T]; NaN at holes and in empty rows, 0 in the padding."""
    old_log_probs: np.ndarray
    """log π_train, [B, T]; NaN at holes and in empty rows, 0 in the padding."""
    response_mask: np.ndarray
    """bool [B, T]: the valid tokens."""
    uid: np.ndarray
    """[B] prompt-group ids (str), ``group_size`` consecutive rows per prompt."""
    lengths: np.ndarray
    """[B] response lengths in positions (≥ 1; holes and the positions of empty rows included)."""


def _lengths(rng: np.random.Generator, config: SynthConfig, rows: int) -> np.ndarray:
    mean = config.mean_length
    if config.length_dist == "fixed":
        raw = np.full(rows, float(mean))
    elif config.length_dist == "uniform":
        raw = rng.integers(1, 2 * mean, size=rows, endpoint=False).astype(np.float64)
    else:
        mu = np.log(mean) - LENGTH_SIGMA**2 / 2
        raw = rng.lognormal(mu, LENGTH_SIGMA, size=rows)
    return np.clip(np.rint(raw), 1, config.max_length).astype(np.int64)


def _base_log_probs(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Realistic sampled-token log-probs: a confident bulk near 0 and a Beta tail toward −14."""
    confident = rng.random(shape) < CONFIDENT_SHARE
    near_zero = -rng.exponential(CONFIDENT_NLL, size=shape)
    with np.errstate(divide="ignore"):
        uncertain = np.log(rng.beta(*UNCERTAIN_BETA, size=shape))
    return np.clip(np.where(confident, near_zero, uncertain), MIN_LOG_PROB, 0.0)


def generate_step(config: SynthConfig, step: int) -> SynthStep:
    """Generate one step, from its own random stream ``(seed, step)``."""
    rng = np.random.default_rng((config.seed, step))
    rows = config.rows_per_step
    lengths = _lengths(rng, config, rows)
    width = int(lengths.max())
    shape = (rows, width)
    position = np.arange(width)[None, :]
    inside = position < lengths[:, None]

    scale = config.drift_factor(step)
    base = _base_log_probs(rng, shape)
    sigma = scale * config.noise
    ell = scale * config.bias * base + sigma * rng.standard_normal(shape) - 0.5 * sigma * sigma
    if config.tail_df is not None:
        ell += scale * config.tail_scale * rng.standard_t(config.tail_df, size=shape)
    catastrophic = rng.random(shape) < min(1.0, config.catastrophic_rate * scale)
    ell = np.where(catastrophic, -rng.uniform(*CATASTROPHIC_RANGE, size=shape), ell)
    ell = np.clip(ell, *LOG_RATIO_CLIP)
    rollout = np.minimum(base, -ell)
    old = np.minimum(rollout + ell, 0.0)

    empty = rng.random(rows) < config.empty_row_rate
    hole = (rng.random(shape) < config.hole_rate) & (position < lengths[:, None] - 1)
    garbage = inside & (hole | empty[:, None])
    mask = inside & ~garbage
    dtype = np.dtype(config.dtype)
    rollout = np.where(garbage, np.nan, np.where(inside, rollout, 0.0)).astype(dtype)
    old = np.where(garbage, np.nan, np.where(inside, old, 0.0)).astype(dtype)

    group = (np.arange(rows) // config.group_size).astype(str)
    uid = np.char.add(f"step{step}-prompt", group)
    return SynthStep(step, rollout, old, mask, uid, lengths)


def generate(config: SynthConfig) -> Iterator[SynthStep]:
    """Every step in order, one at a time, so memory stays bounded by one step.

    Example:
        >>> first = next(generate(SynthConfig(rows_per_step=8, mean_length=16, seed=1)))
        >>> first.rollout_log_probs.shape[0], bool((first.rollout_log_probs <= 0).all())
        (8, True)
    """
    for step in range(config.steps):
        yield generate_step(config, step)


@dataclass(frozen=True)
class SynthSummary:
    """What :func:`write_synthetic_dump` wrote."""

    path: Path
    rows: int
    valid_tokens: int
    steps: int
    shards: bool
    bytes: int


def _check_target(path: Path, overwrite: bool) -> None:
    if not (path.exists() or path.is_symlink()):
        return
    if not overwrite:
        raise UsageError(f"{path} already exists (use --force to replace it)")
    if path.is_dir():
        stray = next(
            (p for p in path.rglob("*") if not p.is_dir() and p.suffix != ".parquet"), None
        )
        if stray is not None:
            raise UsageError(
                f"refusing to replace directory {path}: it holds {stray}, which is not a parquet "
                "file; remove it yourself"
            )


def _write_shards(
    directory: Path, config: SynthConfig, progress: Callable[[int, int], None] | None = None
) -> tuple[int, int]:
    rows = valid = 0
    for batch in generate(config):
        write_dump(
            directory / f"step={batch.step}" / "part-0.parquet",
            batch.rollout_log_probs,
            batch.old_log_probs,
            batch.response_mask,
            step=batch.step,
            extra_columns={"uid": batch.uid},
        )
        rows += batch.response_mask.shape[0]
        valid += int(batch.response_mask.sum())
        if progress is not None:
            progress(batch.step + 1, config.steps)
    return rows, valid


def _merge(shard_dir: Path, target: Path) -> None:
    """Concatenate the step shards into one parquet file, a row group at a time."""
    import pyarrow.parquet as pq

    parts = sorted(
        shard_dir.glob("step=*/part-0.parquet"), key=lambda p: int(p.parent.name[len("step=") :])
    )
    with atomic_write(target, "wb") as handle:
        writer: pq.ParquetWriter | None = None
        try:
            for part in parts:
                source = pq.ParquetFile(part)
                if writer is None:
                    writer = pq.ParquetWriter(handle, source.schema_arrow)
                for group in range(source.num_row_groups):
                    writer.write_table(source.read_row_group(group))
        finally:
            if writer is not None:
                writer.close()


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def write_synthetic_dump(
    path: str | Path,
    config: SynthConfig,
    *,
    shards: bool = False,
    overwrite: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> SynthSummary:
    """Generate ``config`` and write it as an rcdiag dump (via :func:`rcdiag.io.write_dump`).

    Args:
        path: a parquet file, or with ``shards`` a directory of hive shards
            ``path/step=N/part-0.parquet``.
        config: what to generate.
        shards: one file per step under ``path`` instead of one file.
        overwrite: replace an existing ``path`` (a directory only if it holds nothing but parquet
            files).
        progress: called as ``progress(steps_written, steps)`` after each step.

    Returns:
        What was written. Columns: ``rollout_log_probs``, ``old_log_probs``, ``response_mask``,
        ``step``, ``uid``. The result appears at ``path`` only once complete.

    Raises:
        UsageError: ``path`` exists and ``overwrite`` is false, or cannot be replaced.
    """
    target = Path(path)
    _check_target(target, overwrite)
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        rows, valid = _write_shards(work, config, progress)
        if not shards:
            if target.is_dir():
                shutil.rmtree(target)
            _merge(work, target)
        else:
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()
            os.replace(work, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(work)
    return SynthSummary(target, rows, valid, config.steps, shards, _size(target))
