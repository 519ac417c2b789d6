"""The arguments of the API turned into what a pass computes: the frameworks named, the
configurations compared and the sweep of ``compare_presets``, the input of ``report``."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rcdiag.dialects import Dialect
from rcdiag.errors import UsageError
from rcdiag.run.dump import PathLike, Paths, dialect_of

if TYPE_CHECKING:
    from rcdiag.correction.compare import NamedConfig
    from rcdiag.correction.sweep import Sweep
    from rcdiag.frameworks.base import Framework
    from rcdiag.model import ReportDocument


def frameworks_of(value: str | Sequence[str] | None, option: str) -> list[Framework]:
    """The frameworks of a ``frameworks=`` argument (none when not given)."""
    if value is None:
        return []  # the registry imports every framework: only when one is named
    from rcdiag.frameworks import parse_frameworks

    return parse_frameworks(value, option)


def framework_modes(value: str | Sequence[str] | None) -> list[NamedConfig]:
    """The correction modes of the ``frameworks=`` frameworks, with their defaults.

    Raises:
        UsageError: an unknown framework, or one whose modes rcdiag does not dry-run.
    """
    from rcdiag.correction.compare import NamedConfig
    from rcdiag.frameworks import FRAMEWORKS

    modes: list[NamedConfig] = []
    for chosen in frameworks_of(value, "--frameworks"):
        if not chosen.presets:
            with_modes = ", ".join(f.id for f in FRAMEWORKS.values() if f.presets)
            raise UsageError(
                f"--frameworks {chosen.id}: rcdiag dry-runs no correction mode of {chosen.title} "
                f"(its metrics: analyze --frameworks {chosen.id}); modes exist for {with_modes}"
            )
        modes += [NamedConfig(p.name, p.config, p.plan) for p in chosen.presets]
    return modes


def comparison_plan(
    presets: Sequence[str] | None,
    configs: Sequence[PathLike] | Mapping[str, Mapping[str, Any]],
    sweep: str | None,
    grid: Sequence[str | float] | None,
    dialect: str | None,
    frameworks: str | Sequence[str] | None,
) -> tuple[list[NamedConfig], Dialect, Sweep | None]:
    """The configurations ``compare_presets`` compares, their dialect and its sweep.

    Raises:
        UsageError: nothing to compare, a grid without a sweep, an unknown preset or framework.
    """
    from rcdiag.correction.loading import resolve_configs
    from rcdiag.correction.sweep import build_sweep

    inline = dict(configs) if isinstance(configs, Mapping) else {}
    files = [] if isinstance(configs, Mapping) else [Path(os.fspath(c)) for c in configs]
    if grid is not None and sweep is None:
        raise UsageError("grid needs a sweep")
    modes = framework_modes(frameworks)
    nothing = presets is not None and not presets and not files and not inline
    if nothing and sweep is None and not modes:
        raise UsageError("no preset, configuration, sweep or framework: nothing to compare")
    chosen, named = resolve_configs(presets, files, dialect_of(dialect), inline)
    named = [*named, *modes]
    planned = None
    if sweep is not None:
        values = None if grid is None else [str(v) for v in grid]
        if values == []:
            raise UsageError("grid: no threshold")
        planned = build_sweep(sweep, chosen, values)
        if presets is None and not files and not inline and not modes:
            named = []  # a sweep alone: only its grid
    return named, chosen, planned


def report_target(
    paths: Paths | None,
    from_json: PathLike | None,
    frameworks: Sequence[Framework],
    translate: str | None,
) -> str | None:
    """The framework of ``translate`` (checked), after checking that ``report`` has exactly one
    input: a dump or a results JSON.

    Raises:
        UsageError: both or neither input, ``frameworks`` with a results JSON, an unknown
            framework to translate to.
    """
    from rcdiag.run.documents import translation_target

    target = None if translate is None else translation_target(translate)
    if from_json is not None:
        if paths:
            raise UsageError("give either dump paths or --from results.json, not both")
        if frameworks:
            raise UsageError("--frameworks needs the dump: it cannot be computed from --from")
    elif not paths:
        raise UsageError(
            "no input: give a dump (parquet files, a glob or a directory) or --from results.json"
        )
    return target


def report_from_json(source: Path, dialect: Dialect | None) -> ReportDocument:
    """The report document of a results JSON (its decisions made again by the caller).

    Raises:
        UsageError: unreadable, or of another dialect than ``dialect``.
        InputError: not rcdiag results.
    """
    from rcdiag.run.documents import load_document

    document = load_document(source)
    if dialect is not None and dialect != document.dialect:
        raise UsageError(
            f"--dialect {dialect}: {source} holds results of the "
            f"{document.dialect} dialect; recompute them from the dump"
        )
    return document
