"""``rcdiag check``: CI gates on the rollout/training mismatch; exit 0 pass, 1 fail, 2 bad input."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any

import typer

from rcdiag import api
from rcdiag.checks.outputs import junit_xml, markdown, verdict_line
from rcdiag.commands._check_terminal import show
from rcdiag.commands._common import (
    ALL_STEPS,
    EXIT_CHECKS_FAILED,
    DebugOption,
    DialectOption,
    DumpOptions,
    JsonOption,
    PathsArgument,
    VetoOption,
    cli_errors,
    outputs,
    parse_dialect,
    reads_dump,
    shown,
    stderr,
    stdout,
    write_output,
)
from rcdiag.commands._progress import progress_bar, warn_about_input
from rcdiag.errors import UsageError


@reads_dump
def check(
    paths: PathsArgument,
    rules_file: Annotated[
        Path | None,
        typer.Option("--rules", help="A TOML rules file (schema: docs/rules.md)."),
    ] = None,
    rule: Annotated[
        list[str] | None,
        typer.Option(
            "--rule",
            "-r",
            help="A rule, e.g. 'rollout_corr/k3_kl.overall < 1e-3' (repeatable; docs/rules.md).",
        ),
    ] = None,
    with_defaults: Annotated[
        bool,
        typer.Option(
            "--with-defaults", help="Also evaluate the built-in rules when rules are given."
        ),
    ] = False,
    baseline_path: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            help="A baseline made by `rcdiag baseline`: adds drift-against-baseline rules.",
        ),
    ] = None,
    abs_tol: Annotated[
        float | None,
        typer.Option("--abs-tol", help="Absolute tolerance of baseline comparisons (default 0)."),
    ] = None,
    rel_tol: Annotated[
        float | None,
        typer.Option(
            "--rel-tol", help="Relative tolerance of baseline comparisons (default 0.1 = 10%)."
        ),
    ] = None,
    confidence: Annotated[
        float | None,
        typer.Option(
            "--confidence", help="Level of the bootstrap interval of the drift (default 0.99)."
        ),
    ] = None,
    trend_alpha: Annotated[
        float | None,
        typer.Option(
            "--trend-alpha", help="Significance level of the rise/fall change-point test (0.05)."
        ),
    ] = None,
    config: Annotated[
        list[Path] | None,
        typer.Option(
            "--config",
            "-c",
            help="A YAML rollout-correction configuration that rules can read as "
            "preset:<file stem>/… (repeatable).",
        ),
    ] = None,
    junit: Annotated[
        str | None,
        typer.Option("--junit", metavar="FILE", help="Write JUnit XML (one test case per rule)."),
    ] = None,
    markdown_path: Annotated[
        str | None,
        typer.Option(
            "--markdown",
            metavar="FILE",
            help="Write a Markdown summary (also appended to $GITHUB_STEP_SUMMARY when set).",
        ),
    ] = None,
    json_path: JsonOption = None,
    dialect: DialectOption = None,
    veto_threshold: VetoOption = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print nothing but errors and the verdict.")
    ] = False,
    debug: DebugOption = False,
    dump_options: DumpOptions = ALL_STEPS,
) -> None:
    """Evaluate CI rules on a dump: exit 0 when they hold, 1 when a rule fails, 2 on bad input.

    Without rules: published health thresholds, a trend gate, and drift against --baseline
    (docs/rules.md).
    """
    with cli_errors(debug):
        written = outputs(
            {
                "--json": json_path,
                "--junit": junit,
                "--markdown": markdown_path,
                "$GITHUB_STEP_SUMMARY": os.environ.get("GITHUB_STEP_SUMMARY") or None,
            },
            paths,
            {"--rules": rules_file, "--baseline": baseline_path, "--config": config},
        )
        with progress_bar(quiet) as advance:
            result = api.check(
                paths,
                rules=rule or [],
                rules_file=rules_file,
                with_defaults=with_defaults,
                baseline=baseline_path,
                abs_tol=abs_tol,
                rel_tol=rel_tol,
                confidence=confidence,
                trend_alpha=trend_alpha,
                configs=config or [],
                dialect=parse_dialect(dialect),
                veto_threshold=veto_threshold,
                **dump_options.arguments(),
                progress=advance,
            )
        for note in result.notes:
            stderr.print(f"[yellow]Note:[/] {shown(note)}")
        assert result.analysis is not None, "a check computed from a dump holds the analysis"
        warn_about_input(result.analysis.source, quiet)
        document = result.to_json()
        write_outputs(document, written)
    if not quiet:
        show(document)
    else:
        stdout.print(f"rcdiag check: {verdict_line(document)}")
    if not document["passed"]:
        raise typer.Exit(EXIT_CHECKS_FAILED)


def write_outputs(document: dict[str, Any], written: dict[str, Path]) -> None:
    """Every requested file (option → checked path, :func:`outputs`), atomically; the Markdown is
    also appended to $GITHUB_STEP_SUMMARY when it is set."""
    if "--json" in written:
        write_output(written["--json"], document)
    if "--junit" in written:
        timestamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        write_output(written["--junit"], junit_xml(document, timestamp))
    md, summary = written.get("--markdown"), written.get("$GITHUB_STEP_SUMMARY")
    if md is None and summary is None:
        return
    text = markdown(document)
    if md is not None:
        write_output(md, text)
    if summary is not None:
        try:
            with open(summary, "a", encoding="utf-8", errors="backslashreplace") as handle:
                handle.write(text + "\n")
        except OSError as exc:
            raise UsageError(
                f"$GITHUB_STEP_SUMMARY {summary}: cannot append ({exc.strerror or exc})"
            ) from None
