"""Where the report document of ``report`` and ``recommend`` comes from: a dump read in one pass,
or a results JSON given with ``--from``; their shared options."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

from rcdiag.commands._common import DumpOptions, parse_dialect
from rcdiag.commands._terminal import progress_bar, warn_about_input
from rcdiag.dialects import DEFAULT_DIALECT
from rcdiag.errors import UsageError
from rcdiag.frameworks.base import Framework
from rcdiag.model import ReportDocument

OptionalPaths = Annotated[
    list[str] | None,
    typer.Argument(
        help="Parquet files, globs or directories (read recursively); omit them with --from.",
        show_default=False,
    ),
]
FromOption = Annotated[
    Path | None,
    typer.Option(
        "--from",
        help="Render from a results JSON (of rcdiag report --json, analyze --json or "
        "compare-presets --json) instead of reading a dump.",
    ),
]
TopOption = Annotated[
    int, typer.Option("--top", min=0, help="Offending sequences listed per ranking.")
]


def load_or_compute(
    paths: list[str] | None,
    from_json: Path | None,
    dialect: str | None,
    veto_threshold: float | None,
    top: int,
    dump_options: DumpOptions,
    quiet: bool,
    frameworks: Sequence[Framework] = (),
) -> ReportDocument:
    """The report document: read from ``--from``, or computed from the dump in one pass."""
    from rcdiag.report.run import (
        ReportOptions,
        build_report_document,
        complete,
        load_document,
        malformed_results,
    )

    explicit = parse_dialect(dialect)
    if from_json is not None:
        if paths:
            raise UsageError("give either dump paths or --from results.json, not both")
        document = load_document(from_json)
        if explicit is not None and explicit != document.dialect:
            raise UsageError(
                f"--dialect {explicit}: {from_json} holds results of the "
                f"{document.dialect} dialect; recompute them from the dump"
            )
        with malformed_results(from_json):
            return complete(document)
    if not paths:
        raise UsageError(
            "no input: give a dump (parquet files, a glob or a directory) or --from results.json"
        )
    spec = dump_options.spec(paths)
    options = ReportOptions(
        dialect=explicit or DEFAULT_DIALECT,
        veto_threshold=veto_threshold,
        top_k=top,
        frameworks=tuple(frameworks),
    )
    with progress_bar(quiet) as advance:
        document = build_report_document(spec, options, advance)
    warn_about_input(document.source, quiet)
    return document
