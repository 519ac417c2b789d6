"""What a framework entry holds: where its code is, the metrics it logs, its correction modes and the
translation of a verl configuration into its own keys (docs/frameworks.md).

A framework's logged metrics are :class:`~rcdiag.correction.engine.Component` s: per-row sufficient
statistics summed (or maximised) per step, finished by a formula, exactly as verl's metrics are. The
getter they receive also reads the analysis's own per-row statistics
(:data:`~rcdiag.metrics.offpolicy.ROW_STATISTICS`: ``abs_log_ratio``, ``k3``, ``log_ratio``, …).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rcdiag.correction.engine import Component
from rcdiag.correction.external import Ratio, ratio_tokens
from rcdiag.correction.modes import ExternalPlan
from rcdiag.correction.view import TokenView
from rcdiag.metrics.ragged import F64


@dataclass(frozen=True)
class Pin:
    """The repository, branch and commit (with its date) every formula, name, default and key of a
    framework entry was read from; generated configurations name it (:attr:`version`)."""

    repo: str
    branch: str
    commit: str
    date: str
    """The commit's date, ``YYYY-MM-DD`` (a release: the date its files were built)."""
    release: str | None = None
    """Set where the source read is a published release newer than the branch's mirrored head
    (its version on PyPI); ``commit`` then names the release, not a commit."""

    @property
    def version(self) -> str:
        """``<repo name> <branch>, YYYY-MM (<short commit>)``, e.g. ``slime main, 2026-08 (624b824)``,
        or ``<repo name> <release> (PyPI), YYYY-MM`` for a release."""
        name = self.repo.split("/")[-1]
        if self.release is not None:
            return f"{name} {self.release} (PyPI), {self.date[:7]}"
        return f"{name} {self.branch}, {self.date[:7]} ({self.commit[:7]})"


@dataclass(frozen=True)
class Source:
    """A file of the framework's own repository that rcdiag's formulas were read from."""

    repo: str
    path: str
    commit: str | None
    what: str


@dataclass(frozen=True)
class Preset:
    """One of the framework's correction modes with its defaults: the framework's own keys (as a
    user writes them) and the plan rcdiag dry-runs."""

    name: str
    purpose: str
    config: Mapping[str, Any]
    plan: ExternalPlan
    implemented: str
    """How rcdiag runs it: its own components, or which verl arrays it shares (docs)."""


@dataclass(frozen=True)
class Translation:
    """A verl configuration in a framework's keys (:mod:`rcdiag.frameworks.translate`)."""

    config: dict[str, Any]
    snippet: str
    notes: tuple[str, ...]
    exact: bool
    version: str = ""
    """The framework version the keys are for (:attr:`Pin.version`); the snippet names it too."""

    def to_json(self) -> dict[str, Any]:
        return {
            "config": {k: list(v) if isinstance(v, tuple) else v for k, v in self.config.items()},
            "snippet": self.snippet,
            "notes": list(self.notes),
            "exact": self.exact,
            "version": self.version,
        }


@dataclass(frozen=True)
class Framework:
    """One framework of the metric Rosetta.

    Attributes:
        id: the name given to ``--frameworks`` / ``--framework`` (``trl``, ``nemo_rl``, …).
        title: how the framework writes its name.
        sources: the files its formulas were read from.
        metrics: the components of the mismatch metrics it logs (``analyze --frameworks``).
        aggregation: how a step's value maps onto the framework's batch, in words.
        presets: its correction modes with their defaults (``compare-presets --framework``).
        pin: the commit of the framework's main branch all of it was read from.
        presets: its correction modes with their defaults (``compare-presets --framework``).
        aliases: other spellings accepted on the command line.
    """

    id: str
    title: str
    sources: tuple[Source, ...]
    metrics: tuple[Component, ...]
    aggregation: str
    pin: Pin
    presets: tuple[Preset, ...] = ()
    aliases: tuple[str, ...] = field(default=())


# ----------------------------------------------------------------------------------------------
# Token arrays the frameworks' metrics share (memoised on the batch's view)


def abs_log_ratio(view: TokenView) -> F64:
    """|ℓ| on every position (0 where invalid)."""
    return view.memo(("abs_log_ratio",), lambda: np.abs(view.log_ratio))


def rho(view: TokenView) -> F64:
    """ρ = exp(ℓ), unclamped, on valid tokens (0 elsewhere)."""
    return ratio_tokens(view, Ratio("token"))


def prefixed(framework_id: str, metrics: Mapping[str, float | None]) -> dict[str, float | None]:
    """``name`` → ``<framework>/name``."""
    return {f"{framework_id}/{name}": value for name, value in metrics.items()}
