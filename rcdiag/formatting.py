"""How numbers are shown to people (terminal tables, Markdown, reports)."""

from __future__ import annotations

import math


def fmt(value: float | None) -> str:
    """4 significant digits; scientific when small or large; ``–`` for null.

    Example:
        >>> fmt(0.000123456), fmt(1.5), fmt(None), fmt(float("inf"))
        ('1.235e-04', '1.5', '–', 'inf')
    """
    if value is None or math.isnan(value):
        return "–"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == 0:
        return "0"
    if 1e-3 <= abs(value) < 1e5:
        return f"{value:.4g}"
    return f"{value:.3e}"
