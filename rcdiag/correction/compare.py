"""Dry-running many rollout-correction configurations over a dump in one streamed pass.

Every configuration is split into :class:`~rcdiag.correction.engine.Component` s; a component shared
by several configurations (the same IS level and band, the same criterion) is computed once per batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rcdiag.correction.columns import Columns, GetterMapping, Partial, as_column, stack_columns
from rcdiag.correction.config import CorrectionPlan
from rcdiag.correction.engine import Component, Getter, Metrics
from rcdiag.correction.figures import kept_figures
from rcdiag.correction.importance import BatchNormalisation, Importance
from rcdiag.correction.modes import ExternalOutcome, ExternalPlan
from rcdiag.correction.outcome import Outcome, plan_components
from rcdiag.correction.view import TokenView
from rcdiag.metrics.grouped import GroupedStats, GroupIndex, Moments, add_all
from rcdiag.metrics.offpolicy import (
    DEFAULT_VETO_THRESHOLD,
    ROW_STATISTICS,
    row_statistics,
    verl_offpolicy_metrics,
)
from rcdiag.metrics.ragged import F64, I64, Bool, RaggedBatch
from rcdiag.metrics.token_sums import token_pieces


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


@dataclass
class _Tracked:
    component: Component
    index: GroupIndex
    stats: GroupedStats = field(init=False)

    def __post_init__(self) -> None:
        kinds = {**self.component.kinds, **self.component.run_kinds}
        self.stats = GroupedStats(kinds, self.index)


class _Finished:
    """The summed statistics of one :class:`GroupedStats` once a pass is over, as columns: each
    statistic's value at every step (one float64 array, steps in increasing order) and over the
    whole dump (a 1-array); figures are then computed for all steps at once."""

    def __init__(self, stats: GroupedStats, order: I64 | None) -> None:
        names, matrix = stats.matrix()
        self.steps = {} if order is None else dict(zip(names, matrix[:, order], strict=True))
        total = stats.total()
        self.whole = {name: np.array([total[name]]) for name in names}
        self._lists: dict[str, list[float]] = {}

    def scalars(self, name: str) -> list[float]:
        """A statistic at every step as Python floats (for formulas written for one value)."""
        values = self._lists.get(name)
        if values is None:
            values = self._lists[name] = self.steps[name].tolist()
        return values


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
        self._tables: dict[Any, Any] = {}  # figures computed from the finished statistics
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
        self._tables.clear()
        view = view or TokenView(batch)
        if self._owns_base:  # else the analysis that shares its statistics adds the batch
            slots = self.base.slots_for(batch.steps)
            self.base.add(slots, row_statistics(batch, view.log_ratio, DEFAULT_VETO_THRESHOLD))
        rows, runs = batch.steps, view.runs[1]
        additions: list[tuple[GroupedStats, I64, Mapping[str, F64 | Moments]]] = []
        long_batch = len(token_pieces(int(batch.offsets[-1]))) > 1  # a very long response
        for tracked in self._tracked.values():
            if long_batch:
                view.forget()  # its token arrays are recomputed, not all held (view.forget)
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
        self._tables.clear()
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

    def _done(self, stats: GroupedStats) -> _Finished:
        """The finished statistics of ``stats`` (built once after the pass, then reused)."""
        finished = self._finished.get(id(stats))
        if finished is None:
            order = None
            if stats.index is self.base.index:  # kept per step: columns in increasing step order
                order = np.argsort(
                    np.asarray(self.base.index.key_of, dtype=np.int64), kind="stable"
                )
            finished = self._finished[id(stats)] = _Finished(stats, order)
        return finished

    def _columns(self, stats: GroupedStats, whole: bool) -> dict[str, F64]:
        finished = self._done(stats)
        return finished.whole if whole else finished.steps

    def _getter(self, component: Component | None, whole: bool, at: int | None) -> Getter:
        """Reads the summed statistics of ``component`` (None: the base's alone), falling back to
        the base's: as arrays over every step (or the whole dump) when ``at`` is None, else as
        the Python float at point ``at``, for formulas written for one value."""
        base = self._columns(self.base, whole)
        own = base if component is None else self._columns(self._tracked[component].stats, whole)
        if at is None:
            return lambda name: own[name] if name in own else base[name]
        if whole:
            return lambda name: float((own[name] if name in own else base[name])[0])
        base_done = self._done(self.base)
        own_done = base_done if component is None else self._done(self._tracked[component].stats)

        def get(name: str) -> float:
            return (own_done if name in own else base_done).scalars(name)[at]

        return get

    def _evaluate(
        self,
        compute: Callable[[Callable[[Component | None], Getter]], Mapping[str, Any]],
        vectorised: bool,
        whole: bool,
    ) -> dict[str, tuple[F64, Bool]]:
        """The figures ``compute`` gives from getters of the components' statistics, at every
        step (or the whole dump): in one call over arrays when its formulas are ``vectorised``,
        else once per step."""
        size = 1 if whole else len(self.base.index.key_of)
        if vectorised:
            with np.errstate(all="ignore"):  # the steps without a valid token are dropped
                out = compute(lambda c: self._getter(c, whole, None))
            return {k: as_column(v, size) for k, v in out.items()}

        def at(j: int) -> Callable[[Component | None], Getter]:
            return lambda c: self._getter(c, whole, j)

        points = [compute(at(j)) for j in range(size)]
        names = dict.fromkeys(k for p in points for k in p)
        return {k: as_column([p.get(k) for p in points], size) for k in names}

    def _present(self, whole: bool) -> Bool:
        """The points (steps, or the whole dump) with a valid token: verl raises elsewhere."""
        return self._columns(self.base, whole)["valid_tokens"] != 0

    def metric_columns(self, name: str, whole: bool = False) -> Columns:
        """Every metric verl logs for configuration ``name`` at every step, in increasing step
        order (or over the whole dump); none is defined at a step without a valid token."""
        key = ("metrics", name, whole)
        table = self._tables.get(key)
        if table is not None:
            return table
        out: dict[str, tuple[F64, Bool]] = {}
        if not isinstance(self.configs[name].plan, ExternalPlan):  # verl logs its own first
            verl = self._evaluate(
                lambda g: verl_offpolicy_metrics(GetterMapping(g(None))), True, whole
            )
            out.update(verl)
        for part in self._parts[name]:
            out.update(self._evaluate(_metrics_of(part), part.vectorised, whole))
        table = self._tables[key] = stack_columns(out, self._present(whole))
        return table

    def summary_columns(self, name: str, whole: bool = False) -> Columns:
        """rcdiag's comparison figures (:data:`~rcdiag.correction.figures.SUMMARY_FIGURES`)
        for configuration ``name`` at every step, in increasing step order (or over the whole
        dump)."""
        key = ("summary", name, whole)
        table = self._tables.get(key)
        if table is not None:
            return table
        plan = self.configs[name].plan
        if isinstance(plan, ExternalPlan):
            outcome = plan.outcome()
            figures = self._evaluate(
                lambda g: self._external_summary(outcome, g(outcome), g(None)), False, whole
            )
        else:
            verl_plan = plan
            figures = self._evaluate(lambda g: self._summary(verl_plan, g), True, whole)
        table = self._tables[key] = stack_columns(figures, self._present(whole))
        return table

    def _position(self, step: int) -> int:
        """The position of ``step`` among the steps in increasing order."""
        positions: dict[int, int] | None = self._tables.get("positions")
        if positions is None:
            positions = self._tables["positions"] = {s: j for j, s in enumerate(self.steps())}
        return positions[step]

    def metrics(self, name: str, step: int | None = None) -> Metrics:
        """Every metric verl logs for configuration ``name`` on one step (or the whole dump).

        All values are None for a step without valid tokens (verl raises on such a batch).
        """
        if step is None:
            return self.metric_columns(name, whole=True).point(0)
        return self.metric_columns(name).point(self._position(step))

    def summary(self, name: str, step: int | None = None) -> dict[str, float | None]:
        """rcdiag's comparison figures (:data:`~rcdiag.correction.figures.SUMMARY_FIGURES`)
        for one configuration."""
        if step is None:
            return self.summary_columns(name, whole=True).point(0)
        return self.summary_columns(name).point(self._position(step))

    def _summary(
        self, plan: CorrectionPlan, getter: Callable[[Component | None], Getter]
    ) -> dict[str, Any]:
        """The figures of a verl configuration over arrays of statistics (one value per step):
        the weight figures are undefined where it keeps no token (and without IS, but ``ess``)."""
        get = getter(Outcome(plan))
        kept = get("kept")
        figures: dict[str, Any] = kept_figures(get, get("valid_tokens"), get("nonempty_rows"))
        keeps = kept != 0
        if plan.importance is None:
            figures["ess"] = Partial(1.0, keeps)
            return figures
        raw, applied = get("kept_raw"), get("kept_applied")
        figures["weight_mass_removed"] = Partial(
            np.where(raw > 0, (raw - applied) / raw, 0.0), keeps
        )
        squares = get("kept_applied_sq")
        ess = np.where(squares > 0, applied * applied / (kept * squares), math.nan)
        figures["ess"] = Partial(ess, keeps)
        importance = Importance(plan.importance, plan.dialect)
        mu: Any = 1.0
        if plan.importance.batch_normalize:
            norm: Component = importance
            if importance not in self._tracked:  # a sweep point tracks μ's statistics alone
                norm = BatchNormalisation(plan.importance, plan.dialect)
            mu = importance.batch_norm_factor(getter(norm))
        figures["max_weight"] = Partial(get("kept_applied_max") / mu, keeps)
        return figures

    def step_figures(self, name: str) -> tuple[I64, dict[str, F64]]:
        """The kept shares and the IS weight mass truncated
        (:data:`~rcdiag.correction.figures.STEP_FIGURES`) of configuration ``name`` at every step
        at once: the steps in order and one array per figure over them (NaN where
        :meth:`summary` has none: a step without a valid token or a kept one, a configuration
        without IS or of another framework); :meth:`summary`'s formulas, vectorised over the
        steps."""
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
        self, outcome: ExternalOutcome, get: Getter, base: Getter
    ) -> dict[str, float | None]:
        """The figures of another framework's mode at one point, as for verl's (weights there may
        be ∞)."""
        kept = get("kept")
        figures = kept_figures(get, base("valid_tokens"), base("nonempty_rows"))
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


def _metrics_of(
    part: Component,
) -> Callable[[Callable[[Component | None], Getter]], Mapping[str, Any]]:
    """What :meth:`PresetComparison._evaluate` computes for one part's metrics."""
    return lambda getter: part.metrics(getter(part))
