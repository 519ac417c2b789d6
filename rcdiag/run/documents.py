"""One pass over a dump → the report document: analyze + compare-presets + profile + verdict + advice.

The document (:class:`~rcdiag.model.ReportDocument`) is a superset of the ``rcdiag analyze`` result
(docs/report.md: ``source``, ``options``, ``overall``, ``steps``, ``checks``, ``diagnosis``) with

* ``presets`` — the compare-presets entries of every preset of the dialect (aliases with an identical
  configuration left out, listed under ``preset_aliases``); per step only the ``summary`` figures are
  kept (``rcdiag compare-presets --json`` has every per-step verl metric);
* ``sweeps`` — the candidate sweeps of :mod:`rcdiag.assess.recommendation.candidates`, overall
  summaries per point and each point's kept shares per step (what the recommendation judges a
  growing run on);
* ``profile`` — :class:`~rcdiag.metrics.profile.MismatchProfile` (where the mismatch lives);
* ``verdict`` and ``recommendation`` — pure functions of the rest (:mod:`rcdiag.assess.verdict`,
  :mod:`rcdiag.assess.recommendation.ranking`), so ``rcdiag report --from`` re-renders without the dump.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rcdiag.assess.recommendation.candidates import candidate_sweeps, preset_configs
from rcdiag.assess.recommendation.ranking import recommend
from rcdiag.assess.verdict.signals import verdict
from rcdiag.correction.presets import PRESETS
from rcdiag.dialects import DEFAULT_DIALECT, Dialect
from rcdiag.errors import UsageError
from rcdiag.frameworks.base import Framework
from rcdiag.io.documents import loads_json
from rcdiag.io.paths import read_text_input
from rcdiag.metrics.analysis import AnalyzeOptions
from rcdiag.metrics.profile import DEFAULT_TOP_K
from rcdiag.model import AnalysisResult, Profile, ReportDocument
from rcdiag.run.consumers import Request
from rcdiag.run.dump import DumpSpec, Progress
from rcdiag.run.engine import run
from rcdiag.run.results import analysis_result, configuration_result, sweep_result


@dataclass(frozen=True)
class ReportOptions:
    """What the report computes.

    Args:
        dialect: ``latest`` or ``legacy``: presets, sweeps and the recommended configuration.
        veto_threshold: τ for the catastrophic-token metrics (as ``rcdiag analyze``).
        top_k: offending sequences listed per ranking.
        frameworks: other frameworks whose logged metrics the document also holds.
    """

    dialect: Dialect = DEFAULT_DIALECT
    veto_threshold: float | None = None
    top_k: int = DEFAULT_TOP_K
    frameworks: tuple[Framework, ...] = ()

    @property
    def analyze(self) -> AnalyzeOptions:
        return AnalyzeOptions(dialect=self.dialect, veto_threshold=self.veto_threshold)


def build_report_document(
    dump: DumpSpec, options: ReportOptions | None = None, progress: Progress | None = None
) -> ReportDocument:
    """Read the dump once and return the report document (module docstring).

    Raises:
        InputError: unreadable input, or a dump (or step selection) without any valid token.
    """
    options = options or ReportOptions()
    presets, aliases = preset_configs(options.dialect)
    sweeps = candidate_sweeps(options.dialect)
    request = Request(
        options.analyze,
        presets,
        summary_only=[c for s in sweeps for c in s.configs],
        profile_top_k=options.top_k,
        frameworks=options.frameworks,
    )
    done = run(dump, request, progress)
    comparison, profile = done.comparison, done.profile
    assert comparison is not None and profile is not None
    analysis = analysis_result(done)
    registry = PRESETS[options.dialect]
    document = ReportDocument.of(
        dataclasses.replace(
            analysis, options=dataclasses.replace(analysis.options, top_k=options.top_k)
        ),
        presets=tuple(
            configuration_result(comparison, c, False, registry[c.name].purpose) for c in presets
        ),
        preset_aliases=aliases,
        sweeps=tuple(
            sweep_result(comparison, s.target, s.thresholds, s.configs, s.key, s.title, True)
            for s in sweeps
        ),
        profile=Profile.from_json(profile.result(), source="the mismatch profile"),
    )
    return complete(document)


def overview(document: ReportDocument) -> ReportDocument:
    """The document without the presets' per-step figures: all that the verdict, the
    recommendation and the page read (none of them reads those), without copying every step."""
    presets = document.presets
    if presets is None:
        return document
    return dataclasses.replace(document, presets=tuple(p.without_steps() for p in presets))


def complete(document: ReportDocument) -> ReportDocument:
    """Add the verdict and the recommendation when the document lacks them (pure functions of
    the rest, :mod:`rcdiag.assess.verdict` and :mod:`rcdiag.assess.recommendation.ranking`)."""
    if document.verdict is not None and document.recommendation is not None:
        return document
    data = overview(document).to_json()
    return dataclasses.replace(
        document,
        verdict=document.verdict if document.verdict is not None else verdict(data),
        recommendation=document.recommendation
        if document.recommendation is not None
        else recommend(data),
    )


def page_json(document: ReportDocument) -> dict[str, Any]:
    """The JSON the page is rendered from (:func:`rcdiag.report.render.render_html`): the
    complete document's :func:`overview`, without the sweep points' per-step figures (the page
    draws the recommended configuration's, which its recommendation holds)."""
    done = overview(complete(document))
    if done.sweeps is not None:
        done = dataclasses.replace(
            done,
            sweeps=tuple(
                dataclasses.replace(
                    s,
                    steps=None,
                    points=tuple(dataclasses.replace(p, per_step=None) for p in s.points),
                )
                for s in done.sweeps
            ),
        )
    return done.to_json()


def load_document(path: Path) -> ReportDocument:
    """A results JSON of ``rcdiag report``, ``analyze`` or ``compare-presets``, checked field by
    field (:meth:`~rcdiag.model.ReportDocument.from_json`).

    A compare-presets ``sweep`` (one target, rejection only) is listed under ``sweeps`` for its
    table; its points carry no token TIS, so the report draws no sweep curve for it. The verdict
    and the recommendation in the file are left out: :func:`complete` computes them again.

    Raises:
        UsageError: unreadable file, not JSON.
        InputError: not an rcdiag results document of this schema version, or a malformed field.
    """
    text = read_text_input(path, "results JSON", ": pass it without --from")
    try:
        parsed = loads_json(text, str(path))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise UsageError(f"{path}: not rcdiag results (JSON nested too deeply)") from None
    return document_of(parsed, str(path))


def document_of(parsed: Any, source: str) -> ReportDocument:
    """A parsed results document (of ``rcdiag report``, ``analyze`` or ``compare-presets``) as a
    report document read from ``source``, without its verdict and recommendation (as
    :func:`load_document`).

    Raises:
        InputError: not an rcdiag results document of this schema version, or a malformed field.
    """
    if isinstance(parsed, dict):
        # the verdict and the advice are pure functions of the rest: recomputed, never trusted
        parsed = {k: v for k, v in parsed.items() if k not in ("verdict", "recommendation")}
    document = ReportDocument.from_json(parsed, source=source)
    sweep = document.sweep
    if sweep is not None and document.sweeps is None:
        title = f"{sweep.target} (rejection only)"
        listed = dataclasses.replace(sweep, key=sweep.target, title=title)
        document = dataclasses.replace(document, sweeps=(listed,))
    return document


@contextlib.contextmanager
def malformed_results(path: Path | None) -> Iterator[None]:
    """Report a results document from ``path`` that the report cannot use as bad input naming the
    file (for the inconsistencies between well-typed fields that
    :meth:`~rcdiag.model.ReportDocument.from_json` does not catch); a no-op for a document
    computed from a dump (``path`` None), where such an error is a bug."""
    if path is None:
        yield
        return
    try:
        yield
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, ArithmeticError) as exc:
        detail = f"no field {exc}" if isinstance(exc, KeyError) else f"{exc}"
        raise UsageError(f"{path}: not valid rcdiag results ({detail})") from exc


def analyze_part(document: ReportDocument) -> AnalysisResult:
    """The ``rcdiag analyze`` result inside a report document (what ``analyze --json`` writes)."""
    analysis = document.analysis
    assert analysis is not None, "a report document computed from a dump holds the analysis"
    return analysis


def translation_target(value: str | None) -> str | None:
    """The framework of ``--framework`` when rcdiag has a translation table for it.

    Raises:
        UsageError: unknown, or no table (the message lists the frameworks with one).
    """
    if value is None:
        return None
    from rcdiag.frameworks import parse_frameworks
    from rcdiag.frameworks.translate import TRANSLATORS

    chosen = parse_frameworks(value, "--framework")
    if len(chosen) != 1:
        raise UsageError("--framework: name one framework")
    if chosen[0].id not in TRANSLATORS:
        raise UsageError(
            f"--framework {chosen[0].id}: rcdiag has no table of {chosen[0].title}'s correction "
            f"keys (its metrics: analyze --frameworks {chosen[0].id}); tables exist for "
            f"{', '.join(TRANSLATORS)}"
        )
    return chosen[0].id


def translated(document: ReportDocument, framework: str) -> ReportDocument:
    """The document with the recommended configuration in ``framework``'s keys under the
    recommendation's ``framework`` key (docs/frameworks.md, "Recommendations")."""
    from rcdiag.frameworks import FRAMEWORKS
    from rcdiag.frameworks.translate import translate

    rec = document.recommendation
    best = None if rec is None else rec.recommended
    if rec is None or best is None:
        return document
    dialect: Dialect = "legacy" if document.dialect == "legacy" else "latest"
    done = translate(framework, best.config, dialect)
    entry = {"id": framework, "title": FRAMEWORKS[framework].title, **done.to_json()}
    return dataclasses.replace(document, recommendation=dataclasses.replace(rec, framework=entry))
