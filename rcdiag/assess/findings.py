"""The measured figures the verdict and the recommendation rules read, from a result document.

Pure: a function of the JSON document of ``rcdiag analyze`` (or of the report), nothing else. Every
limit the rules compare against is in :data:`ADVICE_LIMITS`, named, so the documentation
(``docs/recommendation.md``) and the tests can quote it.

The **trend** over steps is a least-squares line through (x_s, log₁₀ k3_kl(s)) with
x_s = (step − first step) / (last step − first step) ∈ [0, 1]:

.. math::
    \\log_{10} k3(x) \\approx a + b\\,x, \\qquad \\mathrm{growth} = 10^{b}

so ``growth`` is the fitted factor between the first and the last step, and r the Pearson correlation
of the fit: the rules decide on them (robust to one noisy step). "first" and "recent" are medians over
the first and the last quarter of the steps; the text shows those two numbers and their ratio
(:attr:`RiseSummary.ratio`, computed from the numbers as printed, so a reader who divides them gets it).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from rcdiag.formatting import short
from rcdiag.metrics.distributions import median
from rcdiag.metrics.offpolicy import DEFAULT_VETO_THRESHOLD
from rcdiag.metrics.records import (
    ABS_LOG_RATIO_MEAN,
    CATASTROPHIC_TOKENS,
    CHI2_SEQ,
    CHI2_TOKEN,
    ESS_SEQ,
    ESS_TOKEN,
    K3_KL,
    KL,
    LOG_PPL_ABS_DIFF,
    REGISTRY,
    RESPONSE_LENGTH_MAX,
    RESPONSE_LENGTH_MEAN,
    VETO_FRACTION,
)
from rcdiag.status import Status

Size = Literal["tiny", "moderate", "large"]


def band_limit(metric: str, status: Status) -> float:
    """The limit of ``metric``'s ``status`` band in the registry (the one place it is written)."""
    band = REGISTRY[metric].band(status)
    assert band is not None and isinstance(band.limit, float), (metric, status)
    return band.limit


ADVICE_LIMITS: dict[str, float] = {
    "tiny_k3_kl": band_limit(K3_KL.name, "watch"),
    "tiny_abs_log_ratio": band_limit(ABS_LOG_RATIO_MEAN.name, "watch"),
    "large_abs_log_ratio": band_limit(ABS_LOG_RATIO_MEAN.name, "act"),
    "large_chi2_token": band_limit(CHI2_TOKEN.name, "act"),
    "large_k3_kl": band_limit(K3_KL.name, "act"),
    "seq_chi2": band_limit(CHI2_SEQ.name, "watch"),
    "seq_ess": band_limit(ESS_SEQ.name, "watch"),
    "catastrophic_fraction": band_limit(CATASTROPHIC_TOKENS.name, "watch"),
    "veto_fraction": band_limit(VETO_FRACTION.name, "act"),
    "bias_share": 0.5,
    "keep_target": 0.95,
    "worst_step_keep": 0.9,
    "is_mass_removed": 0.05,
}
"""The limits the recommendation rules read (docs/recommendation.md explains each). Health limits
are the registry's bands (:mod:`rcdiag.assess.judge`), read here, never restated:

* ``tiny_*``: the registry's ``watch`` limits of k3_kl and mean |Δ log p|: below both, the
  mismatch is within the healthy dense-bf16 ranges.
* ``large_*``: the ``act`` limits of mean |Δ log p|, χ²_token and k3_kl.
* ``seq_*``: sequence-level ratios are unusable past the ``watch`` limits of χ²_seq and ESS_seq.
* ``catastrophic_fraction``, ``veto_fraction``: the registry's limits on catastrophic tokens.
* ``bias_share``: |kl| / mean |Δ log p| at or above which the mismatch is a systematic shift.
* ``keep_target``: rejection thresholds are the tightest grid points keeping this share of tokens
  (of the whole dump; when the mismatch grows, of the recent steps too).
* ``worst_step_keep``: when the mismatch grows, the least share of its tokens a rejection threshold
  may keep at its worst step.
* ``is_mass_removed``: the largest share of IS weight mass truncation may remove at C.

Whether the mismatch grows is the diagnosis's ``growing_drift`` cause (one change-point test).
"""


@dataclass(frozen=True)
class RiseSummary:
    """How k3_kl moves over the steps (module docstring)."""

    steps: int
    growth: float
    correlation: float
    first: float
    recent: float
    recent_abs_log_ratio: float | None
    first_step: int
    last_step: int
    window: int = 1
    """Steps in each quarter the ``first`` and ``recent`` medians are taken over."""

    @property
    def ratio(self) -> float | None:
        """``recent / first`` as printed (two significant digits), None when ``first`` is 0."""
        return shown_ratio(self.first, self.recent)

    def words(self, metric: str = "k3_kl") -> str:
        """``k3_kl ×107, from 1.4e-4 (median of the first 5 steps) to 0.015 (… last 5)``."""
        steps = "step" if self.window == 1 else f"{self.window} steps"
        first = "the first step" if self.window == 1 else f"the first {steps}"
        last = "the last step" if self.window == 1 else f"the last {self.window}"
        median = "" if self.window == 1 else "median of "
        return (
            f"{metric} ×{short(self.ratio)}, from {short(self.first)} ({median}{first}) to "
            f"{short(self.recent)} ({median}{last})"
        )


@dataclass(frozen=True)
class Findings:
    """The figures of one dump the rules read (``None`` where the document lacks them)."""

    k3_kl: float | None
    kl: float | None
    abs_log_ratio: float | None
    chi2_token: float | None
    chi2_seq: float | None
    ess_token: float | None
    ess_seq: float | None
    catastrophic_fraction: float | None
    veto_fraction: float | None
    veto_threshold: float
    length_mean: float | None
    length_max: float | None
    log_ppl_abs_diff: float | None
    steps: int
    trend: RiseSummary | None
    causes: Mapping[str, Status]
    """Diagnosed cause id → severity (the diagnosis of the document)."""
    verdict: Status | None = None
    dump_bug: str | None = None
    """The dump bug the diagnosis found (the figures then describe the bug, not training)."""

    @property
    def complete(self) -> bool:
        """Whether the core token-level figures are present (else no verdict can be given)."""
        return None not in (self.k3_kl, self.kl, self.abs_log_ratio)

    @property
    def bias_share(self) -> float | None:
        """|kl| / mean |ℓ|: 1 when every token is shifted the same way, ≈ 0 for symmetric noise."""
        if self.kl is None or not self.abs_log_ratio:
            return None
        return abs(self.kl) / self.abs_log_ratio

    @property
    def worst_k3_kl(self) -> float:
        """k3_kl overall or over the recent steps, whichever is larger."""
        recent = self.trend.recent if self.trend else 0.0
        return max(self.k3_kl or 0.0, recent)

    @property
    def worst_abs_log_ratio(self) -> float:
        recent = (self.trend.recent_abs_log_ratio or 0.0) if self.trend else 0.0
        return max(self.abs_log_ratio or 0.0, recent)

    @property
    def size(self) -> Size:
        """``large`` past any act limit; ``tiny`` within the healthy ranges; ``moderate`` between.

        Read on the worse of the overall and the last steps' figures, but never beyond what the
        verdict says: under a ``watch`` verdict the mismatch is at most moderate and under a
        ``healthy`` one small, the overall figures (which the verdict judges) then deciding.
        """
        worst = _size(self.worst_abs_log_ratio, self.worst_k3_kl, self.kl, self.chi2_token)
        allowed = _SIZE_OF_VERDICT.get(self.verdict or "act", "large")
        if _SIZES.index(worst) <= _SIZES.index(allowed):
            return worst
        return self.overall_size

    @property
    def overall_size(self) -> Size:
        """:attr:`size` from the overall figures alone."""
        return _size(self.abs_log_ratio or 0.0, self.k3_kl or 0.0, self.kl, self.chi2_token)

    @property
    def recent_decides(self) -> bool:
        """Whether the last steps' figures (not the overall ones) decide :attr:`size`."""
        return self.overall_size != self.size

    @property
    def sequence_ratios_explode(self) -> bool:
        return (self.chi2_seq is not None and self.chi2_seq > ADVICE_LIMITS["seq_chi2"]) or (
            self.ess_seq is not None and self.ess_seq < ADVICE_LIMITS["seq_ess"]
        )

    @property
    def systematic_bias(self) -> bool:
        share = self.bias_share
        return (
            share is not None
            and share >= ADVICE_LIMITS["bias_share"]
            and (self.abs_log_ratio or 0.0) > ADVICE_LIMITS["tiny_abs_log_ratio"]
        )

    @property
    def catastrophic(self) -> bool:
        return (self.catastrophic_fraction or 0.0) >= ADVICE_LIMITS["catastrophic_fraction"]

    @property
    def catastrophic_severe(self) -> bool:
        return self.catastrophic and (self.veto_fraction or 0.0) > ADVICE_LIMITS["veto_fraction"]

    @property
    def growing(self) -> bool:
        """The diagnosis found a sustained rise (``growing_drift``)."""
        return "growing_drift" in self.causes

    @property
    def drifting(self) -> bool:
        """Growing, and past the healthy range: the diagnosis rates the rise ``act``."""
        return self.causes.get("growing_drift") == "act"


def shown_ratio(first: float | None, last: float | None) -> float | None:
    """``last / first`` computed from the two numbers as :func:`short` prints them.

    Example:
        >>> round(shown_ratio(1.38e-4, 0.0152) or 0.0, 1)
        107.1
    """
    if first is None or last is None:
        return None
    a, b = float(short(first)), float(short(last))
    if a == 0:
        return None
    return b / a


_SIZES: tuple[Size, ...] = ("tiny", "moderate", "large")
_SIZE_OF_VERDICT: dict[str, Size] = {"healthy": "tiny", "watch": "moderate", "act": "large"}


def _size(abs_log_ratio: float, k3_kl: float, kl: float | None, chi2: float | None) -> Size:
    if (
        abs_log_ratio > ADVICE_LIMITS["large_abs_log_ratio"]
        or (chi2 or 0.0) > ADVICE_LIMITS["large_chi2_token"]
        or k3_kl > ADVICE_LIMITS["large_k3_kl"]
    ):
        return "large"
    if (
        k3_kl <= ADVICE_LIMITS["tiny_k3_kl"]
        and abs_log_ratio <= ADVICE_LIMITS["tiny_abs_log_ratio"]
    ):
        return "tiny"
    return "moderate"


def tokens(value: float | None) -> str:
    """A token count (e.g. a mean response length) rounded to the nearest integer, with commas."""
    return "–" if value is None else f"{round(value):,}"


def _number(metrics: Mapping[str, Any], name: str) -> float | None:
    value = metrics.get(name)
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def trend(steps: list[Mapping[str, Any]]) -> RiseSummary | None:
    """The k3_kl trend over the steps that have a value (module docstring); None with < 2."""
    points = [(int(s["step"]), _number(s["metrics"], K3_KL.name), s["metrics"]) for s in steps]
    usable = [(step, k3, m) for step, k3, m in points if k3 is not None]
    if len(usable) < 2:
        return None
    x = np.array([p[0] for p in usable], dtype=np.float64)
    y = np.log10(np.maximum([p[1] for p in usable], 1e-12))
    span = x[-1] - x[0]
    x = (x - x[0]) / span if span > 0 else np.zeros_like(x)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        slope, correlation = 0.0, 0.0
    else:
        slope = float(np.polyfit(x, y, 1)[0])
        correlation = float(np.corrcoef(x, y)[0, 1])
    quarter = max(1, len(usable) // 4)
    k3 = [float(p[1] or 0.0) for p in usable]
    recent_abs = [_number(p[2], ABS_LOG_RATIO_MEAN.name) for p in usable[-quarter:]]
    present = [v for v in recent_abs if v is not None]
    return RiseSummary(
        steps=len(usable),
        growth=10.0**slope if slope < math.log10(sys.float_info.max) else math.inf,
        correlation=correlation,
        first=median(k3[:quarter]),
        recent=median(k3[-quarter:]),
        recent_abs_log_ratio=median(present) if present else None,
        first_step=usable[0][0],
        last_step=usable[-1][0],
        window=quarter,
    )


def findings(document: Mapping[str, Any]) -> Findings:
    """The figures of a result document (analyze or report JSON) the rules read."""
    steps = document.get("steps") or []
    options = document.get("options") or {}
    diagnosis = document.get("diagnosis") or {}
    # a metric set by an isolated spike step is read at its typical (median) step
    overall: Mapping[str, Any] = {
        **(document.get("overall") or {}),
        **{s["metric"]: s["typical"] for s in diagnosis.get("spikes") or []},
    }
    return Findings(
        k3_kl=_number(overall, K3_KL.name),
        kl=_number(overall, KL.name),
        abs_log_ratio=_number(overall, ABS_LOG_RATIO_MEAN.name),
        chi2_token=_number(overall, CHI2_TOKEN.name),
        chi2_seq=_number(overall, CHI2_SEQ.name),
        ess_token=_number(overall, ESS_TOKEN.name),
        ess_seq=_number(overall, ESS_SEQ.name),
        catastrophic_fraction=_number(overall, CATASTROPHIC_TOKENS.name),
        veto_fraction=_number(overall, VETO_FRACTION.name),
        veto_threshold=float(options.get("effective_veto_threshold") or DEFAULT_VETO_THRESHOLD),
        length_mean=_number(overall, RESPONSE_LENGTH_MEAN.name),
        length_max=_number(overall, RESPONSE_LENGTH_MAX.name),
        log_ppl_abs_diff=_number(overall, LOG_PPL_ABS_DIFF.name),
        steps=len(steps),
        trend=trend(steps),
        causes={c["id"]: c["severity"] for c in diagnosis.get("causes", [])},
        verdict=diagnosis.get("verdict"),
        dump_bug=next(
            (c["id"] for c in diagnosis.get("causes", []) if c["kind"] == "dump_bug"), None
        ),
    )
