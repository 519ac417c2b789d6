"""One pass over a dump → the report document: analyze + compare-presets + profile + verdict + advice.

The document is a superset of the ``rcdiag analyze`` JSON (docs/report.md: ``source``, ``overall``,
``steps``, ``checks``) with

* ``presets`` — the compare-presets entries of every preset of the dialect (aliases with an identical
  configuration left out, listed under ``preset_aliases``); per step only the ``summary`` figures are
  kept (``rcdiag compare-presets --json`` has every per-step verl metric);
* ``sweeps`` — the candidate sweeps of :mod:`rcdiag.assess.candidates`, overall summaries per point;
* ``profile`` — :class:`~rcdiag.metrics.profile.MismatchProfile` (where the mismatch lives);
* ``verdict`` and ``recommendation`` — pure functions of the rest (:mod:`rcdiag.assess.verdict`,
  :mod:`rcdiag.assess.recommend`), so ``rcdiag report --from`` re-renders without the dump.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rcdiag import SCHEMA_VERSION
from rcdiag.analysis import AnalyzeOptions
from rcdiag.assess.candidates import candidate_sweeps, preset_configs
from rcdiag.assess.recommend import recommend
from rcdiag.assess.verdict import verdict
from rcdiag.correction.compare import NamedConfig, PresetComparison
from rcdiag.correction.presets import PRESETS
from rcdiag.dialects import DEFAULT_DIALECT, DIALECTS, Dialect
from rcdiag.errors import UsageError
from rcdiag.io.paths import read_text_input
from rcdiag.metrics.profile import DEFAULT_TOP_K
from rcdiag.pipeline import DumpSpec, Progress, Request, run
from rcdiag.report.schema import check_shape
from rcdiag.results import analysis_document, configuration_result, json_safe

ANALYZE_KEYS: tuple[str, ...] = (
    "schema_version",
    "rcdiag_version",
    "dialect",
    "source",
    "options",
    "overall",
    "steps",
    "checks",
    "diagnosis",
)
"""The keys of a report document that form the ``rcdiag analyze`` document (docs/report.md)."""


@dataclass(frozen=True)
class ReportOptions:
    """What the report computes.

    Args:
        dialect: ``latest`` or ``legacy``: presets, sweeps and the recommended configuration.
        veto_threshold: τ for the catastrophic-token metrics (as ``rcdiag analyze``).
        top_k: offending sequences listed per ranking.
    """

    dialect: Dialect = DEFAULT_DIALECT
    veto_threshold: float | None = None
    top_k: int = DEFAULT_TOP_K

    @property
    def analyze(self) -> AnalyzeOptions:
        return AnalyzeOptions(dialect=self.dialect, veto_threshold=self.veto_threshold)


def _preset_entry(comparison: PresetComparison, named: NamedConfig, purpose: str) -> dict[str, Any]:
    entry = configuration_result(comparison, named, per_step_metrics=False)
    return {"name": entry.pop("name"), "purpose": purpose, **entry}


def build_report_document(
    dump: DumpSpec, options: ReportOptions | None = None, progress: Progress | None = None
) -> dict[str, Any]:
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
    )
    done = run(dump, request, progress)
    comparison, profile = done.comparison, done.profile
    assert comparison is not None and profile is not None
    document = analysis_document(done)
    document["options"]["top_k"] = options.top_k
    registry = PRESETS[options.dialect]
    document |= {
        "presets": [_preset_entry(comparison, c, registry[c.name].purpose) for c in presets],
        "preset_aliases": aliases,
        "sweeps": [
            {
                "key": sweep.key,
                "target": sweep.target,
                "title": sweep.title,
                "points": [
                    {
                        "threshold": threshold,
                        "config": dict(c.config),
                        "summary": comparison.summary(c.name),
                    }
                    for threshold, c in zip(sweep.thresholds, sweep.configs, strict=True)
                ],
            }
            for sweep in sweeps
        ],
        "profile": profile.result(),
    }
    return complete(json_safe(document))


def complete(document: dict[str, Any]) -> dict[str, Any]:
    """Add ``verdict`` and ``recommendation`` when the document lacks them (pure functions of it)."""
    if "verdict" not in document:
        document = {**document, "verdict": verdict(document)}
    if "recommendation" not in document:
        document = {**document, "recommendation": recommend(document)}
    return document


def load_document(path: Path) -> dict[str, Any]:
    """A results JSON of ``rcdiag report``, ``analyze`` or ``compare-presets``, checked.

    A compare-presets ``sweep`` (one target, rejection only) is listed under ``sweeps`` for its
    table; its points carry no token TIS, so the report draws no sweep curve for it.

    Raises:
        UsageError: unreadable file, not JSON, or not an rcdiag results document of schema 1.
    """
    text = read_text_input(path, "results JSON", ": pass it without --from")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise UsageError(f"{path}: not rcdiag results (JSON nested too deeply)") from None
    if not isinstance(document, dict) or "schema_version" not in document:
        raise UsageError(
            f"{path}: not rcdiag results (expected the JSON of rcdiag report, analyze or "
            "compare-presets, with a schema_version)"
        )
    if document["schema_version"] != SCHEMA_VERSION:
        raise UsageError(
            f"{path}: results schema_version {document['schema_version']!r}; this rcdiag reads "
            f"{SCHEMA_VERSION}"
        )
    if document.get("dialect") not in DIALECTS:
        raise UsageError(f"{path}: unknown dialect {document.get('dialect')!r}")
    if not isinstance(document.get("source"), dict):
        raise UsageError(f"{path}: not rcdiag results (no 'source' object)")
    check_shape(document, str(path))
    if isinstance(document.get("sweep"), dict) and "sweeps" not in document:
        sweep = document["sweep"]
        document["sweeps"] = [
            {
                **sweep,
                "key": sweep.get("target"),
                "title": f"{sweep.get('target')} (rejection only)",
            }
        ]
    # the verdict and the advice are pure functions of the rest: recomputed, never trusted
    return {k: v for k, v in document.items() if k not in ("verdict", "recommendation")}


@contextlib.contextmanager
def malformed_results(path: Path | None) -> Iterator[None]:
    """Report a results document from ``path`` that the report cannot use as bad input naming the
    file (for the inconsistencies :func:`~rcdiag.report.schema.check_shape` does not catch); a
    no-op for a document computed from a dump (``path`` None), where such an error is a bug."""
    if path is None:
        yield
        return
    try:
        yield
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, ArithmeticError) as exc:
        detail = f"no field {exc}" if isinstance(exc, KeyError) else f"{exc}"
        raise UsageError(f"{path}: not valid rcdiag results ({detail})") from exc


def analyze_part(document: dict[str, Any]) -> dict[str, Any]:
    """The ``rcdiag analyze`` document inside a report document (what ``analyze --json`` writes)."""
    part = {k: document[k] for k in ANALYZE_KEYS if k in document}
    if "options" in part:
        part["options"] = {k: v for k, v in part["options"].items() if k != "top_k"}
    return part
