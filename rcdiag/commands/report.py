"""``rcdiag report``: one self-contained HTML page — verdict, where the mismatch lives, presets, advice."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from rcdiag.commands._common import (
    ALL_STEPS,
    DebugOption,
    DialectOption,
    DumpOptions,
    JsonOption,
    QuietOption,
    VetoOption,
    cli_errors,
    outputs,
    parse_dialect,
    reads_dump,
    stderr,
    stdout,
    write_output,
    wrote,
)
from rcdiag.commands.analyze import progress_bar, warn_about_input
from rcdiag.dialects import DEFAULT_DIALECT
from rcdiag.errors import UsageError
from rcdiag.io.paths import printable
from rcdiag.metrics.profile import DEFAULT_TOP_K

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
) -> dict[str, Any]:
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
        if explicit is not None and explicit != document["dialect"]:
            raise UsageError(
                f"--dialect {explicit}: {from_json} holds results of the "
                f"{document['dialect']} dialect; recompute them from the dump"
            )
        with malformed_results(from_json):
            return complete(document)
    if not paths:
        raise UsageError(
            "no input: give a dump (parquet files, a glob or a directory) or --from results.json"
        )
    spec = dump_options.spec(paths)
    options = ReportOptions(
        dialect=explicit or DEFAULT_DIALECT, veto_threshold=veto_threshold, top_k=top
    )
    with progress_bar(quiet) as advance:
        document = build_report_document(spec, options, advance)
    warn_about_input(document, quiet)
    return document


def headline(document: dict[str, Any]) -> str:
    """One line: the verdict and the recommended configuration."""
    verdict = document.get("verdict") or {}
    word = {"healthy": "HEALTHY", "watch": "WATCH", "act": "ACT"}.get(
        str(verdict.get("status")), "NO VERDICT"
    )
    choices = (document.get("recommendation") or {}).get("choices") or []
    advice = f" → use {choices[0]['name']}" if choices else ""
    return f"{word}: {verdict.get('headline', '')}{advice}"


@reads_dump
def report(
    paths: OptionalPaths = None,
    output: Annotated[
        str, typer.Option("--output", "-o", metavar="FILE", help="Where to write the HTML report.")
    ] = "report.html",
    from_json: FromOption = None,
    json_path: JsonOption = None,
    dialect: DialectOption = None,
    veto_threshold: VetoOption = None,
    top: TopOption = DEFAULT_TOP_K,
    quiet: QuietOption = False,
    debug: DebugOption = False,
    dump_options: DumpOptions = ALL_STEPS,
) -> None:
    """Write a self-contained HTML report of the mismatch and what to do about it.

    Verdict, trends, where the mismatch lives, what each preset would do, and the recommended verl
    configuration, in one page that opens offline in any browser.
    """
    with cli_errors(debug):
        from rcdiag.report.recommend import UNMEASURED_LINE
        from rcdiag.report.render import write_html
        from rcdiag.report.run import malformed_results

        written = outputs({"--output": output, "--json": json_path}, paths, {"--from": from_json})
        document = load_or_compute(
            paths, from_json, dialect, veto_threshold, top, dump_options, quiet
        )
        with malformed_results(from_json):
            size = write_html(written["--output"], document)
        if "--json" in written:
            write_output(written["--json"], document)
    if quiet:
        return
    stdout.print(printable(headline(document)), markup=False, highlight=False)
    if not (document.get("recommendation") or {}).get("measured", True):
        stderr.print(f"note: {UNMEASURED_LINE}", markup=False)
    wrote(written["--output"], f" ({size / 1e6:.1f} MB): open it in a browser")
    if "--json" in written:
        wrote(written["--json"])
