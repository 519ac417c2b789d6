"""The parts of other frameworks' correction modes (docs/frameworks.md, "Corrections").

A framework mode (:class:`~rcdiag.correction.modes.ModePlan`) is made of: how the framework turns
the log ratio ℓ into IS weights (:class:`Ratio`, :class:`Weights`), which tokens or rows it drops
from the loss mask (:class:`Band`, :class:`Veto`, :class:`OutlierRows`, :class:`MeanExpAbsRows`,
or a framework's own :class:`TokenRule`, :class:`RowRule`) and whether it renormalises the
weights over the batch. Everything is computed on the shared
:class:`~rcdiag.correction.view.TokenView` of a batch, memoised by the part it depends on: two
modes with the same weights (or the same weights as a verl preset: a clamped token ratio is
verl's ``raw_weights``) share one pass over the tokens.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal

import numpy as np

from rcdiag.correction.importance import raw_weights
from rcdiag.correction.view import TokenView
from rcdiag.metrics.ragged import F64, Bool

Level = Literal["token", "sequence", "geometric"]


@dataclass(frozen=True)
class Ratio:
    """A framework's importance ratio: exp of ℓ per token, of S_i per row (``sequence``) or of
    S_i / max(n_i, 1) per row (``geometric``), the log ratio clamped to ±``clamp`` first when set
    (a row's sum or mean; with ``clamp_tokens`` each ℓ before the row's sum or mean instead)."""

    level: Level
    clamp: float | None = None
    clamp_tokens: bool = False

    @property
    def row_level(self) -> bool:
        return self.level != "token"


def row_log_ratio(view: TokenView, level: Level) -> F64:
    """S_i (``sequence``) or the row's masked mean of ℓ (``geometric``; 0 for an empty row)."""
    if level == "sequence":
        return view.seq_sum
    return view.memo(("row_mean_log_ratio",), lambda: view.row_mean(view.log_ratio))


def ratio_rows(view: TokenView, ratio: Ratio) -> F64:
    """The per-row ratio of a row-level :class:`Ratio` (1 for an empty row: exp of 0)."""

    def compute() -> F64:
        if ratio.clamp_tokens and ratio.clamp is not None:
            clipped = view.valid(np.clip(view.log_ratio, -ratio.clamp, ratio.clamp))
            x = view.row_sum(clipped)
            if ratio.level == "geometric":
                x = x / np.maximum(view.n, 1.0)
        else:
            x = row_log_ratio(view, ratio.level)
            if ratio.clamp is not None:
                x = np.clip(x, -ratio.clamp, ratio.clamp)
        with np.errstate(over="ignore"):
            return np.exp(x)

    return view.memo(("ext_ratio_rows", ratio), compute)


def ratio_tokens(view: TokenView, ratio: Ratio) -> F64:
    """The ratio on every valid token (a row ratio repeated over its row), 0 elsewhere."""
    shared = ratio.clamp == 20.0 and ratio.level != "geometric" and not ratio.clamp_tokens
    if shared:  # verl's clamp: share its arrays
        return view.memo(("raw_weights", ratio.level), lambda: raw_weights(view, ratio.level))

    def compute() -> F64:
        if ratio.row_level:
            return view.valid(view.broadcast(ratio_rows(view, ratio)))
        x = view.log_ratio
        if ratio.clamp is not None:
            x = np.clip(x, -ratio.clamp, ratio.clamp)
        with np.errstate(over="ignore"):
            return view.valid(np.exp(x))

    return view.memo(("ext_ratio", ratio), compute)


@dataclass(frozen=True)
class Band:
    """Where a ratio must lie, lo ≤ R ≤ hi (both inclusive)."""

    ratio: Ratio
    lo: float = 0.0
    hi: float = math.inf

    def inside_rows(self, view: TokenView) -> Bool:
        rows = ratio_rows(view, self.ratio)
        return (rows >= self.lo) & (rows <= self.hi)

    def inside(self, view: TokenView) -> Bool:
        """Per position: the ratio is inside the band (always true at invalid positions)."""

        def compute() -> Bool:
            if self.ratio.row_level:
                return view.or_invalid(view.broadcast(self.inside_rows(view)))
            r = ratio_tokens(view, self.ratio)
            return view.or_invalid((r >= self.lo) & (r <= self.hi))

        return view.memo(("ext_band", self), compute)

    def holds_every_token(self, view: TokenView) -> bool:
        """Whether every valid token's ratio lies inside the band: read from each row's extremes
        (once per ratio and batch), so the usual batch, well inside, needs no pass over the
        tokens. (A NaN extreme fails the test.)"""
        if self.ratio.row_level:
            return False
        r = ratio_tokens(view, self.ratio)
        return bool((view.valid_min(r) >= self.lo).all() and (view.valid_max(r) <= self.hi).all())


Bound = Literal["none", "truncate", "clip"]


@dataclass(frozen=True)
class Weights:
    """IS weights: the ratio R, bounded (``truncate``: min(R, hi); ``clip``: clamp to [lo, hi]) and
    set to 0 where one of the ``zero`` bands is left (IcePop, TRL's mask modes)."""

    ratio: Ratio
    bound: Bound = "none"
    lo: float = 0.0
    hi: float = math.inf
    zero: tuple[Band, ...] = ()

    def bounded(self, values: F64) -> F64:
        if self.bound == "truncate":
            return np.minimum(values, self.hi)
        if self.bound == "clip":
            return np.clip(values, self.lo, self.hi)
        return values

    def rows(self, view: TokenView) -> F64:
        """The applied weight of each row (row-level ratios only; an empty row's ratio is 1)."""

        def compute() -> F64:
            out = self.bounded(ratio_rows(view, self.ratio))
            for band in self.zero:
                if band.ratio.row_level:
                    out = np.where(band.inside_rows(view), out, 0.0)
            return out

        return view.memo(("ext_weight_rows", self), compute)

    def keeps_every_ratio(self, view: TokenView) -> bool:
        """Whether W = R at every valid token of a token-level ratio: no bound and no band cuts
        any (read from each row's extremes, once per ratio and batch)."""
        if self.ratio.row_level:
            return False
        bounds: tuple[Band, ...] = ()  # the bound as a band (truncation leaves R ≥ 0 as it is)
        if self.bound != "none":
            bounds = (Band(self.ratio, self.lo if self.bound == "clip" else 0.0, self.hi),)
        return all(band.holds_every_token(view) for band in (*bounds, *self.zero))

    def applied(self, view: TokenView) -> F64:
        """W on every valid token, 0 elsewhere."""

        def compute() -> F64:
            raw = ratio_tokens(view, self.ratio)
            if self.keeps_every_ratio(view):  # W = R: the same array (its sums are shared)
                return raw
            out = self.bounded(raw)
            if self.bound == "clip" and self.lo > 0:
                out = view.valid(out)  # the clip lifted invalid positions to lo
            for band in self.zero:
                if not band.holds_every_token(view):  # (invalid positions are 0 already)
                    out = np.where(band.inside(view), out, 0.0)
            return out

        return view.memo(("ext_weights", self), compute)


@dataclass(frozen=True)
class Veto:
    """A row holding a valid token with ℓ < log τ is dropped (the raw ℓ, no clamp)."""

    threshold: float

    def keep_rows(self, view: TokenView) -> Bool:
        return view.count_below(view.log_ratio, math.log(self.threshold)) == 0


@dataclass(frozen=True)
class OutlierRows:
    """A row holding a valid token whose ratio exp(clamp ℓ) lies below ``lo`` or above ``hi`` is
    dropped (SkyRL's outlier-token mask; None: no bound on that side)."""

    lo: float | None
    hi: float | None
    clamp: float | None = 20.0

    def keep_rows(self, view: TokenView) -> Bool:
        r = ratio_tokens(view, Ratio("token", self.clamp))
        out = np.zeros(r.size, dtype=bool)
        if self.lo is not None:
            out |= r < self.lo
        if self.hi is not None:
            out |= r > self.hi
        return view.count(out) == 0


@dataclass(frozen=True)
class MeanExpAbsRows:
    """A row whose mean of e^|ℓ| over its valid tokens exceeds the threshold is dropped (NeMo-RL's
    ``seq_logprob_error_threshold``; an empty row, 0, is kept)."""

    threshold: float

    def keep_rows(self, view: TokenView) -> Bool:
        return mean_exp_abs_rows(view) <= self.threshold


def mean_exp_abs_rows(view: TokenView) -> F64:
    """Per row the mean of e^|ℓ| over its valid tokens (0 for an empty row)."""

    def compute() -> F64:
        with np.errstate(over="ignore"):
            sums = view.row_sum(view.valid(np.exp(np.abs(view.log_ratio))))
        return np.where(view.nonempty, sums / np.maximum(view.n, 1.0), 0.0)

    return view.memo(("mean_exp_abs_rows",), compute)


class TokenRule(ABC):
    """A framework's own per-token rejection (frozen and hashable in a subclass)."""

    @abstractmethod
    def inside(self, view: TokenView) -> Bool:
        """Per position: the token is kept (True at invalid positions)."""


class RowRule(ABC):
    """A framework's own per-row rejection (frozen and hashable in a subclass)."""

    @abstractmethod
    def keep_rows(self, view: TokenView) -> Bool:
        """Per row: the row is kept."""


Rule = Band | Veto | OutlierRows | MeanExpAbsRows | TokenRule | RowRule


def keep_mask(view: TokenView, rules: tuple[Rule, ...]) -> Bool | None:
    """Per position: every rule keeps it (True at invalid positions); None when no rule can drop
    a token of the batch (no rules, or bands that every valid token lies in: read from each
    row's extremes, without a pass over the tokens)."""
    if not rules:
        return None

    def compute() -> Bool | None:
        keep = None
        for rule in rules:
            if isinstance(rule, Band) and rule.holds_every_token(view):
                continue
            if isinstance(rule, Band | TokenRule):
                kept = rule.inside(view)
            else:
                kept = view.or_invalid(view.broadcast(rule.keep_rows(view)))
            keep = kept if keep is None else keep & kept
        return keep

    return view.memo(("ext_keep", rules), compute)
