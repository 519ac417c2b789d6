"""Which metric names a run will produce, known before reading the dump.

The names depend on the dialect, the options and the configurations, not on the data, so folding a
one-token probe batch through the same accumulators gives them at once: a misspelt rule fails in
milliseconds instead of after a pass over a large dump. The command validates again against the real
documents afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rcdiag.correction.compare import NamedConfig, PresetComparison
from rcdiag.metrics.analysis import AnalyzeOptions, OffPolicyAnalysis
from rcdiag.metrics.ragged import RaggedBatch


def _probe() -> RaggedBatch:
    return RaggedBatch(
        rollout=np.array([-1.0]),
        old=np.array([-1.1]),
        mask=np.array([True]),
        offsets=np.array([0, 1]),
        steps=np.array([0]),
    )


def analysis_metric_names(options: AnalyzeOptions) -> tuple[str, ...]:
    """The keys of the analyze document's ``overall`` for these options.

    Example:
        >>> names = analysis_metric_names(AnalyzeOptions())
        >>> "rollout_corr/ppl_ratio" in names, "rollout_corr/rollout_is_veto_fraction" in names
        (True, False)
    """
    analysis = OffPolicyAnalysis(options)
    analysis.update(_probe())
    return tuple(analysis.overall())


def preset_metric_names(configs: Sequence[NamedConfig]) -> dict[str, tuple[str, ...]]:
    """For each configuration, the keys of its ``overall`` in the compare-presets document."""
    if not configs:
        return {}
    comparison = PresetComparison(configs)
    with np.errstate(all="ignore"):
        comparison.update(_probe())
        return {c.name: tuple(comparison.metrics(c.name)) for c in configs}
