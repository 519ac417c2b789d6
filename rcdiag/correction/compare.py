"""Dry-running many rollout-correction configurations over a dump in one streamed pass.

Every configuration is split into :class:`~rcdiag.correction.engine.Component` s; a component shared
by several configurations (the same IS level and band, the same criterion) is computed once per batch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rcdiag.correction.config import CorrectionPlan
from rcdiag.correction.engine import Component, Getter, Metrics
from rcdiag.correction.external import ExternalOutcome, ExternalPlan
from rcdiag.correction.importance import BatchNormalisation, Importance
from rcdiag.correction.outcome import Outcome, plan_components
from rcdiag.correction.view import TokenView
from rcdiag.metrics.grouped import GroupedStats, GroupIndex, Moments, add_all
from rcdiag.metrics.offpolicy import (
    DEFAULT_VETO_THRESHOLD,
    ROW_STATISTICS,
    VERL_OFFPOLICY_METRICS,
    offpolicy_metrics,
    row_statistics,
)
from rcdiag.metrics.ragged import F64, I64, RaggedBatch

SUMMARY_FIGURES: dict[str, str] = {
    "kept_token_share": "share of valid tokens the configuration keeps",
    "kept_sequence_share": "share of sequences (with a valid token) that lose no token",
    "rejected_sequence_share": "share of sequences with every valid token rejected",
    "weight_mass_removed": "Σ(R − W) / ΣR over kept tokens: IS weight removed by truncation or "
    "IcePop (a bias proxy; null without IS)",
    "ess": "Kish effective sample size (ΣW)² / (N·ΣW²) of the applied weights over kept tokens "
    "(1 without IS)",
    "max_weight": "largest applied weight on a kept token, after batch normalisation (null without IS)",
}
"""rcdiag's comparison figures (the ``summary`` object), and what each means."""

WORSE_WHEN_LOWER = {"kept_token_share", "kept_sequence_share", "ess"}


@dataclass(frozen=True)
class NamedConfig:
    """A configuration to compare: its name, its keys as given (verl's, or another framework's for
    an :class:`~rcdiag.correction.external.ExternalPlan`), and the parsed plan."""

    name: str
    config: Mapping[str, Any]
    plan: CorrectionPlan | ExternalPlan

    @property
    def framework(self) -> str:
        """``verl``, or the framework whose correction mode this is."""
        return self.plan.framework if isinstance(self.plan, ExternalPlan) else "verl"


STEP_FIGURES = (
    "kept_token_share",
    "kept_sequence_share",
    "rejected_sequence_share",
    "weight_mass_removed",
)
"""The summary figures :meth:`PresetComparison.step_figures` gives for every step at once."""


@dataclass
class _Tracked:
    component: Component
    index: GroupIndex
    stats: GroupedStats = field(init=False)

    def __post_init__(self) -> None:
        kinds = {**self.component.kinds, **self.component.run_kinds}
        self.stats = GroupedStats(kinds, self.index)


class _Finished:
    """The summed statistics of one :class:`GroupedStats` once a pass is over: the whole dump,
    and each step's (as dictionaries built once, or from a matrix when asked)."""

    def __init__(self, stats: GroupedStats, rows: bool) -> None:
        self.total = stats.total()
        self.slot_of = stats.index.slot_of
        self.names, matrix = stats.matrix()
        self.by_slot = np.ascontiguousarray(matrix.T)  # one contiguous row of values per step
        self.rows: dict[int, dict[str, float]] | None = None
        if rows:
            columns = self.by_slot.tolist()
            self.rows = {
                key: dict(zip(self.names, columns[slot], strict=True))
                for key, slot in self.slot_of.items()
            }

    def get(self, step: int | None) -> dict[str, float]:
        if step is None:
            return self.total
        if self.rows is not None:
            return self.rows[step]
        return dict(zip(self.names, self.by_slot[self.slot_of[step]].tolist(), strict=True))


class PresetComparison:
    """Streams batches through every configuration; then metrics and summaries per step and overall.

    ``summary_only`` configurations (sweep points) get :meth:`summary` (of the whole dump or of a
    step) and :meth:`step_figures` but not verl's metrics, so only their outcome (and a batch-norm
    factor) is computed: a handful of sums per step, held as matrices. ``base``: the per-row
    statistics of an analysis fed the same batches, shared instead of computed twice (the analysis
    adds each batch to them).

    Example:
        >>> import numpy as np
        >>> from rcdiag.correction.config import parse_config
        >>> plan = parse_config({"rollout_is": "token", "rollout_is_threshold": 2.0}, "latest")
        >>> c = PresetComparison([NamedConfig("tis", {}, plan)])
        >>> c.update(RaggedBatch(rollout=np.log([0.1, 0.5]), old=np.log([0.5, 0.5]),
        ...     mask=np.array([True, True]), offsets=np.array([0, 2]), steps=np.array([0])))
        >>> c.metrics("tis")["rollout_corr/rollout_is_mean"]  # (min(5, 2) + 1) / 2
        1.5
    """

    def __init__(
        self,
        configs: Sequence[NamedConfig],
        summary_only: Sequence[NamedConfig] = (),
        base: GroupedStats | None = None,
    ) -> None:
        names = [c.name for c in (*configs, *summary_only)]
        if len(set(names)) != len(names):
            raise ValueError(f"configuration names must be unique: {names}")
        self.configs = {c.name: c for c in (*configs, *summary_only)}
        self._owns_base = base is None
        self.base = GroupedStats(ROW_STATISTICS) if base is None else base
        self._tracked: dict[Component, _Tracked] = {}
        self._parts: dict[str, tuple[Component, ...]] = {}
        self._finished: dict[int, _Finished] = {}
        for c in configs:
            if isinstance(c.plan, ExternalPlan):
                self._track(c.name, c.plan.components())
            else:
                self._track(c.name, (*plan_components(c.plan), Outcome(c.plan)))
        for c in summary_only:  # a summary reads the outcome (and a batch-norm factor) only
            if isinstance(c.plan, ExternalPlan):
                self._track(c.name, (c.plan.outcome(),))
                continue
            plan = c.plan.importance
            normalises = plan is not None and plan.batch_normalize
            norm = (BatchNormalisation(plan, c.plan.dialect),) if plan and normalises else ()
            self._track(c.name, (*norm, Outcome(c.plan)))

    def _track(self, name: str, parts: tuple[Component, ...]) -> None:
        for part in parts:  # a component shared by several configurations is computed once
            if part not in self._tracked:
                self._tracked[part] = _Tracked(part, self.base.index)
        self._parts[name] = parts

    def update(self, batch: RaggedBatch, view: TokenView | None = None) -> None:
        """Fold one batch into every configuration's statistics (``view``: the batch's shared
        :class:`~rcdiag.correction.view.TokenView`, when another consumer holds one)."""
        if batch.rows == 0:
            return
        self._finished.clear()
        view = view or TokenView(batch)
        if self._owns_base:  # else the analysis that shares its statistics adds the batch
            slots = self.base.slots_for(batch.steps)
            self.base.add(slots, row_statistics(batch, view.log_ratio, DEFAULT_VETO_THRESHOLD))
        rows, runs = batch.steps, view.runs[1]
        additions: list[tuple[GroupedStats, I64, Mapping[str, F64 | Moments]]] = []
        for tracked in self._tracked.values():
            stats, component = tracked.stats, tracked.component
            additions.append((stats, stats.slots_for(rows), component.row_stats(view)))
            if component.run_kinds:
                additions.append((stats, stats.slots_for(runs), component.run_stats(view)))
        add_all(additions)  # the sums of all configurations over the same rows in one reduction

    def merge(self, other: PresetComparison) -> None:
        """Fold in a comparison of other rows of the same dump with the same configurations.
        A shared ``base`` is merged by its owner (the analysis), not here."""
        if other._parts.keys() != self._parts.keys():
            raise ValueError("cannot merge comparisons of different configurations")
        self._finished.clear()
        if self._owns_base:
            self.base.merge(other.base)
        for component, tracked in other._tracked.items():
            self._tracked[component].stats.merge(tracked.stats)

    def consume(self, batches: Iterable[RaggedBatch]) -> PresetComparison:
        for batch in batches:
            self.update(batch)
        return self

    def steps(self) -> list[int]:
        return self.base.keys()

    def _stats(self, stats: GroupedStats, step: int | None) -> dict[str, float]:
        """Summed statistics of one step or (None) the whole dump; computed once, then reused.

        The base statistics (read by every configuration at every step) are kept as one
        dictionary per step; a component's as a matrix, each step's dictionary built when asked,
        so that memory stays at 8 bytes a value with many steps and configurations.
        """
        finished = self._finished.get(id(stats))
        if finished is None:
            finished = self._finished[id(stats)] = _Finished(stats, rows=stats is self.base)
        return finished.get(step)

    def _base(self, step: int | None) -> dict[str, float]:
        return self._stats(self.base, step)

    def _getter(self, component: Component, step: int | None, base: dict[str, float]) -> Getter:
        own = self._stats(self._tracked[component].stats, step)

        def get(name: str) -> float:
            return own[name] if name in own else base[name]

        return get

    def metrics(self, name: str, step: int | None = None) -> Metrics:
        """Every metric verl logs for configuration ``name`` on one step (or the whole dump).

        All values are None for a step without valid tokens (verl raises on such a batch).
        """
        base = self._base(step)
        metrics: Metrics = {}
        if not isinstance(self.configs[name].plan, ExternalPlan):  # verl logs its own first
            offpolicy = offpolicy_metrics(base)
            metrics = {k: offpolicy[k] for k in VERL_OFFPOLICY_METRICS}
        if base["valid_tokens"] == 0:
            names = self.metrics(name, None) if step is not None else {}
            return dict.fromkeys(names)
        for part in self._parts[name]:
            metrics.update(part.metrics(self._getter(part, step, base)))
        return metrics

    def summary(self, name: str, step: int | None = None) -> dict[str, float | None]:
        """rcdiag's comparison figures (:data:`SUMMARY_FIGURES`) for one configuration."""
        base = self._base(step)
        valid, nonempty = base["valid_tokens"], base["nonempty_rows"]
        if valid == 0:
            return dict.fromkeys(SUMMARY_FIGURES)
        config = self.configs[name]
        if isinstance(config.plan, ExternalPlan):
            return self._external_summary(config.plan.outcome(), step, base)
        get = self._getter(Outcome(config.plan), step, base)
        kept = get("kept")
        figures = kept_figures(get, valid, nonempty)
        if kept == 0:
            return figures
        if config.plan.importance is None:
            figures["ess"] = 1.0
            return figures
        raw, applied = get("kept_raw"), get("kept_applied")
        figures["weight_mass_removed"] = (raw - applied) / raw if raw > 0 else 0.0
        squares = get("kept_applied_sq")
        figures["ess"] = applied * applied / (kept * squares) if squares > 0 else math.nan
        importance = Importance(config.plan.importance, config.plan.dialect)
        mu = 1.0
        if config.plan.importance.batch_normalize:
            norm: Component = importance
            if importance not in self._tracked:  # a sweep point tracks μ's statistics alone
                norm = BatchNormalisation(config.plan.importance, config.plan.dialect)
            mu = importance.batch_norm_factor(self._getter(norm, step, base))
        figures["max_weight"] = get("kept_applied_max") / mu
        return figures

    def step_figures(self, name: str) -> tuple[I64, dict[str, F64]]:
        """The kept shares and the IS weight mass truncated (:data:`STEP_FIGURES`) of
        configuration ``name`` at every step at once: the steps in order and one array per figure
        over them (NaN where :meth:`summary` has none: a step without a valid token or a kept
        one, a configuration without IS or of another framework); :meth:`summary`'s formulas,
        vectorised over the steps."""
        config = self.configs[name]
        plan = config.plan
        outcome = plan.outcome() if isinstance(plan, ExternalPlan) else Outcome(plan)
        stats = self._tracked[outcome].stats
        steps, valid = self.base.column("valid_tokens")
        nonempty = self.base.column("nonempty_rows")[1]
        has = valid > 0

        def share(part: F64, whole: F64) -> F64:
            return np.divide(part, whole, out=np.full(steps.size, math.nan), where=has)

        kept, rejected, emptied = (
            stats.column(n)[1] for n in ("kept", "rejected_rows", "fully_rejected_rows")
        )
        figures = {
            "kept_token_share": share(kept, valid),
            "kept_sequence_share": share(nonempty - rejected, nonempty),
            "rejected_sequence_share": share(emptied, nonempty),
            "weight_mass_removed": np.full(steps.size, math.nan),
        }
        if not isinstance(plan, ExternalPlan) and plan.importance is not None:
            raw, applied = (stats.column(n)[1] for n in ("kept_raw", "kept_applied"))
            removed = np.divide(raw - applied, raw, out=np.zeros(steps.size), where=raw > 0)
            figures["weight_mass_removed"] = np.where(has & (kept > 0), removed, math.nan)
        return steps, figures

    def _external_summary(
        self, outcome: ExternalOutcome, step: int | None, base: dict[str, float]
    ) -> dict[str, float | None]:
        """The figures of another framework's mode, as for verl's (weights there may be ∞)."""
        get = self._getter(outcome, step, base)
        kept = get("kept")
        figures = kept_figures(get, base["valid_tokens"], base["nonempty_rows"])
        if kept == 0:
            return figures
        if outcome.plan.weights is None:
            figures["ess"] = 1.0
            return figures
        raw, applied, squares = get("kept_raw"), get("kept_applied"), get("kept_applied_sq")
        if math.isinf(raw) and math.isfinite(applied):
            figures["weight_mass_removed"] = 1.0  # an overflowing ratio lost all its mass
        else:
            figures["weight_mass_removed"] = (raw - applied) / raw if raw > 0 else 0.0
        figures["ess"] = applied * applied / (kept * squares) if squares > 0 else math.nan
        figures["max_weight"] = get("kept_applied_max") / outcome.normalisation(get)
        return figures


def kept_figures(get: Getter, valid: float, nonempty: float) -> dict[str, float | None]:
    """The shares of tokens and sequences a configuration keeps; the weight figures left None
    (filled by the caller when the configuration has IS and keeps a token)."""
    return {
        "kept_token_share": get("kept") / valid,
        "kept_sequence_share": (nonempty - get("rejected_rows")) / nonempty,
        "rejected_sequence_share": get("fully_rejected_rows") / nonempty,
        "weight_mass_removed": None,
        "ess": None,
        "max_weight": None,
    }


def worst_steps(step_summaries: Sequence[tuple[int, Mapping[str, float | None]]]) -> dict[str, Any]:
    """For each summary figure, the step where it is worst and its value there."""
    worst: dict[str, Any] = {}
    for figure in SUMMARY_FIGURES:
        present: list[tuple[int, float]] = []
        for step, values in step_summaries:
            x = values.get(figure)
            if x is not None and not math.isnan(x):
                present.append((step, x))
        if not present:
            worst[figure] = None
            continue
        lower_is_worse = figure in WORSE_WHEN_LOWER
        at, value = (min if lower_is_worse else max)(present, key=lambda p: p[1])
        worst[figure] = {"step": at, "value": value}
    return worst
