"""``rcdiag analyze``: every off-policy metric verl logs, per step and overall, with verdicts."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from rcdiag.analysis import AnalyzeOptions
from rcdiag.assess.registry import judge, worst
from rcdiag.commands._common import (
    ALL_STEPS,
    DebugOption,
    DialectOption,
    DumpOptions,
    JsonOption,
    PathsArgument,
    QuietOption,
    VetoOption,
    cli_errors,
    outputs,
    parse_dialect,
    reads_dump,
    stdout,
    write_output,
    wrote,
)
from rcdiag.commands._report_document import PlotlyOption, plotly_output
from rcdiag.commands._terminal import progress_bar, show_diagnosis, status_text, warn_about_input
from rcdiag.dialects import DEFAULT_DIALECT
from rcdiag.formatting import fmt
from rcdiag.results import DumpSpec, analyze_dump

STEP_TABLE_ROWS = 40
"""Up to this many steps are listed one per row; beyond it, consecutive steps are grouped."""

STEP_COLUMNS: dict[str, str] = {
    "rollout_corr/kl": "kl",
    "rollout_corr/k3_kl": "k3_kl",
    "rollout_corr/chi2_token": "χ² tok",
    "rollout_corr/chi2_seq": "χ² seq",
    "rollout_corr/ppl_ratio": "ppl ratio",
    "rcdiag/abs_log_ratio_mean": "|Δlogp|",
    "rcdiag/ess_token": "ESS tok",
    "rcdiag/veto_fraction": "veto",
}


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
    quiet: QuietOption = False,
    debug: DebugOption = False,
    dump_options: DumpOptions = ALL_STEPS,
) -> None:
    """Compute every off-policy metric verl logs, per training step and overall, with verdicts."""
    with cli_errors(debug):
        extra = plotly_output(plotlyjs) if html is not None else {}
        written = outputs({"--json": json_path, "--html": html, **extra}, paths)
        options = AnalyzeOptions(
            dialect=parse_dialect(dialect) or DEFAULT_DIALECT, veto_threshold=veto_threshold
        )
        spec = dump_options.spec(paths)
        if "--html" in written:
            document = run_report_with_progress(spec, options, written["--html"], quiet, plotlyjs)
        else:
            document = run_with_progress(spec, options, quiet)
        if "--json" in written:
            write_output(written["--json"], document)
    if not quiet:
        show(document)
        if "--json" in written:
            wrote(written["--json"])
        if "--html" in written:
            wrote(written["--html"], ": open it in a browser")


def run_with_progress(spec: DumpSpec, options: AnalyzeOptions, quiet: bool) -> dict[str, Any]:
    """Analyse with a progress bar; warn about empty steps and dropped tokens."""
    with progress_bar(quiet) as advance:
        document = analyze_dump(spec, options, advance)
    warn_about_input(document, quiet)
    return document


def run_report_with_progress(
    spec: DumpSpec, options: AnalyzeOptions, html: Path, quiet: bool, plotlyjs: str = "embed"
) -> dict[str, Any]:
    """Analyse and write the HTML report from the same pass; returns the analyze document."""
    from rcdiag.report.render import write_html
    from rcdiag.report.run import ReportOptions, analyze_part, build_report_document

    report_options = ReportOptions(dialect=options.dialect, veto_threshold=options.veto_threshold)
    with progress_bar(quiet) as advance:
        full = build_report_document(spec, report_options, advance)
    write_html(html, full, plotlyjs)
    document = analyze_part(full)
    warn_about_input(document, quiet)
    return document


def show(document: dict[str, Any]) -> None:
    """The terminal view: source line, diagnosis, overall metrics with statuses, per-step table."""
    source = document["source"]
    stdout.print(
        f"[bold]rcdiag analyze[/] · dialect {document['dialect']} · {source['rows']:,} rows · "
        f"{source['valid_tokens']:,} valid tokens · {source['steps']} steps · "
        f"{len(source['paths'])} file(s)"
    )
    show_diagnosis(document["diagnosis"])
    judged = {c["metric"]: c for c in document["checks"]}
    table = Table(title="Overall (whole dump as one batch)", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("status")
    for name, value in document["overall"].items():
        check = judged.get(name)
        status = ""
        if check is not None:
            status = status_text(check["status"])
            if check["band"]:
                status += f" [dim]({check['band']})[/]"
        table.add_row(name, fmt(value), status)
    stdout.print(table)
    stdout.print(step_table(document["steps"]))


def step_table(steps: list[dict[str, Any]]) -> Table:
    """One row per step, or per range of consecutive steps (means; worst verdict) when many."""
    group = max(1, math.ceil(len(steps) / STEP_TABLE_ROWS))
    title = "Per step" if group == 1 else f"Per step (groups of {group} steps: means, worst status)"
    table = Table(title=title, title_justify="left")
    table.add_column("step", justify="right")
    table.add_column("rows", justify="right")
    table.add_column("valid tok", justify="right")
    for label in STEP_COLUMNS.values():
        table.add_column(label, justify="right")
    table.add_column("status")
    for start in range(0, len(steps), group):
        chunk = steps[start : start + group]
        label = (
            str(chunk[0]["step"]) if len(chunk) == 1 else f"{chunk[0]['step']}–{chunk[-1]['step']}"
        )
        values = []
        for name in STEP_COLUMNS:
            present = [s["metrics"][name] for s in chunk if s["metrics"].get(name) is not None]
            values.append(fmt(sum(present) / len(present)) if present else "–")
        statuses = [c.status for s in chunk for c in judge(s["metrics"])]
        status = worst(statuses) if any(s["valid_tokens"] for s in chunk) else "empty"
        table.add_row(
            label,
            f"{sum(s['rows'] for s in chunk):,}",
            f"{sum(s['valid_tokens'] for s in chunk):,}",
            *values,
            status_text(status),
        )
    return table
