"""``rcdiag report``: one self-contained HTML page — verdict, where the mismatch lives, presets, advice."""

from __future__ import annotations

from typing import Annotated

import typer

from rcdiag import api
from rcdiag.commands._common import (
    ALL_STEPS,
    DebugOption,
    DialectOption,
    DumpOptions,
    FrameworksOption,
    JsonOption,
    QuietOption,
    VetoOption,
    cli_errors,
    outputs,
    reads_dump,
    stderr,
    stdout,
    write_output,
    wrote,
)
from rcdiag.commands._report_document import (
    FromOption,
    OptionalPaths,
    PlotlyOption,
    TopOption,
    load_or_compute,
    plotly_output,
)
from rcdiag.commands._trackers import MlflowOption, TensorboardOption, Trackers, WandbOption
from rcdiag.io.paths import printable
from rcdiag.metrics.profile import DEFAULT_TOP_K
from rcdiag.model import ReportDocument
from rcdiag.report.prepare import compile_in_background

DEFAULT_PAGE = "report.html"
"""Where the page goes without ``-o``: the current directory (and the command says so)."""


def headline(document: ReportDocument) -> str:
    """The verdict and its headline."""
    verdict = document.verdict
    status = None if verdict is None else verdict.status
    word = {"healthy": "HEALTHY", "watch": "WATCH", "act": "ACT"}.get(str(status), "NO VERDICT")
    return f"{word}: {'' if verdict is None else verdict.headline}"


def advice(document: ReportDocument) -> tuple[str, str] | None:
    """The recommended configuration: its name, and its verl keys (None when none is)."""
    from rcdiag.assess.recommendation.snippets import key_line

    best = None if document.recommendation is None else document.recommendation.recommended
    if best is None:
        return None
    return best.name, key_line(best.config, document.dialect)


@reads_dump
def report(
    paths: OptionalPaths = None,
    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help=f"Where to write the HTML report (default: ./{DEFAULT_PAGE}).",
        ),
    ] = None,
    from_json: FromOption = None,
    json_path: JsonOption = None,
    dialect: DialectOption = None,
    veto_threshold: VetoOption = None,
    top: TopOption = DEFAULT_TOP_K,
    plotlyjs: PlotlyOption = "embed",
    frameworks: FrameworksOption = None,
    tensorboard: TensorboardOption = None,
    mlflow: MlflowOption = None,
    wandb: WandbOption = False,
    quiet: QuietOption = False,
    debug: DebugOption = False,
    dump_options: DumpOptions = ALL_STEPS,
) -> None:
    """Write a self-contained HTML report of the mismatch and what to do about it.

    Verdict, trends, where the mismatch lives, what each preset would do, and the recommended verl
    configuration, in one page that opens offline in any browser.
    """
    with cli_errors(debug):
        from rcdiag.assess.recommendation.ranking import UNMEASURED_LINE
        from rcdiag.run.documents import malformed_results

        trackers = Trackers(tensorboard, mlflow, wandb)
        trackers.check()
        written = outputs(
            {"--output": output or DEFAULT_PAGE, "--json": json_path, **plotly_output(plotlyjs)},
            paths,
            {"--from": from_json},
        )
        compile_in_background()  # the page's template, while the pass reads the dump
        document = load_or_compute(
            paths, from_json, dialect, veto_threshold, top, dump_options, quiet, frameworks
        )
        with malformed_results(from_json):
            size = api.write_report(document, written["--output"], plotlyjs)
        if "--json" in written:
            write_output(written["--json"], document.to_json())
        logged = trackers.publish(document)
    if quiet:
        return
    from rich.text import Text  # a quiet report prints nothing: no rich (~30 ms of a start-up)

    from rcdiag.commands._layout import paragraph

    stdout.print(Text(printable(headline(document))))
    use = advice(document)
    if use is not None:
        stdout.print(Text(f"→ use {printable(use[0])}"))
        stdout.print(paragraph(Text(printable(use[1])), indent=2))
        best = document.recommendation.recommended if document.recommendation else None
        story = None if best is None or best.per_step is None else best.per_step.story
        if story is not None:
            stdout.print(paragraph(Text(printable(story)), indent=2))
    if document.recommendation is not None and not document.recommendation.measured:
        stderr.print(Text(f"note: {UNMEASURED_LINE}"))
    page = written["--output"] if output is not None else written["--output"].absolute()
    given = "" if output is not None else "; no -o given"
    wrote(page, f" ({size / 1e6:.1f} MB{given}): open it in a browser")
    if "--json" in written:
        wrote(written["--json"])
    for line in logged:
        stderr.print(Text(line, style="dim"))
