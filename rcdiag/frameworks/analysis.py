"""Streaming the frameworks' logged metrics beside the analysis (``analyze --frameworks``).

Each framework's metrics are components (:mod:`rcdiag.frameworks.base`); their per-row statistics
are summed per step in groups sharing the analysis's step index, and their formulas read the
analysis's own row statistics too. Per step and overall come from one formula, as for verl's.
"""

from __future__ import annotations

from collections.abc import Sequence

from rcdiag.assess.registry import judge_frameworks
from rcdiag.correction.engine import Component, Metrics, TokenView
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

    def _metrics(self, framework: Framework, step: int | None) -> Metrics:
        base = self.base.total() if step is None else self.base.group(step)
        out: Metrics = {}
        for part in framework.metrics:
            stats = self._stats[part]
            own = stats.total() if step is None else stats.group(step)

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
        out = []
        for framework in self.frameworks:
            overall = self._metrics(framework, None)
            out.append(
                FrameworkResult(
                    framework=framework.id,
                    title=framework.title,
                    overall=overall,
                    steps=tuple(FrameworkStep(s, self._metrics(framework, s)) for s in steps),
                    checks=tuple(judge_frameworks(overall)),
                )
            )
        return tuple(out)
