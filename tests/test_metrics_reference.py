"""rcdiag's streaming off-policy metrics against the independent padded reference (tests/reference.py).

Every dump here is generated as verl sees it — padded ``[B, T]`` arrays per step — then flattened into
rcdiag's :class:`RaggedBatch` rows and streamed through :class:`OffPolicyAnalysis` in various chunkings.
Per-step metrics must equal the reference on that step's padded batch and ``overall()`` the reference on
all rows stacked into one batch (docs/metrics.md), to 1e-6 relative / 1e-9 absolute.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from reference import (
    LEGACY_NAMES,
    QUANTILE_NAMES,
    QUANTILES,
    RCDIAG_NAMES,
    VERL_NAMES,
    exact_quantile,
    reference_metrics,
    reference_quantiles,
    stack_padded,
    valid_log_ratios,
)

from rcdiag.metrics.analysis import AnalyzeOptions, OffPolicyAnalysis
from rcdiag.metrics.ragged import RaggedBatch

RTOL = 1e-6
ATOL = 1e-9
SKETCH_ALPHA = 2.0**-8  # docs/metrics.md: 8 bits per bucket
SKETCH_MIN_ABS = float(np.finfo(np.float64).tiny)  # relative bound for normal floats
SKETCH_SLACK = 1.0001

GARBAGE = np.array([np.nan, np.inf, -np.inf, 3e38, -3e38, 1234.5])
"""Values planted under mask = 0 (holes and padding); they must never influence a metric."""


# --------------------------------------------------------------------------------------------------
# Padded dumps and their conversion to rcdiag's ragged rows
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PaddedStep:
    """One verl batch, padded: row i holds its response in columns [0, lengths[i])."""

    step: int
    rollout: np.ndarray  # [B, T], float32 or float64
    old: np.ndarray
    mask: np.ndarray  # [B, T], int64 0/1; always 0 at columns >= lengths[i]
    lengths: np.ndarray  # [B]

    @property
    def padded(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.rollout, self.old, self.mask


Row = tuple[int, np.ndarray, np.ndarray, np.ndarray]
"""(step, rollout, old, mask) of one response, already cut to the width rcdiag will see."""


def rows_of(steps: list[PaddedStep], width: str = "lengths") -> list[Row]:
    """Flatten padded steps into rows.

    ``width``: ``"lengths"`` keeps each row's first L_i columns (what a dump holds); ``"full"``
    keeps the whole padded width T; ``"wider"`` adds 13 more garbage columns under mask 0.
    """
    out: list[Row] = []
    for s in steps:
        rollout = s.rollout.astype(np.float64)  # float32 dumps are upcast on read
        old = s.old.astype(np.float64)
        for i in range(rollout.shape[0]):
            if width == "lengths":
                cut = int(s.lengths[i])
                out.append((s.step, rollout[i, :cut], old[i, :cut], s.mask[i, :cut] != 0))
            elif width == "full":
                out.append((s.step, rollout[i], old[i], s.mask[i] != 0))
            else:
                extra = 13
                junk_r = GARBAGE[np.arange(extra) % GARBAGE.size]
                junk_o = GARBAGE[(np.arange(extra) + 2) % GARBAGE.size]
                out.append(
                    (
                        s.step,
                        np.concatenate([rollout[i], junk_r]),
                        np.concatenate([old[i], junk_o]),
                        np.concatenate([s.mask[i] != 0, np.zeros(extra, dtype=bool)]),
                    )
                )
    return out


def ragged(rows: list[Row]) -> RaggedBatch:
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([r[1].size for r in rows], out=offsets[1:])

    def cat(j: int, dtype: type) -> np.ndarray:
        if not rows:
            return np.zeros(0, dtype=dtype)
        return np.concatenate([r[j] for r in rows]).astype(dtype)

    return RaggedBatch(
        rollout=cat(1, np.float64),
        old=cat(2, np.float64),
        mask=cat(3, bool),
        offsets=offsets,
        steps=np.array([r[0] for r in rows], dtype=np.int64),
    )


def chunked(rows: list[Row], chunking: str, seed: int = 7) -> list[RaggedBatch]:
    """Split rows into the RaggedBatches fed to ``update``.

    ``whole``: one batch; ``chunks``: rows in order, 5 at a time (chunks straddle steps);
    ``shuffled``: rows of all steps shuffled together, random chunk sizes, plus an empty chunk.
    """
    if chunking == "whole":
        return [ragged(rows)]
    if chunking == "chunks":
        return [ragged(rows[k : k + 5]) for k in range(0, len(rows), 5)]
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(rows))
    shuffled = [rows[k] for k in order]
    out = [ragged([])]
    k = 0
    while k < len(shuffled):
        size = int(rng.integers(1, 10))
        out.append(ragged(shuffled[k : k + size]))
        k += size
    return out


def analyse(
    steps: list[PaddedStep],
    options: AnalyzeOptions,
    chunking: str = "whole",
    width: str = "lengths",
) -> OffPolicyAnalysis:
    analysis = OffPolicyAnalysis(options)
    for batch in chunked(rows_of(steps, width), chunking):
        analysis.update(batch)
    return analysis


def overall_padded(steps: list[PaddedStep]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return stack_padded([s.padded for s in steps])


# --------------------------------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------------------------------

SCENARIOS = (
    "bf16",
    "fp8_bias",
    "heavy_tails",
    "catastrophic",
    "beyond_clamp",
    "empty_rows",
    "single_token_rows",
    "holes_garbage",
    "float32",
    "mixed",
)

STEP_SHAPES = ((0, 16, 40), (1, 33, 25), (4, 9, 48))
"""(step id, rows B, padded width T) of each step of a scenario dump."""


def _pick_valid(rng: np.random.Generator, mask: np.ndarray, k: int) -> tuple[np.ndarray, ...]:
    rows, cols = np.nonzero(mask)
    chosen = rng.choice(rows.size, size=min(k, rows.size), replace=False)
    return rows[chosen], cols[chosen]


def make_step(rng: np.random.Generator, scenario: str, step: int, batch: int, width: int):
    def has(*names: str) -> bool:
        return scenario in names or scenario == "mixed"

    lengths = rng.integers(1, width + 1, size=batch)
    if scenario == "single_token_rows":
        lengths[:] = 1
        lengths[-1] = 0  # and one zero-length row
    if has("empty_rows"):
        lengths[2] = 0  # a zero-length row
    if has("beyond_clamp"):
        lengths[0] = lengths[1] = width  # long rows whose S_i leaves [−20, 20]

    cols = np.arange(width)
    mask = (cols[None, :] < lengths[:, None]).astype(np.int64)
    if has("empty_rows"):
        mask[3, :] = 0  # a row with positions but no valid token
        mask[5, :] = 0
    if has("holes_garbage"):
        holes = (rng.random((batch, width)) < 0.2) & (mask == 1)
        mask[holes] = 0

    rollout = -np.abs(rng.normal(0.0, 2.0, size=(batch, width))) - 1e-3
    if scenario == "fp8_bias":
        ell = rng.normal(-0.03, 0.15, size=(batch, width))
    elif has("heavy_tails", "beyond_clamp"):
        ell = 0.1 * rng.standard_t(2.0, size=(batch, width))
    else:  # bf16-like noise
        ell = rng.normal(0.0, 0.01, size=(batch, width))
    if has("catastrophic"):
        r, c = _pick_valid(rng, mask, 6)
        ell[r, c] = -12.0 + rng.normal(0.0, 0.5, size=r.size)  # ρ ≈ 6e-6 < 1e-4
        r, c = _pick_valid(rng, mask, 3)
        ell[r, c] = -8.0  # ρ ≈ 3.4e-4: catastrophic at τ = 1e-3 but not at 1e-4
    if has("beyond_clamp"):
        ell[0, :] = 1.0  # S_0 = T > 20
        ell[1, :] = -1.0  # S_1 = −T < −20
        r, c = _pick_valid(rng, mask, 8)
        ell[r, c] = rng.choice([-1.0, 1.0], size=r.size) * rng.uniform(20.5, 35.0, size=r.size)

    dtype = np.float32 if has("float32") else np.float64
    rollout_d = rollout.astype(dtype)
    old_d = (rollout + ell).astype(dtype)
    invalid = mask == 0
    rollout_d[invalid] = rng.choice(GARBAGE, size=int(invalid.sum())).astype(dtype)
    old_d[invalid] = rng.choice(GARBAGE, size=int(invalid.sum())).astype(dtype)
    assert mask.any(), "every generated step must hold a valid token"
    return PaddedStep(step=step, rollout=rollout_d, old=old_d, mask=mask, lengths=lengths)


@functools.cache
def scenario_dump(scenario: str) -> tuple[PaddedStep, ...]:
    rng = np.random.default_rng(1000 + SCENARIOS.index(scenario))
    with np.errstate(over="ignore", invalid="ignore"):
        return tuple(make_step(rng, scenario, *shape) for shape in STEP_SHAPES)


OPTIONS = {
    "latest": AnalyzeOptions(),
    "latest_tau1e-3": AnalyzeOptions(dialect="latest", veto_threshold=1e-3),
    "legacy_no_veto": AnalyzeOptions(dialect="legacy", veto_threshold=None),
    "legacy_tau1e-4": AnalyzeOptions(dialect="legacy", veto_threshold=1e-4),
    "legacy_tau1e-3": AnalyzeOptions(dialect="legacy", veto_threshold=1e-3),
}


@functools.cache
def expected_for(scenario: str, option: str) -> tuple[dict[int, dict], dict]:
    """Reference metrics per step and overall, for one scenario and one AnalyzeOptions."""
    steps = list(scenario_dump(scenario))
    opts = OPTIONS[option]
    kwargs = {"dialect": opts.dialect, "veto_threshold": opts.veto_threshold}
    per_step = {s.step: reference_metrics(*s.padded, **kwargs) for s in steps}
    return per_step, reference_metrics(*overall_padded(steps), **kwargs)


# --------------------------------------------------------------------------------------------------
# Comparison helpers
# --------------------------------------------------------------------------------------------------


STDERR_ATOL = 1e-7
"""The stated absolute tolerance of ``rcdiag/k3_kl_stderr``, relative to k3_kl (docs/metrics.md)."""


def assert_metrics_close(
    got: Mapping[str, float | None],
    expected: Mapping[str, float | None],
    where: str,
    rtol: float = RTOL,
    atol: float = ATOL,
) -> None:
    problems = []
    for name, want in expected.items():
        if name not in got:
            problems.append(f"{name}: missing")
            continue
        have = got[name]
        if want is None or have is None:
            if not (want is None and have is None):
                problems.append(f"{name}: expected {want!r}, got {have!r}")
            continue
        tolerance = atol
        if name == "rcdiag/k3_kl_stderr":  # summed second moments cancel when residuals vanish:
            tolerance = max(atol, STDERR_ATOL * abs(expected.get("rollout_corr/k3_kl") or 0.0))
        if not np.isclose(have, want, rtol=rtol, atol=tolerance):
            problems.append(f"{name}: expected {want!r}, got {have!r}")
    assert not problems, f"{where}:\n  " + "\n  ".join(problems)


def sketch_error_ok(got: float, exact: float) -> bool:
    """The sketch's promise: relative error α, or absolute min_abs near zero."""
    if abs(exact) < SKETCH_MIN_ABS:
        return abs(got - exact) <= SKETCH_MIN_ABS
    return abs(got - exact) <= SKETCH_ALPHA * abs(exact) * SKETCH_SLACK


def assert_quantiles_ok(got: Mapping[str, float | None], values: list[float], where: str) -> None:
    problems = []
    for name, q in QUANTILES.items():
        key = f"rcdiag/log_ratio_{name}"
        exact = exact_quantile(values, q)
        have = got.get(key)
        if have is None or not sketch_error_ok(have, exact):
            problems.append(f"{key}: exact order statistic {exact!r}, sketch gave {have!r}")
    assert not problems, f"{where}:\n  " + "\n  ".join(problems)


# --------------------------------------------------------------------------------------------------
# The reference itself is padding-blind and garbage-blind
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["holes_garbage", "mixed"])
def test_reference_ignores_padding_and_masked_garbage(scenario: str) -> None:
    step = scenario_dump(scenario)[0]
    rollout, old, mask = step.padded
    base = reference_metrics(rollout, old, mask, dialect="legacy", veto_threshold=1e-3)
    # wider padding, NaN under mask 0
    extra = 11
    pad = np.full((rollout.shape[0], extra), np.nan)
    wider = reference_metrics(
        np.hstack([rollout, pad]),
        np.hstack([old, -pad]),
        np.hstack([mask, np.zeros((rollout.shape[0], extra), np.int64)]),
        dialect="legacy",
        veto_threshold=1e-3,
    )
    # different garbage under the mask
    clean_r = np.where(mask != 0, rollout, 0.0)
    clean_o = np.where(mask != 0, old, 0.0)
    cleaned = reference_metrics(clean_r, clean_o, mask, dialect="legacy", veto_threshold=1e-3)
    assert wider == base
    assert cleaned == base
    assert all(v is not None and math.isfinite(v) for v in base.values())


# --------------------------------------------------------------------------------------------------
# rcdiag vs reference on the scenarios
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("chunking", ["whole", "chunks", "shuffled"])
@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_matches_reference(scenario: str, option: str, chunking: str) -> None:
    steps = list(scenario_dump(scenario))
    analysis = analyse(steps, OPTIONS[option], chunking)
    per_step, overall = expected_for(scenario, option)

    assert analysis.steps() == sorted(s.step for s in steps)
    for s in steps:
        result = analysis.step_result(s.step)
        assert result.step == s.step
        assert result.rows == s.rollout.shape[0]
        assert result.valid_tokens == int(s.mask.sum())
        assert_metrics_close(result.metrics, per_step[s.step], f"step {s.step}")
    assert_metrics_close(analysis.overall(), overall, "overall")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_metric_names_per_dialect(scenario: str) -> None:
    steps = list(scenario_dump(scenario))
    latest = analyse(steps, AnalyzeOptions(dialect="latest")).overall()
    legacy = analyse(steps, AnalyzeOptions(dialect="legacy")).overall()
    every = set(VERL_NAMES) | set(RCDIAG_NAMES) | set(QUANTILE_NAMES)
    assert every <= set(latest)
    assert not set(LEGACY_NAMES) & set(latest)
    assert every | set(LEGACY_NAMES) <= set(legacy)


@pytest.mark.parametrize("scenario", ["catastrophic", "mixed", "bf16"])
def test_legacy_without_veto_threshold_logs_exact_zero(scenario: str) -> None:
    steps = list(scenario_dump(scenario))
    analysis = analyse(steps, AnalyzeOptions(dialect="legacy", veto_threshold=None), "chunks")
    for metrics in [analysis.step_result(s.step).metrics for s in steps] + [analysis.overall()]:
        for name in LEGACY_NAMES:
            assert metrics[name] == 0.0
            assert isinstance(metrics[name], float)
    if scenario != "bf16":  # rcdiag's own veto metric still reports, at τ = 1e-4
        assert analysis.overall()["rcdiag/veto_fraction"] > 0.0
        assert analysis.overall()["rcdiag/catastrophic_token_fraction"] > 0.0


def test_veto_threshold_changes_the_counts() -> None:
    """The catastrophic scenario plants ℓ = −8 tokens: caught at τ = 1e-3 but not at τ = 1e-4."""
    steps = list(scenario_dump("catastrophic"))
    low = analyse(steps, OPTIONS["legacy_tau1e-4"]).overall()
    high = analyse(steps, OPTIONS["legacy_tau1e-3"]).overall()
    name = "rollout_corr/rollout_is_catastrophic_token_fraction"
    assert 0.0 < low[name] < high[name]
    assert low["rcdiag/catastrophic_token_fraction"] < high["rcdiag/catastrophic_token_fraction"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_padding_width_changes_nothing(scenario: str) -> None:
    steps = list(scenario_dump(scenario))
    results = {
        width: analyse(steps, OPTIONS["legacy_tau1e-3"], "chunks", width)
        for width in ("lengths", "full", "wider")
    }
    base = results["lengths"]
    for width in ("full", "wider"):
        other = results[width]
        for s in steps:
            got = other.step_result(s.step)
            want = base.step_result(s.step)
            assert (got.rows, got.valid_tokens) == (want.rows, want.valid_tokens)
            assert_metrics_close(got.metrics, want.metrics, f"{width} step {s.step}", 1e-12, 1e-13)
        assert_metrics_close(other.overall(), base.overall(), f"{width} overall", 1e-12, 1e-13)
        for name in QUANTILE_NAMES:  # same multiset of valid ℓ → the same sketch answer
            assert other.overall()[name] == base.overall()[name]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_quantiles_within_sketch_accuracy(scenario: str) -> None:
    steps = list(scenario_dump(scenario))
    analysis = analyse(steps, AnalyzeOptions(), "shuffled")
    for s in steps:
        values = valid_log_ratios(*s.padded)
        assert_quantiles_ok(analysis.step_result(s.step).metrics, values, f"step {s.step}")
    assert_quantiles_ok(analysis.overall(), valid_log_ratios(*overall_padded(steps)), "overall")


def test_reference_quantiles_helper_matches_order_statistics() -> None:
    step = scenario_dump("heavy_tails")[1]
    values = sorted(valid_log_ratios(*step.padded))
    got = reference_quantiles(*step.padded)
    n = len(values)
    assert got["rcdiag/log_ratio_p50"] == values[math.floor(0.5 * (n - 1))]
    assert got["rcdiag/log_ratio_p0.1"] == values[0]  # n < 1001
    assert got["rcdiag/log_ratio_p99.9"] == values[math.floor(0.999 * (n - 1))]


# --------------------------------------------------------------------------------------------------
# A step with no valid token
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", ["latest", "legacy"])
def test_step_without_valid_token_is_all_none(dialect: str) -> None:
    rng = np.random.default_rng(11)
    good0 = make_step(rng, "bf16", 0, 6, 10)
    good2 = make_step(rng, "catastrophic", 2, 12, 20)
    # step 1: one zero-length row and two rows of masked garbage only
    empty = PaddedStep(
        step=1,
        rollout=np.full((3, 4), np.nan),
        old=np.full((3, 4), np.inf),
        mask=np.zeros((3, 4), np.int64),
        lengths=np.array([0, 4, 2]),
    )
    steps = [good0, empty, good2]
    options = AnalyzeOptions(dialect=dialect, veto_threshold=1e-4 if dialect == "legacy" else None)
    analysis = analyse(steps, options, "shuffled")

    result = analysis.step_result(1)
    assert (result.rows, result.valid_tokens) == (3, 0)
    assert result.metrics, "metric names must still be listed"
    assert all(v is None for v in result.metrics.values()), result.metrics
    expected_names = set(VERL_NAMES) | set(RCDIAG_NAMES) | set(QUANTILE_NAMES)
    if dialect == "legacy":
        expected_names |= set(LEGACY_NAMES)
    assert expected_names <= set(result.metrics)

    kwargs = {"dialect": dialect, "veto_threshold": options.veto_threshold}
    assert reference_metrics(*empty.padded, **kwargs) == dict.fromkeys(
        reference_metrics(*good0.padded, **kwargs)
    )
    for s in (good0, good2):
        got = analysis.step_result(s.step).metrics
        assert_metrics_close(got, reference_metrics(*s.padded, **kwargs), f"step {s.step}")
        assert_quantiles_ok(got, valid_log_ratios(*s.padded), f"step {s.step}")
    # overall = the whole dump as one batch: the empty step's three rows count as empty rows
    everything = overall_padded(steps)
    assert_metrics_close(analysis.overall(), reference_metrics(*everything, **kwargs), "overall")
    assert_quantiles_ok(analysis.overall(), valid_log_ratios(*everything), "overall")
    assert analysis.overall()["rcdiag/response_length_mean"] == pytest.approx(
        (good0.mask.sum() + good2.mask.sum()) / (6 + 3 + 12)
    )


def test_dump_with_no_valid_token_at_all() -> None:
    empty = PaddedStep(
        step=3,
        rollout=np.zeros((2, 2)),
        old=np.zeros((2, 2)),
        mask=np.zeros((2, 2), np.int64),
        lengths=np.array([2, 1]),
    )
    analysis = analyse([empty], AnalyzeOptions())
    assert all(v is None for v in analysis.step_result(3).metrics.values())
    assert all(v is None for v in analysis.overall().values())


# --------------------------------------------------------------------------------------------------
# Hand-computed tiny cases
# --------------------------------------------------------------------------------------------------

LN = math.log
NAN = float("nan")


def _hand_batch() -> PaddedStep:
    """2 rows, 3 columns.

    row 0: π_rollout = (0.5, 0.5, 0.2), π_train = (0.2, 0.5, 0.6)  → ρ = (0.4, 1, 3), all valid
    row 1: π_rollout = (0.8, ·, ·),     π_train = (0.6, ·, ·)      → ρ = 0.75; column 1 is a masked
           hole holding NaN, column 2 is padding (length 2).
    """
    rollout = np.array([[LN(0.5), LN(0.5), LN(0.2)], [LN(0.8), NAN, NAN]])
    old = np.array([[LN(0.2), LN(0.5), LN(0.6)], [LN(0.6), NAN, np.inf]])
    mask = np.array([[1, 1, 1], [1, 0, 0]])
    return PaddedStep(step=0, rollout=rollout, old=old, mask=mask, lengths=np.array([3, 2]))


def _hand_expected() -> dict[str, float]:
    eps = 0.0  # verl adds 1e-8 to Σm, which vanishes in float32 for its integer mask
    rho = [0.4, 1.0, 3.0, 0.75]  # valid tokens' ρ = π_train / π_rollout
    ell = [LN(r) for r in rho]  # ℓ = log ρ
    v = 4  # valid tokens
    # per-row masked means of the log-probs (denominator n_i)
    a0 = (LN(0.2) + LN(0.5) + LN(0.6)) / (3 + eps)  # training
    b0 = (LN(0.5) + LN(0.5) + LN(0.2)) / (3 + eps)  # rollout
    a1 = LN(0.6) / (1 + eps)
    b1 = LN(0.8) / (1 + eps)
    d0, d1 = b0 - a0, b1 - a1  # d_i = b_i − a_i = mean ℓ of the row (up to the eps)
    s0, s1 = LN(0.4) + LN(1.0) + LN(3.0), LN(0.75)  # S_i = Σ ℓ = log ∏ρ: log 1.2, log 0.75
    w = rho  # no clamping needed: |ℓ| < 20
    return {
        "rollout_corr/training_ppl": (math.exp(-a0) + math.exp(-a1)) / 2,
        "rollout_corr/training_log_ppl": (-a0 - a1) / 2,
        "rollout_corr/kl": -sum(ell) / (v + eps),  # = −log(0.4·3·0.75)/4 = −log 0.9 / 4
        # k3 per token = ρ − log ρ − 1
        "rollout_corr/k3_kl": sum(r - LN(r) - 1 for r in rho) / (v + eps),
        "rollout_corr/rollout_ppl": (math.exp(-b0) + math.exp(-b1)) / 2,
        "rollout_corr/rollout_log_ppl": (-b0 - b1) / 2,
        "rollout_corr/log_ppl_diff": (d0 + d1) / 2,
        "rollout_corr/log_ppl_abs_diff": (abs(d0) + abs(d1)) / 2,
        "rollout_corr/log_ppl_diff_max": max(d0, d1),  # d0 = log(1.2)/3 > 0 > d1 = log 0.75
        "rollout_corr/log_ppl_diff_min": min(d0, d1),
        "rollout_corr/ppl_ratio": (math.exp(d0) + math.exp(d1)) / 2,
        # chi2 token, verl's masked_mean(ρ²) − 1: Σρ² = 0.16 + 1 + 9 + 0.5625 = 10.7225
        "rollout_corr/chi2_token": 10.7225 / (v + eps) - 1.0,
        # chi2 seq: (∏ρ)² − 1 per row → (1.44 − 1) + (0.5625 − 1) = 0.0025, over 2 rows
        "rollout_corr/chi2_seq": (math.exp(2 * s0) - 1 + math.exp(2 * s1) - 1) / 2,
        "rcdiag/veto_fraction": 0.0,  # no ρ < 1e-4
        "rcdiag/catastrophic_token_fraction": 0.0,
        # Kish ESS: (Σw)² / (V Σw²) = 5.15² / (4 · 10.7225)
        "rcdiag/ess_token": sum(w) ** 2 / (v * sum(x * x for x in w)),
        # sequence weights ∏ρ = exp(S_i) = 1.2, 0.75: (1.95)² / (2 · (1.44 + 0.5625))
        "rcdiag/ess_seq": (math.exp(s0) + math.exp(s1)) ** 2
        / (2 * (math.exp(2 * s0) + math.exp(2 * s1))),
        "rcdiag/abs_log_ratio_mean": (abs(ell[0]) + 0 + abs(ell[2]) + abs(ell[3])) / 4,
        "rcdiag/abs_log_ratio_max": LN(3.0),
        "rcdiag/ratio_outside_0.9_1.1": 3 / 4,  # 0.4, 3, 0.75 outside; 1 inside
        "rcdiag/ratio_outside_0.5_2": 2 / 4,  # 0.4 and 3
        "rcdiag/response_length_mean": 4 / 2,
        "rcdiag/response_length_max": 3.0,
    }


def test_hand_computed_two_rows() -> None:
    step = _hand_batch()
    want = _hand_expected()
    # sanity of the hand numbers themselves
    assert want["rollout_corr/kl"] == pytest.approx(-LN(0.9) / 4, rel=1e-7)
    assert want["rcdiag/ess_token"] == pytest.approx(5.15**2 / (4 * 10.7225))
    assert want["rollout_corr/chi2_seq"] == pytest.approx(0.00125)
    assert want["rcdiag/ess_seq"] == pytest.approx(1.95**2 / (2 * 2.0025))

    assert_metrics_close(reference_metrics(*step.padded), want, "reference")
    for chunking in ("whole", "chunks"):
        analysis = analyse([step], AnalyzeOptions(), chunking)
        got = analysis.step_result(0).metrics
        assert_metrics_close(got, want, f"rcdiag step ({chunking})", rtol=1e-12, atol=1e-14)
        assert_metrics_close(analysis.overall(), want, "rcdiag overall", rtol=1e-12, atol=1e-14)
        # sorted ℓ = (log 0.4, log 0.75, 0, log 3), n = 4
        # p0.1, p1 → index 0 (log 0.4); p50 → floor(1.5) = 1 (log 0.75); p99, p99.9 → index 2 (0)
        assert sketch_error_ok(got["rcdiag/log_ratio_p0.1"], LN(0.4))
        assert sketch_error_ok(got["rcdiag/log_ratio_p1"], LN(0.4))
        assert sketch_error_ok(got["rcdiag/log_ratio_p50"], LN(0.75))
        assert got["rcdiag/log_ratio_p99"] == 0.0
        assert got["rcdiag/log_ratio_p99.9"] == 0.0


def test_hand_computed_legacy_veto() -> None:
    """τ = 0.5: the ρ = 0.4 token is catastrophic; its row 0 is vetoed."""
    step = _hand_batch()
    want = {
        "rollout_corr/rollout_is_veto_fraction": 1 / 2,  # 1 vetoed row of B = 2
        "rollout_corr/rollout_is_catastrophic_token_fraction": 1 / 4,  # Σm + 1e-8 = 4 in float32
        "rcdiag/veto_fraction": 1 / 2,
        "rcdiag/catastrophic_token_fraction": 1 / 4,  # rcdiag: exactly / V
    }
    opts = AnalyzeOptions(dialect="legacy", veto_threshold=0.5)
    got = analyse([step], opts).step_result(0).metrics
    assert_metrics_close(got, want, "rcdiag", rtol=1e-14, atol=0.0)
    ref = reference_metrics(*step.padded, dialect="legacy", veto_threshold=0.5)
    assert_metrics_close(ref, want, "reference", rtol=1e-14, atol=0.0)


def test_hand_computed_clamp_and_empty_row() -> None:
    """row 0: one token, log π_rollout = −30, log π_train = −5 → ℓ = 25 (beyond the ±20 clamp);
    row 1: no valid token (garbage under the mask)."""
    eps = 0.0  # verl adds 1e-8 to Σm, which vanishes in float32 for its integer mask
    step = PaddedStep(
        step=0,
        rollout=np.array([[-30.0, NAN], [np.inf, NAN]]),
        old=np.array([[-5.0, -np.inf], [NAN, 7.0]]),
        mask=np.array([[1, 0], [0, 0]]),
        lengths=np.array([1, 2]),
    )
    a0, b0 = -5.0 / (1 + eps), -30.0 / (1 + eps)
    d0 = b0 - a0  # ≈ −25
    want = {
        "rollout_corr/training_ppl": (math.exp(-a0) + 1.0) / 2,  # empty row: exp(0) = 1
        "rollout_corr/training_log_ppl": -a0 / 2,
        "rollout_corr/kl": -25.0 / (1 + eps),
        "rollout_corr/k3_kl": (math.exp(25.0) - 25.0 - 1.0) / (1 + eps),  # NOT clamped
        "rollout_corr/rollout_ppl": (math.exp(-b0) + 1.0) / 2,
        "rollout_corr/rollout_log_ppl": -b0 / 2,
        "rollout_corr/log_ppl_diff": d0 / 2,
        "rollout_corr/log_ppl_abs_diff": abs(d0) / 2,
        "rollout_corr/log_ppl_diff_max": 0.0,  # the empty row's d = 0 is the max
        "rollout_corr/log_ppl_diff_min": d0,
        "rollout_corr/ppl_ratio": (math.exp(d0) + 1.0) / 2,
        "rollout_corr/chi2_token": math.exp(40.0) / (1 + eps) - 1.0,  # clamp(25) = 20
        "rollout_corr/chi2_seq": (math.exp(40.0) - 1.0 + 0.0) / 2,  # empty row contributes 0
        "rcdiag/veto_fraction": 0.0,
        "rcdiag/catastrophic_token_fraction": 0.0,
        "rcdiag/ess_token": 1.0,  # one weight
        "rcdiag/ess_seq": 1.0,  # one row with a valid token
        "rcdiag/abs_log_ratio_mean": 25.0,
        "rcdiag/abs_log_ratio_max": 25.0,
        "rcdiag/ratio_outside_0.9_1.1": 1.0,
        "rcdiag/ratio_outside_0.5_2": 1.0,
        "rcdiag/response_length_mean": 0.5,
        "rcdiag/response_length_max": 1.0,
    }
    assert_metrics_close(reference_metrics(*step.padded), want, "reference")
    analysis = analyse([step], AnalyzeOptions(), "chunks")
    assert_metrics_close(analysis.step_result(0).metrics, want, "rcdiag", rtol=1e-12, atol=1e-14)
    for name in QUANTILE_NAMES:  # a single value: every quantile is 25
        assert sketch_error_ok(analysis.overall()[name], 25.0)


def test_hand_computed_negative_clamp_catastrophic() -> None:
    """One row, ℓ = (−30, 0): clamp to −20 in chi2; catastrophic at the default τ = 1e-4."""
    eps = 0.0  # verl adds 1e-8 to Σm, which vanishes in float32 for its integer mask
    step = PaddedStep(
        step=9,
        rollout=np.array([[-1.0, -2.0]]),
        old=np.array([[-31.0, -2.0]]),
        mask=np.array([[1, 1]]),
        lengths=np.array([2]),
    )
    want = {
        "rollout_corr/kl": 30.0 / (2 + eps),
        "rollout_corr/k3_kl": (math.exp(-30.0) + 30.0 - 1.0) / (2 + eps),
        "rollout_corr/chi2_token": (math.exp(-40.0) + 1.0) / (2 + eps) - 1.0,
        "rollout_corr/chi2_seq": math.exp(-40.0) - 1.0,  # S = −30 → clamp −20
        "rollout_corr/rollout_is_veto_fraction": 0.0,  # legacy without τ
        "rollout_corr/rollout_is_catastrophic_token_fraction": 0.0,
        "rcdiag/veto_fraction": 1.0,  # τ defaults to 1e-4
        "rcdiag/catastrophic_token_fraction": 0.5,
        # w = (e^−20, 1): (1 + e^−20)² / (2 (1 + e^−40))
        "rcdiag/ess_token": (1 + math.exp(-20.0)) ** 2 / (2 * (1 + math.exp(-40.0))),
        "rcdiag/ess_seq": 1.0,
    }
    got = analyse([step], AnalyzeOptions(dialect="legacy")).step_result(9).metrics
    assert_metrics_close(got, want, "rcdiag", rtol=1e-12, atol=1e-14)
    ref = reference_metrics(*step.padded, dialect="legacy")
    assert_metrics_close(ref, want, "reference", rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(
    "ells",
    [[-13.0], [-19.0], [-25.0], [-19.0, -21.0, -30.0], [-12.0, -12.0, -14.0, -13.0]],
    ids=["one_-13", "one_-19", "one_-25", "three_below_-19", "four_near_-13"],
)
def test_ess_token_when_every_weight_is_tiny(ells: list[float]) -> None:
    """Every valid token has ρ ≪ 1: ESS = (Σw)² / (V Σw²) with w = exp(clamp ℓ) is still well defined
    (a single token gives exactly 1)."""
    step = PaddedStep(
        step=0,
        rollout=np.zeros((1, len(ells))),
        old=np.array([ells]),
        mask=np.ones((1, len(ells)), np.int64),
        lengths=np.array([len(ells)]),
    )
    w = [math.exp(max(x, -20.0)) for x in ells]
    want = sum(w) ** 2 / (len(w) * sum(x * x for x in w))
    assert reference_metrics(*step.padded)["rcdiag/ess_token"] == pytest.approx(want, rel=1e-12)
    got = analyse([step], AnalyzeOptions()).step_result(0).metrics["rcdiag/ess_token"]
    assert got == pytest.approx(want, rel=RTOL, abs=ATOL)


# --------------------------------------------------------------------------------------------------
# Property tests
# --------------------------------------------------------------------------------------------------

log_probs = st.floats(min_value=-40.0, max_value=0.0, allow_nan=False, allow_infinity=False)


@st.composite
def padded_batches(draw: st.DrawFn, identical: bool = False) -> PaddedStep:
    batch = draw(st.integers(1, 5))
    width = draw(st.integers(1, 6))
    rollout = draw(hnp.arrays(np.float64, (batch, width), elements=log_probs))
    old = (
        rollout.copy()
        if identical
        else draw(hnp.arrays(np.float64, (batch, width), elements=log_probs))
    )
    mask = draw(hnp.arrays(np.int64, (batch, width), elements=st.integers(0, 1)))
    if not mask.any():
        mask[draw(st.integers(0, batch - 1)), draw(st.integers(0, width - 1))] = 1
    garbage = draw(st.sampled_from([np.nan, np.inf, -np.inf, 0.0]))
    rollout = np.where(mask != 0, rollout, garbage)
    old = np.where(mask != 0, old, -garbage)
    lengths = np.full(batch, width)
    return PaddedStep(step=0, rollout=rollout, old=old, mask=mask, lengths=lengths)


@settings(max_examples=80, deadline=None)
@given(padded_batches(identical=True))
def test_identical_log_probs_mean_no_mismatch(step: PaddedStep) -> None:
    analysis = analyse([step], AnalyzeOptions(dialect="legacy", veto_threshold=1e-4), "chunks")
    for metrics in (analysis.step_result(0).metrics, analysis.overall()):
        for name in ("kl", "k3_kl", "chi2_seq", "log_ppl_diff", "log_ppl_abs_diff"):
            assert abs(metrics[f"rollout_corr/{name}"]) <= 1e-12, name
        # verl's masked_mean(ρ²) − 1 with ρ ≡ 1 is V/V − 1 (Σm + 1e-8 = V in float32)
        assert metrics["rollout_corr/chi2_token"] == 0.0
        assert metrics["rollout_corr/log_ppl_diff_max"] == pytest.approx(0.0, abs=1e-12)
        assert metrics["rollout_corr/log_ppl_diff_min"] == pytest.approx(0.0, abs=1e-12)
        assert metrics["rollout_corr/ppl_ratio"] == pytest.approx(1.0, abs=1e-12)
        assert metrics["rollout_corr/training_ppl"] == pytest.approx(
            metrics["rollout_corr/rollout_ppl"], rel=1e-12
        )
        assert metrics["rcdiag/ess_token"] == pytest.approx(1.0, abs=1e-12)
        assert metrics["rcdiag/ess_seq"] == pytest.approx(1.0, abs=1e-12)
        assert metrics["rcdiag/abs_log_ratio_mean"] == 0.0
        assert metrics["rcdiag/abs_log_ratio_max"] == 0.0
        assert metrics["rcdiag/ratio_outside_0.9_1.1"] == 0.0
        assert metrics["rcdiag/ratio_outside_0.5_2"] == 0.0
        assert metrics["rcdiag/veto_fraction"] == 0.0
        assert metrics["rollout_corr/rollout_is_veto_fraction"] == 0.0
        for name in QUANTILE_NAMES:
            assert metrics[name] == 0.0
    ref = reference_metrics(*step.padded)
    assert abs(ref["rollout_corr/kl"]) <= 1e-12
    assert abs(ref["rollout_corr/chi2_seq"]) <= 1e-12
    assert ref["rcdiag/ess_token"] == pytest.approx(1.0, abs=1e-12)
    assert ref["rcdiag/ess_seq"] == pytest.approx(1.0, abs=1e-12)


@settings(max_examples=80, deadline=None)
@given(padded_batches(), st.sampled_from(["whole", "chunks", "shuffled"]))
def test_random_batches_match_reference(step: PaddedStep, chunking: str) -> None:
    options = AnalyzeOptions(dialect="legacy", veto_threshold=1e-4)
    analysis = analyse([step], options, chunking)
    want = reference_metrics(*step.padded, dialect="legacy", veto_threshold=1e-4)
    assert_metrics_close(analysis.step_result(0).metrics, want, "step")
    assert_metrics_close(analysis.overall(), want, "overall")
    assert_quantiles_ok(analysis.overall(), valid_log_ratios(*step.padded), "overall")
