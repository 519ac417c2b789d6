"""Streaming the frameworks' logged metrics beside the analysis (``analyze --frameworks``).

Each framework's metrics are components (:mod:`rcdiag.frameworks.base`); their per-row statistics
are summed per step in groups sharing the analysis's step index, and their formulas read the
analysis's own row statistics too. Per step and overall come from one formula, as for verl's.
"""

from __future__ import annotations

from collections.abc import Sequence

from rcdiag.assess.judge import judge_frameworks
from rcdiag.correction.engine import Component, Metrics
from rcdiag.correction.view import TokenView
from rcdiag.frameworks.base import Framework
from rcdiag.metrics.grouped import GroupedStats
from rcdiag.metrics.ragged import RaggedBatch
from rcdiag.model.frameworks import FrameworkResult, FrameworkStep


class FrameworkMetrics:
    """Accumulates batches for the chosen frameworks' metrics.

    Args:
        frameworks: the frameworks.
        base: the analysis's per-row statistics (fed the same batches by the analysis).
    """

    def __init__(self, frameworks: Sequence[Framework], base: GroupedStats) -> None:
        self.frameworks = list(frameworks)
        self.base = base
        self._stats: dict[Component, GroupedStats] = {}
        for framework in self.frameworks:
            for part in framework.metrics:
                if part not in self._stats:
                    self._stats[part] = GroupedStats(part.kinds, base.index)

    def update(self, batch: RaggedBatch, view: TokenView | None = None) -> None:
        """Fold one batch in (``view``: the batch's shared view, when another consumer has one)."""
        if batch.rows == 0:
            return
        view = view or TokenView(batch)
        for part, stats in self._stats.items():
            if part.kinds:
                stats.add(stats.slots_for(batch.steps), part.row_stats(view))

    def merge(self, other: FrameworkMetrics) -> None:
        """Fold in the statistics of other rows of the same dump (the shared base is merged by
        the analysis that owns it)."""
        for part, stats in other._stats.items():
            self._stats[part].merge(stats)

    def _metrics(
        self,
        framework: Framework,
        base: dict[str, float],
        own_of: dict[Component, dict[str, float]],
    ) -> Metrics:
        out: Metrics = {}
        for part in framework.metrics:
            own = own_of[part]

            def get(name: str, own: dict[str, float] = own) -> float:
                return own[name] if name in own else base[name]

            if base["valid_tokens"] == 0:  # null metrics, as verl's on such a batch
                out.update(dict.fromkeys(part.metrics(lambda name: 1.0)))
            else:
                out.update(part.metrics(get))
        return out

    def results(self) -> tuple[FrameworkResult, ...]:
        """Every framework's metrics overall and per step, with the registry's statuses."""
        steps = self.base.keys()
        base_steps = self.base.groups()  # one sweep per statistic, not one read per step
        own_steps = {part: stats.groups() for part, stats in self._stats.items()}
        base_total = self.base.total()
        own_total = {part: stats.total() for part, stats in self._stats.items()}
        out = []
        for framework in self.frameworks:
            overall = self._metrics(framework, base_total, own_total)
            per_step = tuple(
                FrameworkStep(
                    s,
                    self._metrics(
                        framework,
                        base_steps[s],
                        {p: own_steps[p].get(s, {}) for p in framework.metrics},
                    ),
                )
                for s in steps
            )
            out.append(
                FrameworkResult(
                    framework=framework.id,
                    title=framework.title,
                    overall=overall,
                    steps=per_step,
                    checks=tuple(judge_frameworks(overall)),
                    aggregation=framework.aggregation,
                )
            )
        return tuple(out)
