"""A slow, deliberately naive reference for verl's rollout-correction helper, from docs/ alone.

It is the oracle rcdiag's correction engine is tested against, so it shares no code with ``rcdiag``
(and none with ``tests/reference.py`` either; the off-policy formulas are re-written here). It works on
PADDED ``[B, T]`` float64 arrays — exactly what verl's
``compute_rollout_correction_and_rejection_mask(old_log_prob, rollout_log_prob, response_mask, …)``
receives — and follows docs/correction.md and docs/metrics.md with explicit Python loops over
rows and valid tokens. Speed is irrelevant; every number should be checkable by eye.

Two dialects (docs/presets.md):

* ``"latest"`` — spec NEWEST (verl-project/verl ``1dda039``): TIS or IcePop IS threshold, IS metrics
  from the APPLIED weights W (docs/correction.md), sequence batch-norm over rows with ≥ 1 valid token, the 11
  k1/k2/k3 rejection criteria with comma lists (docs/correction.md), no veto.
* ``"legacy"`` — spec SEED (#4070): TIS only, IS metrics from the RAW weights R, sequence batch-norm
  over all B rows, RS ``token`` / ``sequence`` / ``geometric`` on ρ with a lower bound, and
  the per-token veto (docs/correction.md).

Conventions (docs/metrics.md):

* ℓ = old − rollout; ρ = exp(ℓ); ℓ̃ = clamp(ℓ, ±20).
* masked_sum(x, m) only ever READS positions with m = 1 (values under m = 0, even NaN, are ignored).
* masked_mean(x, m) = masked_sum / (Σm + 1e-8), per row or pooled; an empty row's masked mean is 0.
* "row mean" = plain mean over rows (no +1e-8).

Sums use :func:`math.fsum` (exactly rounded) and every exp/log is a scalar ``math`` call, so any
float64 implementation should agree with this one to rounding, except at exact threshold ties.

Example:
    >>> import numpy as np
    >>> old = np.log(np.array([[0.4, 0.8, 6.0]]))
    >>> rollout = np.zeros((1, 3))
    >>> mask = np.ones((1, 3), dtype=np.int64)
    >>> cfg = {"rollout_is": "token", "rollout_is_threshold": "0.5_5.0"}
    >>> w, new_mask, m = reference_correction(old, rollout, mask, cfg, "latest")
    >>> np.round(w, 6).tolist(), new_mask.tolist(), round(m["rollout_corr/rollout_is_oob_ratio"], 6)
    ([[0.0, 0.8, 0.0]], [[1, 1, 1]], 0.666667)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

# verl's masked_mean divides by `mask.sum(axis) + 1e-8`. In training the mask is int64 or bool, so
# torch promotes that sum plus a Python float to a float32 tensor, where n + 1e-8 == n for every
# n ≥ 1 (n ≤ 2²⁴). The oracle evaluates the denominator the same way (:func:`_denominator`).
EPS = 1e-8
"""verl's masked_mean denominator offset."""


def _denominator(count: int) -> float:
    """Σm + 1e-8 for an integer mask summing to ``count``, in float32 as torch computes it."""
    return float(np.float32(count) + np.float32(EPS))


def _pooled_std(b: _Batch, xs: list[list[float]]) -> float:
    """sqrt(max(0, E[x²] − E[x]²)) over the valid tokens, written as the pooled mean of (x − x̄)²:
    the same number without cancellation (a constant gives exactly 0); 0.0 for V ≤ 1."""
    if b.V <= 1:
        return 0.0
    mean_x = b.pooled_mean(xs)
    return math.sqrt(max(b.pooled_mean([[(x - mean_x) ** 2 for x in row] for row in xs]), 0.0))


SAFETY_BOUND = 20.0
"""verl's SAFETY_BOUND (docs/metrics.md)."""

PREFIX = "rollout_corr/"

DIALECTS = ("latest", "legacy")

RS_OPTIONS_LATEST: tuple[str, ...] = (
    "token_k1",
    "token_k2",
    "token_k3",
    "seq_sum_k1",
    "seq_sum_k2",
    "seq_sum_k3",
    "seq_mean_k1",
    "seq_mean_k2",
    "seq_mean_k3",
    "seq_max_k2",
    "seq_max_k3",
)
"""The 11 NEWEST rejection criteria (docs/correction.md); there is no seq_max_k1."""

RS_LEVELS_LEGACY: tuple[str, ...] = ("token", "sequence", "geometric")
"""The SEED rejection levels (docs/correction.md)."""

OFFPOLICY_NAMES: tuple[str, ...] = (
    "training_ppl",
    "training_log_ppl",
    "kl",
    "k3_kl",
    "rollout_ppl",
    "rollout_log_ppl",
    "log_ppl_diff",
    "log_ppl_abs_diff",
    "log_ppl_diff_max",
    "log_ppl_diff_min",
    "ppl_ratio",
    "chi2_token",
    "chi2_seq",
)
"""The 13 off-policy metrics of docs/metrics.md (without the ``rollout_corr/`` prefix)."""

IS_METRIC_SUFFIXES: tuple[str, ...] = (
    "mean",
    "max",
    "min",
    "ratio_fraction_high",
    "ratio_fraction_low",
    "std",
    "eff_sample_size",
    "seq_mean",
    "seq_std",
    "seq_max",
    "seq_min",
    "seq_max_deviation",
    "seq_fraction_high",
    "seq_fraction_low",
)
"""IS metric suffixes logged in both dialects (``rollout_corr/rollout_is_<suffix>``), docs/correction.md.

Plus ``oob_ratio`` (IcePop only) and ``batch_norm_factor`` (batch-norm only)."""

RS_OPTION_METRIC_SUFFIXES: tuple[str, ...] = (
    "mean",
    "max",
    "min",
    "fraction_high",
    "fraction_low",
    "std",
    "seq_mean",
    "seq_std",
    "seq_max",
    "seq_min",
    "seq_max_deviation",
    "seq_fraction_high",
    "masked_fraction",
    "seq_masked_fraction",
)
"""Per-option NEWEST RS suffixes (``rollout_rs_<option>_<suffix>``); k1 options add seq_fraction_low."""

RS_LEGACY_METRIC_SUFFIXES: tuple[str, ...] = (
    *IS_METRIC_SUFFIXES,
    "masked_fraction",
    "seq_masked_fraction",
)
"""SEED RS suffixes (``rollout_rs_<suffix>``), docs/correction.md."""

VETO_NAMES: tuple[str, ...] = ("rollout_is_veto_fraction", "rollout_is_catastrophic_token_fraction")
"""SEED veto metrics, always logged in the legacy dialect (docs/correction.md)."""

_DEFAULTS: dict[str, Any] = {
    "rollout_is": None,
    "rollout_is_threshold": 2.0,
    "rollout_is_batch_normalize": False,
    "rollout_rs": None,
    "rollout_rs_threshold": None,
    "rollout_rs_threshold_lower": None,
    "rollout_token_veto_threshold": None,
}
"""Defaults of the helper's keyword arguments as the trainer reads them (``config.get(key, default)``)."""

_LEGACY_ONLY_KEYS = ("rollout_rs_threshold_lower", "rollout_token_veto_threshold")


# ---------------------------------------------------------------------------------------------
# scalar helpers
# ---------------------------------------------------------------------------------------------


def _clamp(x: float, lo: float, hi: float) -> float:
    """torch.clamp(x, min=lo, max=hi) = min(max(x, lo), hi) (hi wins when lo > hi, as in torch)."""
    return min(max(x, lo), hi)


def _safe(x: float) -> float:
    """clamp(x, ±SAFETY_BOUND)."""
    return _clamp(x, -SAFETY_BOUND, SAFETY_BOUND)


def _exp(x: float) -> float:
    """exp that overflows to +inf like torch/numpy instead of raising (only unclamped calls need it)."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _log(x: float) -> float:
    """log that gives −inf at 0 like torch.log (SEED lower bound L may be 0, e.g. preset seq_mis)."""
    return -math.inf if x == 0.0 else math.log(x)


def _row_mean(values: list[float]) -> float:
    """Plain mean over rows (torch ``.mean()`` on a [B] tensor): no +1e-8."""
    return math.fsum(values) / len(values)


def _unbiased_std(values: list[float]) -> float:
    """torch ``.std()`` (N − 1 denominator); 0.0 for a single value, as verl guards it."""
    if len(values) <= 1:
        return 0.0
    mu = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mu) ** 2 for v in values) / (len(values) - 1))


def _is_number(x: object) -> bool:
    """``isinstance(x, int | float)`` as verl tests it (bool IS an int there; callers decide)."""
    return isinstance(x, (int, float))


# ---------------------------------------------------------------------------------------------
# the batch: per-row lists of the VALID tokens only
# ---------------------------------------------------------------------------------------------


class _Batch:
    """Per-row views of a padded batch; nothing under m = 0 is ever read.

    Attributes:
        B, T: padded shape.
        cols[i]: column indices of row i's valid tokens (in order).
        olds[i], rolls[i], ells[i]: old, rollout and ℓ = old − rollout at those columns.
        n[i]: number of valid tokens of row i; V = Σ n[i].
    """

    def __init__(self, old: np.ndarray, rollout: np.ndarray, mask: np.ndarray) -> None:
        self.B, self.T = mask.shape
        self.cols: list[list[int]] = []
        self.olds: list[list[float]] = []
        self.rolls: list[list[float]] = []
        self.ells: list[list[float]] = []
        for i in range(self.B):
            cols, olds, rolls, ells = [], [], [], []
            for t in range(self.T):
                if mask[i, t] != 0:
                    o = float(old[i, t])
                    r = float(rollout[i, t])
                    cols.append(t)
                    olds.append(o)
                    rolls.append(r)
                    ells.append(o - r)
            self.cols.append(cols)
            self.olds.append(olds)
            self.rolls.append(rolls)
            self.ells.append(ells)
        self.n = [len(c) for c in self.cols]
        self.V = sum(self.n)

    # --- verl_F reductions over per-token values given row by row (valid tokens only) ---------

    def pooled_mean(self, per_row: list[list[float]]) -> float:
        """masked_mean(x, m) over the whole batch: Σ_valid x / (V + 1e-8) (float32 denominator)."""
        return math.fsum(x for row in per_row for x in row) / _denominator(self.V)

    @staticmethod
    def masked_row_mean(values: list[float]) -> float:
        """masked_mean(x, m, axis=-1) of one row: Σ_valid x / (n_i + 1e-8) (float32 denominator);
        0 for an empty row."""
        return math.fsum(values) / _denominator(len(values))

    def valid_rows(self) -> list[int]:
        """Indices of rows with at least one valid token."""
        return [i for i in range(self.B) if self.n[i] > 0]

    def scatter(self, per_row: list[list[float]], dtype: type = np.float64) -> np.ndarray:
        """Back to a padded [B, T] array, zero at every m = 0 position."""
        out = np.zeros((self.B, self.T), dtype=dtype)
        for i in range(self.B):
            for t, x in zip(self.cols[i], per_row[i], strict=True):
                out[i, t] = x
        return out


def _check_arrays(
    old: np.ndarray, rollout: np.ndarray, mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    old = np.asarray(old, dtype=np.float64)
    rollout = np.asarray(rollout, dtype=np.float64)
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise ValueError("response_mask must be a 2-D [B, T] array")
    if not np.isin(mask, (0, 1)).all():
        raise ValueError("the reference only takes 0/1 masks")
    # verl checks the mask first, then the shapes (docs/correction.md).
    if not (mask != 0).any():
        raise ValueError("response_mask must contain at least one valid token (1).")
    if old.shape != rollout.shape:
        raise ValueError(
            f"old_log_prob shape {old.shape} does not match rollout_log_prob shape {rollout.shape}."
        )
    if old.shape != mask.shape:
        raise ValueError(
            f"log_prob shape {old.shape} does not match response_mask shape {mask.shape}."
        )
    valid = mask != 0
    if not (np.isfinite(old[valid]).all() and np.isfinite(rollout[valid]).all()):
        # SPEC-AMBIGUITY: verl does not check (NaN/inf would just propagate); README.md makes a
        # non-finite value at a valid position bad input, so the oracle refuses it instead of
        # producing numbers nobody could compare.
        raise ValueError("non-finite log-prob at a valid position")
    return old, rollout, mask


# ---------------------------------------------------------------------------------------------
# §2 off-policy metrics
# ---------------------------------------------------------------------------------------------


def _offpolicy_metrics(b: _Batch) -> dict[str, float]:
    """The 13 metrics of docs/metrics.md, always logged (identical in both dialects)."""
    a = [b.masked_row_mean(olds) for olds in b.olds]  # a_i, 0 for an empty row
    r = [b.masked_row_mean(rolls) for rolls in b.rolls]  # b_i, 0 for an empty row
    d = [ri - ai for ai, ri in zip(a, r, strict=True)]  # d_i = b_i − a_i
    seq_sum = [math.fsum(ells) for ells in b.ells]  # S_i (masked_sum of raw ℓ), 0 for an empty row

    out: dict[str, float] = {}
    out["training_ppl"] = _row_mean([_exp(-x) for x in a])
    out["training_log_ppl"] = _row_mean([-x for x in a])
    # kl = masked_mean(rollout − old) pooled (raw ℓ, not clamped)
    out["kl"] = b.pooled_mean([[-ell for ell in ells] for ells in b.ells])
    # k3 = exp(ℓ) − ℓ − 1, raw ℓ (may overflow to inf for huge ℓ, as in torch)
    out["k3_kl"] = b.pooled_mean([[_exp(ell) - ell - 1.0 for ell in ells] for ells in b.ells])
    out["rollout_ppl"] = _row_mean([_exp(-x) for x in r])
    out["rollout_log_ppl"] = _row_mean([-x for x in r])
    out["log_ppl_diff"] = _row_mean(d)
    out["log_ppl_abs_diff"] = _row_mean([abs(x) for x in d])
    out["log_ppl_diff_max"] = max(d)  # over ALL rows; an empty row contributes d = 0
    out["log_ppl_diff_min"] = min(d)
    out["ppl_ratio"] = _row_mean([_exp(x) for x in d])  # arithmetic mean of exp(d_i)
    # chi2_token = masked_mean(exp(2·clamp ℓ)) − 1 ; chi2_seq = mean_i exp(2·clamp S_i) − 1
    # verl writes `masked_mean(rho_squared) - 1.0`: the −1 outside the mean.
    out["chi2_token"] = (
        b.pooled_mean([[math.exp(2.0 * _safe(ell)) for ell in ells] for ells in b.ells]) - 1.0
    )
    out["chi2_seq"] = _row_mean([math.exp(2.0 * _safe(s)) for s in seq_sum]) - 1.0
    return out


# ---------------------------------------------------------------------------------------------
# §3 IS threshold parsing
# ---------------------------------------------------------------------------------------------


def _parse_is_threshold_latest(spec: Any) -> tuple[float, float | None]:
    """NEWEST ``_parse_rollout_is_threshold``: returns (upper C or hi, lo or None for TIS)."""
    if isinstance(spec, bool):
        raise TypeError(
            "rollout_is_threshold must be specified as a float or a string threshold specification, "
            "not a boolean."
        )
    lower: float | None
    if _is_number(spec):
        upper = float(spec)
        lower = None
    elif isinstance(spec, str):
        text = spec.strip()
        if not text:
            raise ValueError("rollout_is_threshold must not be an empty string.")
        if "_" in text:
            lower_str, upper_str = text.split("_", 1)  # split at the FIRST "_"
            try:
                # Python float(): note it accepts PEP 515 digit underscores ("5.0_1" → 5.01), as verl does
                lower = float(lower_str)
                upper = float(upper_str)
            except ValueError as exc:
                raise ValueError(f"Invalid rollout_is_threshold '{spec}'.") from exc
        else:
            try:
                upper = float(text)
            except ValueError as exc:
                raise ValueError(f"Invalid rollout_is_threshold '{spec}'.") from exc
            lower = None
    else:
        raise TypeError("rollout_is_threshold must be a float or a string threshold specification.")

    if upper <= 0:
        raise ValueError(f"rollout_is_threshold upper bound must be positive, got {upper}.")
    if lower is not None:
        if lower <= 0:
            raise ValueError(f"rollout_is_threshold lower bound must be positive, got {lower}.")
        if lower > upper:
            raise ValueError("rollout_is_threshold lower bound must be <= upper bound.")
    return upper, lower


def _parse_is_threshold_legacy(spec: Any) -> float:
    """SEED: a float only; C ≤ 0 → ValueError."""
    if isinstance(spec, bool):
        # SPEC-AMBIGUITY: SEED verl has no bool check (True <= 0 is False, so True would act as C = 1.0);
        # verl's validation lists "IS threshold bool → TypeError" without a dialect, and the brief asks for
        # TypeError, so both dialects refuse bools.
        raise TypeError("rollout_is_threshold must be a float, not a boolean.")
    if not _is_number(spec):
        # SPEC-AMBIGUITY: the legacy helper takes a float only; it compares `threshold <= 0`, so a
        # string (e.g. IcePop "0.5_5.0") raises TypeError there, which the oracle reproduces.
        raise TypeError(
            f"rollout_is_threshold must be a float in the legacy dialect, got {spec!r}."
        )
    if spec <= 0:
        raise ValueError(f"rollout_is_threshold must be positive, got {spec}.")
    return float(spec)


# ---------------------------------------------------------------------------------------------
# §3 IS weights and §3.1 metrics
# ---------------------------------------------------------------------------------------------


def _importance_sampling(
    b: _Batch,
    level: str,
    upper: float,
    lower: float | None,
    batch_normalize: bool,
    dialect: str,
) -> tuple[list[list[float]], dict[str, float]]:
    """IS pipeline and metrics (docs/correction.md). Returns (weights per row, metrics)."""
    icepop = lower is not None
    seq_sum = [math.fsum(ells) for ells in b.ells]  # S_i, raw; 0 for an empty row

    # Step 1: raw weights R on valid tokens.
    if level == "token":
        raw = [[math.exp(_safe(ell)) for ell in ells] for ells in b.ells]
    else:  # sequence: exp(clamp S_i) on every valid token of the row
        raw = [[math.exp(_safe(seq_sum[i]))] * b.n[i] for i in range(b.B)]

    # Step 2: TIS W = min(R, C); IcePop W = R if lo ≤ R ≤ hi else 0 (inclusive).
    if icepop:
        assert lower is not None
        applied = [[x if lower <= x <= upper else 0.0 for x in row] for row in raw]
    else:
        applied = [[min(x, upper) for x in row] for row in raw]

    # Step 3: metrics, before batch normalisation.
    c_hi = upper
    c_lo = lower if icepop else 1.0 / upper  # the implicit TIS lower bound 1/C (metrics only)
    assert c_lo is not None
    # NEWEST reads the applied W; SEED reads the raw R for everything (docs/correction.md).
    stat = applied if dialect == "latest" else raw

    m: dict[str, float] = {}
    m["mean"] = b.pooled_mean(stat)
    if level == "sequence":
        # Over ALL B rows from the raw S_i (an empty row has S_i = 0); max capped at exp(20).
        m["max"] = math.exp(min(max(seq_sum), SAFETY_BOUND))
        m["min"] = _exp(min(seq_sum))  # unclamped: may underflow to exactly 0 (or overflow to inf)
        m["ratio_fraction_high"] = _row_mean([1.0 if s > _log(c_hi) else 0.0 for s in seq_sum])
        m["ratio_fraction_low"] = _row_mean([1.0 if s < _log(c_lo) else 0.0 for s in seq_sum])
    else:
        # max/min over valid tokens of W (NEWEST) or R (SEED); fractions from R in both.
        m["max"] = max(x for row in stat for x in row)
        m["min"] = min(x for row in stat for x in row)
        m["ratio_fraction_high"] = b.pooled_mean(
            [[1.0 if x > c_hi else 0.0 for x in row] for row in raw]
        )
        m["ratio_fraction_low"] = b.pooled_mean(
            [[1.0 if x < c_lo else 0.0 for x in row] for row in raw]
        )

    # std / ESS: x = clamp(W, 0, C_hi) (NEWEST) or clamp(R, 1/C, C) (SEED).
    clamp_lo = 0.0 if dialect == "latest" else c_lo
    xs = [[_clamp(x, clamp_lo, c_hi) for x in row] for row in stat]
    m["std"] = _pooled_std(b, xs)
    x_bar = b.pooled_mean(xs)
    normalised_sq = b.pooled_mean([[(x / (x_bar + EPS)) ** 2 for x in row] for row in xs])
    if normalised_sq == 0.0:
        # SPEC-AMBIGUITY: only reachable with IcePop when every valid weight is zeroed. verl computes
        # `1.0 / masked_mean(...).item()`, a Python float division that raises ZeroDivisionError; the
        # spec says nothing. The oracle reports +inf (what a float64 array implementation yields).
        m["eff_sample_size"] = math.inf
    else:
        m["eff_sample_size"] = 1.0 / normalised_sq

    # Per-row masked means over ALL B rows (empty row → 0): s_i of W (NEWEST) / R (SEED), r_i of R.
    s = [b.masked_row_mean(row) for row in stat]
    r = [b.masked_row_mean(row) for row in raw]
    m["seq_mean"] = _row_mean(s)
    m["seq_std"] = _unbiased_std(s)
    m["seq_max"] = max(s)
    m["seq_min"] = min(s)
    m["seq_max_deviation"] = max(abs(x - 1.0) for x in s)
    m["seq_fraction_high"] = _row_mean([1.0 if x > c_hi else 0.0 for x in r])
    m["seq_fraction_low"] = _row_mean([1.0 if x < c_lo else 0.0 for x in r])

    if icepop:
        assert lower is not None
        m["oob_ratio"] = b.pooled_mean(
            [[1.0 if (x < lower or x > upper) else 0.0 for x in row] for row in raw]
        )

    # Step 4 (detach) has no offline meaning. Step 5: optional batch normalisation.
    weights = applied
    if batch_normalize:
        if level == "token":
            mu = b.pooled_mean(applied)
        elif dialect == "latest":
            # per-row masked mean of W, averaged over rows with ≥ 1 valid token (since #3980)
            rows = b.valid_rows()
            mu = math.fsum(b.masked_row_mean(applied[i]) for i in rows) / len(rows)
        else:
            # SEED #4070: averaged over ALL B rows (an empty row contributes 0)
            mu = _row_mean([b.masked_row_mean(row) for row in applied])
        if mu > 1e-8:
            weights = [[x / mu for x in row] for row in applied]
            m["batch_norm_factor"] = mu
        else:
            m["batch_norm_factor"] = 1.0

    return weights, {f"rollout_is_{k}": v for k, v in m.items()}


# ---------------------------------------------------------------------------------------------
# §4.1 NEWEST rejection sampling
# ---------------------------------------------------------------------------------------------


def _parse_rs_options_latest(rollout_rs: Any) -> list[str]:
    if rollout_rs is None or not isinstance(rollout_rs, str):
        raise ValueError(
            "rollout_rs must be a non-empty string (comma separated for multiple options)."
        )
    items = [item.strip() for item in rollout_rs.split(",") if item.strip()]
    if not items:
        raise ValueError("rollout_rs must contain at least one valid option.")
    options: list[str] = []
    for item in items:
        if item not in RS_OPTIONS_LATEST:
            raise ValueError(
                f"Invalid rollout_rs option: {item}. Must be one of {sorted(RS_OPTIONS_LATEST)}."
            )
        if item not in options:  # dedupe, keeping the first occurrence
            options.append(item)
    return options


def _parse_rs_thresholds_latest(
    options: list[str], spec: Any
) -> dict[str, tuple[float | None, float]]:
    """NEWEST ``_parse_rollout_rs_thresholds``: option → (lo or None, hi), in RATIO space."""
    if spec is None:
        raise ValueError("rollout_rs_threshold must be provided for rejection sampling.")
    if _is_number(spec):
        # SPEC-AMBIGUITY: verl tests isinstance(x, int | float), so a bool is "a number" and becomes
        # "True"/"False", which then fails float() → ValueError ("Invalid numeric threshold"). Kept.
        raw_specs = [str(spec)]
    elif isinstance(spec, str):
        raw_specs = [part.strip() for part in spec.split(",") if part.strip()]
    else:
        raise TypeError(
            "rollout_rs_threshold must be a string or numeric value specifying per-option thresholds."
        )
    if not raw_specs:
        raise ValueError("rollout_rs_threshold must contain at least one threshold value.")
    if len(raw_specs) not in (1, len(options)):
        raise ValueError(
            f"rollout_rs_threshold expects either one threshold shared by all options or exactly "
            f"{len(options)} thresholds to match the provided rollout_rs options."
        )
    if len(raw_specs) == 1:
        raw_specs = raw_specs * len(options)  # broadcast

    out: dict[str, tuple[float | None, float]] = {}
    for option, text in zip(options, raw_specs, strict=True):
        if option.endswith("k1"):
            try:
                if "_" in text:
                    lower_str, upper_str = text.split("_", 1)  # split at the FIRST "_"
                    lower = float(lower_str)
                    upper = float(upper_str)
                else:
                    upper = float(text)
                    # SPEC-AMBIGUITY: verl builds lo = float(str(1.0 / float(x))); str/float round-trips
                    # exactly, so lo = 1/x. For x = 0 verl's division raises ZeroDivisionError before its
                    # positivity check; docs/correction.md says ValueError, which the oracle raises.
                    lower = 1.0 / upper if upper != 0.0 else 0.0
            except ValueError as exc:
                raise ValueError(
                    f"Invalid numeric threshold '{text}' for option '{option}'."
                ) from exc
            if lower <= 0 or upper <= 0:
                raise ValueError(f"Thresholds for option '{option}' must be positive, got {text}.")
            if lower > upper:
                raise ValueError(
                    f"rollout_rs_threshold for option '{option}': "
                    f"lower bound must be <= upper bound, got {text}."
                )
            out[option] = (lower, upper)
        else:
            if "_" in text:
                raise ValueError(
                    f"rollout_rs_threshold for option '{option}' must provide a single upper bound "
                    f"without '_'. Received '{text}'."
                )
            try:
                upper = float(text)
            except ValueError as exc:
                raise ValueError(
                    f"Invalid numeric threshold '{text}' for option '{option}'."
                ) from exc
            if upper <= 0:
                raise ValueError(f"Threshold for option '{option}' must be positive, got {text}.")
            out[option] = (None, upper)
    return out


def _k_stat(kind: str, ell: float) -> float:
    """Per-token statistic on ℓ̃ = clamp(ℓ, ±20): k1 = −ℓ̃, k2 = ½ℓ̃², k3 = exp(ℓ̃) − 1 − ℓ̃."""
    lt = _safe(ell)
    if kind == "k1":
        return -lt
    if kind == "k2":
        return 0.5 * lt * lt
    return math.exp(lt) - 1.0 - lt


def _rejection_latest(
    b: _Batch, rollout_rs: Any, rollout_rs_threshold: Any
) -> tuple[list[list[bool]], dict[str, float]]:
    """Spec §4.1. Returns (combined keep flag per valid token, metrics)."""
    options = _parse_rs_options_latest(rollout_rs)
    thresholds = _parse_rs_thresholds_latest(options, rollout_rs_threshold)
    valid_rows = b.valid_rows()

    combined = [[True] * b.n[i] for i in range(b.B)]
    metrics: dict[str, float] = {}
    for option in options:
        lo, hi = thresholds[option]
        kind = option[-2:]  # "k1" | "k2" | "k3"
        is_k1 = kind == "k1"
        token_level = option.startswith("token_")
        # keep bounds in statistic space: k1 → [log lo, log hi]; k2/k3 → (−inf, hi]
        upper_u = math.log(hi) if is_k1 else hi
        lower_l = math.log(lo) if (is_k1 and lo is not None) else 0.0

        def keeps(
            x: float, is_k1: bool = is_k1, lower_l: float = lower_l, upper_u: float = upper_u
        ) -> bool:
            return (lower_l <= x <= upper_u) if is_k1 else (x <= upper_u)

        tok = [[_k_stat(kind, ell) for ell in ells] for ells in b.ells]
        if token_level:
            s_t = tok  # per-token statistic
            keep = [[keeps(x) for x in row] for row in tok]
            row_stat = [b.masked_row_mean(row) for row in tok]  # V source for token options
        else:
            if option.startswith("seq_sum_"):
                row_stat = [math.fsum(row) for row in tok]
            elif option.startswith("seq_mean_"):
                row_stat = [b.masked_row_mean(row) for row in tok]  # n_i + 1e-8 denominator
            else:  # seq_max_: max over valid tokens, empty row → 0
                row_stat = [max(row) if row else 0.0 for row in tok]
            s_t = [[row_stat[i]] * b.n[i] for i in range(b.B)]  # broadcast to the row's tokens
            keep = [[keeps(row_stat[i])] * b.n[i] for i in range(b.B)]

        values = [row_stat[i] for i in valid_rows]  # V: rows with ≥ 1 valid token

        p = f"rollout_rs_{option}_"
        metrics[p + "mean"] = b.pooled_mean(s_t)
        if token_level:
            metrics[p + "max"] = max(x for row in s_t for x in row)
            metrics[p + "min"] = min(x for row in s_t for x in row)
            metrics[p + "fraction_high"] = b.pooled_mean(
                [[1.0 if x > upper_u else 0.0 for x in row] for row in s_t]
            )
            metrics[p + "fraction_low"] = (
                b.pooled_mean([[1.0 if x < lower_l else 0.0 for x in row] for row in s_t])
                if is_k1
                else 0.0
            )
        else:
            metrics[p + "max"] = max(values)
            metrics[p + "min"] = min(values)
            metrics[p + "fraction_high"] = _row_mean([1.0 if v > upper_u else 0.0 for v in values])
            metrics[p + "fraction_low"] = (
                _row_mean([1.0 if v < lower_l else 0.0 for v in values]) if is_k1 else 0.0
            )
        clamped = [[_clamp(x, lower_l, upper_u) for x in row] for row in s_t]  # L (k1) or 0, U
        metrics[p + "std"] = _pooled_std(b, clamped)
        metrics[p + "seq_mean"] = _row_mean(values)
        metrics[p + "seq_std"] = _unbiased_std(values)
        metrics[p + "seq_max"] = max(values)
        metrics[p + "seq_min"] = min(values)
        metrics[p + "seq_max_deviation"] = max(abs(v - 0.0) for v in values)
        metrics[p + "seq_fraction_high"] = _row_mean([1.0 if v > upper_u else 0.0 for v in values])
        if is_k1:
            metrics[p + "seq_fraction_low"] = _row_mean(
                [1.0 if v < lower_l else 0.0 for v in values]
            )
        metrics[p + "masked_fraction"] = b.pooled_mean(
            [[0.0 if k else 1.0 for k in row] for row in keep]
        )
        rejected_rows = sum(1 for i in valid_rows if not all(keep[i]))
        metrics[p + "seq_masked_fraction"] = rejected_rows / len(valid_rows)

        combined = [
            [c and k for c, k in zip(crow, krow, strict=True)]
            for crow, krow in zip(combined, keep, strict=True)
        ]

    metrics["rollout_rs_masked_fraction"] = b.pooled_mean(
        [[0.0 if k else 1.0 for k in row] for row in combined]
    )
    # over ALL B rows (empty rows included): a different denominator from the per-option one
    metrics["rollout_rs_seq_masked_fraction"] = _row_mean(
        [0.0 if all(row) else 1.0 for row in combined]
    )
    return combined, metrics


# ---------------------------------------------------------------------------------------------
# §4.2 SEED rejection sampling and §4.3 veto
# ---------------------------------------------------------------------------------------------


def _legacy_bound(name: str, value: Any) -> float:
    if isinstance(value, bool) or not _is_number(value):
        # SEED treats these as floats; anything else fails inside torch/Python arithmetic.
        raise TypeError(f"{name} must be a float in the legacy dialect, got {value!r}.")
    return float(value)


def _rejection_legacy(
    b: _Batch, rollout_rs: Any, upper_spec: Any, lower_spec: Any
) -> tuple[list[list[bool]], dict[str, float]]:
    """Spec §4.2. Returns (keep flag per valid token, metrics)."""
    if rollout_rs not in RS_LEVELS_LEGACY:
        raise ValueError(
            f"Invalid rollout_rs: {rollout_rs}. Must be one of {set(RS_LEVELS_LEGACY)}."
        )
    upper = _legacy_bound("rollout_rs_threshold", upper_spec)
    # SPEC-AMBIGUITY: SEED verl never validates the RS bounds (U = 0 with no lower bound dies in 1/U
    # with ZeroDivisionError; U < 0 or L < 0 run and reject everything / produce log(negative) = NaN
    # metrics). The oracle refuses U ≤ 0 and L < 0 with ValueError; L = 0 (preset seq_mis) and L > U
    # (rejects every token) are accepted and computed literally.
    if upper <= 0:
        raise ValueError(f"rollout_rs_threshold must be positive, got {upper}.")
    lower = (
        1.0 / upper
        if lower_spec is None
        else _legacy_bound("rollout_rs_threshold_lower", lower_spec)
    )
    if lower < 0:
        raise ValueError(f"rollout_rs_threshold_lower must be non-negative, got {lower}.")

    seq_level = rollout_rs != "token"
    if rollout_rs == "token":
        log_for_metrics = None
        ratio = [[math.exp(_safe(ell)) for ell in ells] for ells in b.ells]
        row_flag = None
    else:
        if rollout_rs == "sequence":
            log_for_metrics = [math.fsum(ells) for ells in b.ells]  # S_i
        else:  # geometric: masked mean of ℓ (n_i + 1e-8), 0 for an empty row
            log_for_metrics = [b.masked_row_mean(ells) for ells in b.ells]
        row_ratio = [math.exp(_safe(x)) for x in log_for_metrics]  # empty row → exp(0) = 1
        row_flag = [lower <= x <= upper for x in row_ratio]  # the row's keep flag (= column 0's)
        ratio = [[row_ratio[i]] * b.n[i] for i in range(b.B)]
    keep = [[lower <= x <= upper for x in row] for row in ratio]  # keep if L ≤ ratio ≤ U, on ρ

    # Metrics: the SEED IS-metric formulas with (U, L); geometric treated like sequence.
    m: dict[str, float] = {}
    m["mean"] = b.pooled_mean(ratio)
    if seq_level:
        assert log_for_metrics is not None
        m["max"] = math.exp(min(max(log_for_metrics), SAFETY_BOUND))
        m["min"] = _exp(min(log_for_metrics))
        m["ratio_fraction_high"] = _row_mean(
            [1.0 if x > _log(upper) else 0.0 for x in log_for_metrics]
        )
        m["ratio_fraction_low"] = _row_mean(
            [1.0 if x < _log(lower) else 0.0 for x in log_for_metrics]
        )
    else:
        m["max"] = max(x for row in ratio for x in row)
        m["min"] = min(x for row in ratio for x in row)
        m["ratio_fraction_high"] = b.pooled_mean(
            [[1.0 if x > upper else 0.0 for x in row] for row in ratio]
        )
        m["ratio_fraction_low"] = b.pooled_mean(
            [[1.0 if x < lower else 0.0 for x in row] for row in ratio]
        )
    xs = [[_clamp(x, lower, upper) for x in row] for row in ratio]
    m["std"] = _pooled_std(b, xs)
    x_bar = b.pooled_mean(xs)
    normalised_sq = b.pooled_mean([[(x / (x_bar + EPS)) ** 2 for x in row] for row in xs])
    # SPEC-AMBIGUITY: with L = 0 and every ratio clamped to 0 this is 1/0 (ZeroDivisionError in verl);
    # unreachable in practice (ratios ≥ e^-20 > 0 and the clamp floor is L ≥ 0). Reported as +inf.
    m["eff_sample_size"] = math.inf if normalised_sq == 0.0 else 1.0 / normalised_sq
    s = [b.masked_row_mean(row) for row in ratio]  # over ALL B rows, empty → 0
    m["seq_mean"] = _row_mean(s)
    m["seq_std"] = _unbiased_std(s)
    m["seq_max"] = max(s)
    m["seq_min"] = min(s)
    m["seq_max_deviation"] = max(abs(x - 1.0) for x in s)
    m["seq_fraction_high"] = _row_mean([1.0 if x > upper else 0.0 for x in s])
    m["seq_fraction_low"] = _row_mean([1.0 if x < lower else 0.0 for x in s])
    m["masked_fraction"] = b.pooled_mean([[0.0 if k else 1.0 for k in row] for row in keep])
    if seq_level:
        assert row_flag is not None
        # mean over ALL rows of (1 − keep flag of column 0); an empty row's ratio is 1
        m["seq_masked_fraction"] = _row_mean([0.0 if f else 1.0 for f in row_flag])
    else:
        m["seq_masked_fraction"] = _row_mean([0.0 if all(row) else 1.0 for row in keep])
    return keep, {f"rollout_rs_{k}": v for k, v in m.items()}


def _veto_legacy(b: _Batch, tau_spec: Any) -> tuple[list[bool], dict[str, float]]:
    """Spec §4.3. Returns (row vetoed?, metrics); always logs the two metrics (0.0 when off)."""
    if tau_spec is None:
        return [False] * b.B, {name: 0.0 for name in VETO_NAMES}
    tau = _legacy_bound("rollout_token_veto_threshold", tau_spec)
    if tau <= 0:
        raise ValueError(f"rollout_token_veto_threshold must be positive, got {tau}.")
    log_tau = math.log(tau)
    catastrophic = [[ell < log_tau for ell in ells] for ells in b.ells]  # raw ℓ, no clamp
    vetoed = [any(row) for row in catastrophic]
    return vetoed, {
        "rollout_is_veto_fraction": _row_mean([1.0 if v else 0.0 for v in vetoed]),
        "rollout_is_catastrophic_token_fraction": b.pooled_mean(
            [[1.0 if c else 0.0 for c in row] for row in catastrophic]
        ),
    }


# ---------------------------------------------------------------------------------------------
# the helper
# ---------------------------------------------------------------------------------------------


def reference_correction(
    old: np.ndarray,
    rollout: np.ndarray,
    mask: np.ndarray,
    config: Mapping[str, Any],
    dialect: str,
) -> tuple[np.ndarray | None, np.ndarray, dict[str, float]]:
    """verl's ``compute_rollout_correction_and_rejection_mask`` on one padded batch (docs/).

    Args:
        old: ``[B, T]`` log π_train (old_log_prob).
        rollout: ``[B, T]`` log π_rollout (rollout_log_prob).
        mask: ``[B, T]`` response mask, 0/1 (int or bool); at least one 1.
        config: verl keys ``rollout_is``, ``rollout_is_threshold``, ``rollout_is_batch_normalize``,
            ``rollout_rs``, ``rollout_rs_threshold`` and, legacy only, ``rollout_rs_threshold_lower``,
            ``rollout_token_veto_threshold``; missing keys take the helper defaults (IS off, threshold
            2.0, no batch-norm, RS off, no thresholds, no veto). Other keys (``bypass_mode``,
            ``loss_type``, …) are ignored.
        dialect: ``"latest"`` (verl's newest) or ``"legacy"`` (verl's #4070).

    Returns:
        ``(is_weights, new_mask, metrics)``: IS weights ``[B, T]`` float64 after batch normalisation and
        zero at every m = 0 position, or None when IS is off (rollout_is or its threshold null);
        the RS- and veto-filtered mask ``[B, T]`` int64; every metric verl logs, ``rollout_corr/``-prefixed.

    Raises:
        ValueError / TypeError where verl raises (docs/presets.md).
    """
    if dialect not in DIALECTS:
        raise ValueError(f"dialect must be one of {DIALECTS}, got {dialect!r}")
    old, rollout, mask = _check_arrays(old, rollout, mask)
    cfg = {**_DEFAULTS, **dict(config)}
    if dialect == "latest":
        for key in _LEGACY_ONLY_KEYS:
            if cfg[key] is not None:
                # SPEC-AMBIGUITY: NEWEST verl simply has no such keys; docs/presets.md makes a legacy-only
                # key under an explicit latest dialect an error, so the oracle raises ValueError.
                raise ValueError(
                    f"{key} does not exist in the latest dialect (removed in verl #4544)"
                )

    b = _Batch(old, rollout, mask)
    metrics: dict[str, float] = {}

    # Step 2: IS weights — only when rollout_is AND its threshold are set (verl skips otherwise,
    # without validating rollout_is).
    weights: list[list[float]] | None = None
    rollout_is = cfg["rollout_is"]
    if rollout_is is not None and cfg["rollout_is_threshold"] is not None:
        if rollout_is not in ("token", "sequence"):
            raise ValueError(
                f"Invalid rollout_is: {rollout_is}. Must be one of {{'token', 'sequence'}}."
            )
        if dialect == "latest":
            upper, lower = _parse_is_threshold_latest(cfg["rollout_is_threshold"])
        else:
            upper, lower = _parse_is_threshold_legacy(cfg["rollout_is_threshold"]), None
        weights, is_metrics = _importance_sampling(
            b, rollout_is, upper, lower, bool(cfg["rollout_is_batch_normalize"]), dialect
        )
        metrics.update(is_metrics)

    # Step 3: rejection sampling.
    keep = [[True] * b.n[i] for i in range(b.B)]
    if cfg["rollout_rs"] is not None:
        if cfg["rollout_rs_threshold"] is None:
            raise ValueError(
                "rollout_rs_threshold must be explicitly provided when rollout_rs is enabled. "
                "Set rollout_rs_threshold to the desired threshold value."
            )
        if dialect == "latest":
            keep, rs_metrics = _rejection_latest(b, cfg["rollout_rs"], cfg["rollout_rs_threshold"])
        else:
            keep, rs_metrics = _rejection_legacy(
                b, cfg["rollout_rs"], cfg["rollout_rs_threshold"], cfg["rollout_rs_threshold_lower"]
            )
        metrics.update(rs_metrics)

    # Step 4 (SEED only): veto — every row with a catastrophic token is fully rejected.
    if dialect == "legacy":
        vetoed, veto_metrics = _veto_legacy(b, cfg["rollout_token_veto_threshold"])
        metrics.update(veto_metrics)
        keep = [[k and not vetoed[i] for k in keep[i]] for i in range(b.B)]

    # Step 5: off-policy metrics, on the ORIGINAL mask.
    metrics.update(_offpolicy_metrics(b))

    new_mask = b.scatter([[1 if k else 0 for k in row] for row in keep], dtype=np.int64)
    is_weights = None if weights is None else b.scatter(weights)
    return is_weights, new_mask, {PREFIX + k: float(v) for k, v in metrics.items()}
