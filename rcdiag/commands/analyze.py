"""``rcdiag analyze``: every off-policy metric verl logs, per step and overall, with verdicts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from rcdiag import api
from rcdiag.commands._common import (
    ALL_STEPS,
    CsvOption,
    DebugOption,
    DialectOption,
    DumpOptions,
    FrameworksOption,
    JsonOption,
    ParquetOption,
    PathsArgument,
    QuietOption,
    VetoOption,
    cli_errors,
    outputs,
    parse_dialect,
    reads_dump,
    refuse_inside_dump,
    stderr,
    write_output,
    write_table,
    wrote,
)
from rcdiag.commands._progress import progress_bar, warn_about_input
from rcdiag.commands._report_document import PlotlyOption, plotly_output
from rcdiag.commands._trackers import MlflowOption, TensorboardOption, Trackers, WandbOption
from rcdiag.model import AnalysisResult


@reads_dump
def analyze(
    paths: PathsArgument,
    json_path: JsonOption = None,
    dialect: DialectOption = None,
    veto_threshold: VetoOption = None,
    html: Annotated[
        str | None,
        typer.Option(
            "--html",
            metavar="FILE",
            help="Also write the self-contained HTML report (rcdiag report) to this file; the "
            "preset comparison and profile it needs are computed in the same pass.",
        ),
    ] = None,
    plotlyjs: PlotlyOption = "embed",
    csv: CsvOption = None,
    parquet: ParquetOption = None,
    frameworks: FrameworksOption = None,
    tensorboard: TensorboardOption = None,
    mlflow: MlflowOption = None,
    wandb: WandbOption = False,
    quiet: QuietOption = False,
    debug: DebugOption = False,
    dump_options: DumpOptions = ALL_STEPS,
) -> None:
    """Compute every off-policy metric verl logs, per training step and overall, with verdicts."""
    with cli_errors(debug):
        trackers = Trackers(tensorboard, mlflow, wandb)
        trackers.check()
        tables = {"--csv": csv, "--parquet": parquet}
        extra = plotly_output(plotlyjs) if html is not None else {}
        written = outputs({"--json": json_path, "--html": html, **tables, **extra}, paths)
        refuse_inside_dump({k: v for k, v in written.items() if k in tables}, paths)
        arguments: dict[str, Any] = {
            "dialect": parse_dialect(dialect),
            "veto_threshold": veto_threshold,
            **dump_options.arguments(),
            "frameworks": frameworks,
        }
        if "--html" in written:
            document = run_report_with_progress(
                paths, arguments, written["--html"], quiet, plotlyjs
            )
        else:
            document = run_with_progress(paths, arguments, quiet)
        if "--json" in written:
            write_output(written["--json"], document.to_json())
        for option, kind in (("--csv", "csv"), ("--parquet", "parquet")):
            if option in written:
                write_table(written[option], document.to_arrow(), kind)
        logged = trackers.publish(document)
    if not quiet:
        from rcdiag.commands._analyze_terminal import show

        show(document)
        for option in ("--json", "--csv", "--parquet"):
            if option in written:
                wrote(written[option])
        if "--html" in written:
            wrote(written["--html"], ": open it in a browser")
        if logged:
            from rich.text import Text

            for line in logged:
                stderr.print(Text(line, style="dim"))


def run_with_progress(paths: list[str], arguments: dict[str, Any], quiet: bool) -> AnalysisResult:
    """Analyse with a progress bar; warn about empty steps and dropped tokens."""
    with progress_bar(quiet) as advance:
        result = api.analyze(paths, **arguments, progress=advance)
    warn_about_input(result.source, quiet)
    return result


def run_report_with_progress(
    paths: list[str], arguments: dict[str, Any], html: Path, quiet: bool, plotlyjs: str
) -> AnalysisResult:
    """Analyse and write the HTML report from the same pass; returns the analyze result."""
    with progress_bar(quiet) as advance:
        full = api.report(paths, **arguments, progress=advance)
    api.write_report(full, html, plotlyjs)
    result = full.analysis
    assert result is not None, "a report document computed from a dump holds the analysis"
    warn_about_input(result.source, quiet)
    return result
