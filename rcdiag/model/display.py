"""How a result shows itself in a terminal and a notebook: a short ``repr`` and, through a
registered renderer, ``_repr_html_`` and ``_repr_markdown_`` (docs/python-api.md, "In a
notebook").

The ``repr`` of every top-level result (:class:`~rcdiag.model.AnalysisResult`,
:class:`~rcdiag.model.ComparisonResult`, :class:`~rcdiag.model.ReportDocument`,
:class:`~rcdiag.model.CheckResult`, :class:`~rcdiag.model.Baseline`,
:class:`~rcdiag.model.Recommendation`) is one line under :data:`REPR_LIMIT` characters: what it is,
the verdict, the sizes. The rich forms are drawn by the renderer :mod:`rcdiag.report.notebook`,
which registers itself here when :mod:`rcdiag.api` is imported (this layer holds data and imports
no renderer); without one, a notebook falls back on the ``repr``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal

Form = Literal["html", "markdown"]
"""What a renderer draws: ``html`` (``_repr_html_``) or ``markdown`` (``_repr_markdown_``)."""

REPR_LIMIT = 1000
"""The most characters a result's ``repr`` has."""

_RENDERERS: dict[str, Callable[[Any], str]] = {}


def register(form: Form, renderer: Callable[[Any], str]) -> None:
    """Draw every result's ``form`` with ``renderer(result)``."""
    _RENDERERS[form] = renderer


def clipped(text: str, limit: int = REPR_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, ending in ``…>`` when cut.

    Example:
        >>> clipped("<" + "x" * 20 + ">", 10)
        '<xxxxxxx…>'
    """
    return text if len(text) <= limit else text[: limit - 2] + "…>"


def listed(names: Iterable[str], most: int = 4) -> str:
    """A few names, comma-separated, with ``+N`` for the rest.

    Example:
        >>> listed(["a", "b", "c"], 2), listed([])
        ('a, b +1', '–')
    """
    names = list(names)
    if not names:
        return "–"
    head = ", ".join(names[:most])
    return head if len(names) <= most else f"{head} +{len(names) - most}"


class Displayed:
    """The display of a top-level result (a dataclass declared with ``repr=False``, so that this
    ``__repr__`` is kept); its ``repr`` parts come from :data:`SUMMARIES`."""

    __slots__ = ()

    def __repr__(self) -> str:
        name = type(self).__name__
        return clipped(f"<{name} {' · '.join(SUMMARIES[name](self))}>")

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))

    def _repr_html_(self) -> str | None:
        renderer = _RENDERERS.get("html")
        return None if renderer is None else renderer(self)

    def _repr_markdown_(self) -> str | None:
        renderer = _RENDERERS.get("markdown")
        return None if renderer is None else renderer(self)


def sizes(steps: int, rows: int, valid_tokens: int) -> str:
    """``3 steps, 48 rows, 1,234 valid tokens``."""
    return f"{steps:,} steps, {rows:,} rows, {valid_tokens:,} valid tokens"


def _verdict(diagnosis: Any) -> str:
    if diagnosis is None:
        return "verdict –"
    causes = [c.id for c in diagnosis.causes]
    return f"verdict {diagnosis.verdict}" + (f" ({listed(causes, 3)})" if causes else "")


def _source(source: Any) -> str:
    return sizes(source.steps, source.rows, source.valid_tokens)


def _analysis(result: Any) -> list[str]:
    return [
        result.dialect,
        _verdict(result.diagnosis),
        _source(result.source),
        f"{len(result.overall)} metrics",
    ]


def _comparison(result: Any) -> list[str]:
    parts = [result.dialect, _verdict(result.diagnosis), _source(result.source)]
    parts.append(f"{len(result.presets)} configurations: {listed(p.name for p in result.presets)}")
    if result.recommendation is not None:
        parts.append(_recommended(result.recommendation))
    return parts


def _report(document: Any) -> list[str]:
    parts = [document.dialect]
    if document.verdict is not None and document.verdict.status is not None:
        parts.append(f"verdict {document.verdict.status} ({document.verdict.lead or '–'})")
    else:
        parts.append(_verdict(document.diagnosis))
    parts.append(_source(document.source))
    if document.presets is not None:
        parts.append(f"{len(document.presets)} presets")
    if document.recommendation is not None:
        parts.append(_recommended(document.recommendation))
    return parts


def _recommended(recommendation: Any) -> str:
    chosen = recommendation.recommended
    if recommendation.dump_bug is not None:
        return f"no configuration: dump bug {recommendation.dump_bug}"
    return "recommended –" if chosen is None else f"recommended {chosen.name}"


def _recommendation(recommendation: Any) -> list[str]:
    parts = [recommendation.dialect, _recommended(recommendation)]
    parts.append(f"{max(0, len(recommendation.choices) - 1)} alternatives")
    parts.append(f"{len(recommendation.rules)} rules fired")
    if recommendation.framework is not None:
        parts.append(
            f"in {recommendation.framework.get('title', recommendation.framework.get('id'))}"
        )
    return parts


def _check(result: Any) -> list[str]:
    document = result.document
    counts = document.get("counts") or {}
    tally = ", ".join(f"{n} {status}" for status, n in counts.items() if n) or "no rules"
    return [
        "passed" if result.passed else "failed",
        f"{len(document.get('rules') or [])} rules: {tally}",
        _verdict(result.diagnosis),
    ]


def _baseline(baseline: Any) -> list[str]:
    return [
        baseline.dialect,
        _source(baseline.source),
        f"{len(baseline.bootstrap)} bootstrapped metrics × {baseline.replicates} replicates",
        f"seed {baseline.seed}",
        f"created {baseline.created}",
    ]


SUMMARIES: dict[str, Callable[[Any], list[str]]] = {
    "AnalysisResult": _analysis,
    "ComparisonResult": _comparison,
    "ReportDocument": _report,
    "Recommendation": _recommendation,
    "CheckResult": _check,
    "Baseline": _baseline,
}
"""The parts of each result's ``repr`` after its class name, by class name."""
