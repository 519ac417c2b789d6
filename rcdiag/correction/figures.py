"""The figures rcdiag gives for what a correction configuration does to a dump (docs/correction.md):
what each means, which way is worse, and how they are computed from summed statistics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rcdiag.correction.columns import Columns
from rcdiag.correction.engine import Getter

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

STEP_FIGURES = (
    "kept_token_share",
    "kept_sequence_share",
    "rejected_sequence_share",
    "weight_mass_removed",
)
"""The summary figures :meth:`PresetComparison.step_figures` gives for every step at once."""


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


def worst_steps(steps: Sequence[int], figures: Columns) -> dict[str, Any]:
    """For each summary figure, the first step where it is worst (lowest or highest, NaN and
    undefined values left out) and its value there; None where no step has a value."""
    worst: dict[str, Any] = {}
    for figure in SUMMARY_FIGURES:
        row = figures.names.index(figure)
        values = figures.values[row]
        candidates = np.flatnonzero(figures.defined[row] & ~np.isnan(values))
        if not candidates.size:
            worst[figure] = None
            continue
        picked = values[candidates]
        at = candidates[np.argmin(picked) if figure in WORSE_WHEN_LOWER else np.argmax(picked)]
        worst[figure] = {"step": int(steps[at]), "value": float(values[at])}
    return worst
