"""How numbers are shown to people: terminal tables, Markdown, JUnit messages and the report."""

from __future__ import annotations

import math


def fmt(value: float | None, digits: int = 4) -> str:
    """``digits`` significant digits; scientific below 1e-3 and from 1e5; ``–`` for null/NaN.

    Example:
        >>> fmt(0.000123456), fmt(1.5), fmt(442.43, 2), fmt(2.5e7, 2), fmt(None), fmt(float("inf"))
        ('1.235e-4', '1.5', '442', '2.5e7', '–', 'inf')
    """
    if value is None or math.isnan(value):
        return "–"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == 0:
        return "0"
    if 1e-3 <= abs(value) < 1e5:
        text = f"{value:.{digits}g}"
        if "e" in text:  # e.g. 442 with 2 digits → 4.4e+02: print the integer instead
            text = f"{value:.0f}"
        return text
    mantissa, exponent = f"{value:.{max(0, digits - 1)}e}".split("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


TINY_PERCENT = 1e-6
"""Percentages below this print as ``<0.000001%``."""


def pct(value: float | None, digits: int = 1) -> str:
    """A share as a percentage: ``0.9843`` → ``98.4%``; tiny nonzero shares keep one significant
    digit, written out in decimals (never ``5e-05%``), and below 1e-8 read ``<0.000001%``.

    Example:
        >>> pct(0.98431), pct(1.0), pct(0.99991), pct(0.00002), pct(5e-7), pct(1e-12), pct(None)
        ('98.4%', '100%', '99.99%', '0.002%', '0.00005%', '<0.000001%', '–')
    """
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    percent = 100.0 * value
    if percent == 100.0 or percent == 0.0:
        return f"{percent:.0f}%"
    if abs(percent) < TINY_PERCENT:
        return f"{'>-' if percent < 0 else '<'}{TINY_PERCENT:.6f}%"
    if abs(percent) < 0.1:
        rounded = float(f"{percent:.1g}")
        decimals = max(0, -math.floor(math.log10(abs(rounded))))
        return f"{rounded:.{decimals}f}%"
    text = f"{percent:.{digits}f}"
    while float(text) == 100.0 and digits < 4:  # 99.99% must not print as 100.0%
        digits += 1
        text = f"{percent:.{digits}f}"
    return f"{text}%"


def count(value: float | int | None) -> str:
    """An integer with thousands separators."""
    return "–" if value is None else f"{int(value):,}"


def short(value: float | None, digits: int = 2) -> str:
    """:func:`fmt` with two significant digits, for numbers inside sentences.

    Example:
        >>> short(3.198e-05), short(0.26811), short(442.43)
        ('3.2e-5', '0.27', '442')
    """
    return fmt(value, digits)
