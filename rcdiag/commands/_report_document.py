"""Where the report document of ``report`` and ``recommend`` comes from: a dump read in one pass,
or a results JSON given with ``--from``; their shared options."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rcdiag import api
from rcdiag.commands._common import DumpOptions, parse_dialect
from rcdiag.commands._progress import progress_bar, warn_about_input
from rcdiag.errors import UsageError
from rcdiag.model import ReportDocument

OptionalPaths = Annotated[
    list[str] | None,
    typer.Argument(
        help="Parquet files, globs or directories (read recursively), local or URLs (s3://, "
        "gs://, hf://, https://); omit them with --from.",
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
PlotlyOption = Annotated[
    str,
    typer.Option(
        "--plotlyjs",
        metavar="embed|PATH|URL",
        help="Where the page gets plotly.js: embed (default: compressed inside the page, ~0.5 MB, "
        "offline), a PATH written once and shared by the reports beside it (loaded relative to "
        "the page), or an http(s) URL (the browser fetches it).",
    ),
]


def plotly_output(value: str) -> dict[str, str | None]:
    """``--plotlyjs`` among the output paths when it names a file (checked with the others)."""
    from rcdiag.report.plotlyjs import parse_source

    return {"--plotlyjs": value} if parse_source(value).mode == "path" else {}


def load_or_compute(
    paths: list[str] | None,
    from_json: Path | None,
    dialect: str | None,
    veto_threshold: float | None,
    top: int,
    dump_options: DumpOptions,
    quiet: bool,
    frameworks: str | None = None,
    translate: str | None = None,
) -> ReportDocument:
    """The report document (:func:`rcdiag.api.report`): read from ``--from``, or computed from
    the dump in one pass; ``translate``: also the recommended configuration in that framework's
    keys."""
    from rcdiag.run.documents import malformed_results

    explicit = parse_dialect(dialect)
    if from_json is not None:
        if paths:
            raise UsageError("give either dump paths or --from results.json, not both")
        with malformed_results(from_json):
            return api.report(
                from_json=from_json, dialect=explicit, frameworks=frameworks, translate=translate
            )
    if not paths:
        raise UsageError(
            "no input: give a dump (parquet files, a glob or a directory) or --from results.json"
        )
    with progress_bar(quiet) as advance:
        document = api.report(
            paths,
            dialect=explicit,
            veto_threshold=veto_threshold,
            top=top,
            frameworks=frameworks,
            translate=translate,
            **dump_options.arguments(),
            progress=advance,
        )
    warn_about_input(document.source, quiet)
    return document
