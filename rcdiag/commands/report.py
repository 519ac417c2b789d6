"""``rcdiag report``: one self-contained HTML page — verdict, where the mismatch lives, presets, advice."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from rcdiag.commands._common import (
    DebugOption,
    DialectOption,
    DropNonfinite,
    JsonOption,
    MaskCol,
    RolloutCol,
    StepCol,
    StepOption,
    StepsOption,
    TrainingCol,
    cli_errors,
    dump_spec,
    parse_dialect,
    stderr,
    stdout,
    write_json,
)
from rcdiag.commands.analyze import progress_bar
from rcdiag.dialects import DEFAULT_DIALECT
from rcdiag.errors import UsageError
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
VetoOption = Annotated[
    float | None,
    typer.Option(
        "--veto-threshold",
        help="τ: a valid token with π_train/π_rollout < τ is catastrophic (default 1e-4).",
    ),
]
TopOption = Annotated[
    int, typer.Option("--top", min=0, help="Offending sequences listed per ranking.")
]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")]


def load_or_compute(
    paths: list[str] | None,
    from_json: Path | None,
    dialect: str | None,
    veto_threshold: float | None,
    top: int,
    spec_args: tuple[Any, ...],
    quiet: bool,
) -> dict[str, Any]:
    """The report document: read from ``--from``, or computed from the dump in one pass."""
    from rcdiag.report.run import ReportOptions, build_report_document, complete, load_document

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
        return complete(document)
    if not paths:
        raise UsageError(
            "no input: give a dump (parquet files, a glob or a directory) or --from results.json"
        )
    spec = dump_spec(paths, *spec_args)
    options = ReportOptions(
        dialect=explicit or DEFAULT_DIALECT, veto_threshold=veto_threshold, top_k=top
    )
    with progress_bar(quiet) as advance:
        document = build_report_document(spec, options, advance)
    if not quiet:
        for s in document["steps"]:
            if s["valid_tokens"] == 0:
                stderr.print(
                    f"[yellow]Warning:[/] step {s['step']} has no valid token: its metrics are "
                    "null (verl would raise on this batch); the other steps are analysed."
                )
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


def report(
    paths: OptionalPaths = None,
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Where to write the HTML report.")
    ] = Path("report.html"),
    from_json: FromOption = None,
    json_path: JsonOption = None,
    dialect: DialectOption = None,
    veto_threshold: VetoOption = None,
    top: TopOption = DEFAULT_TOP_K,
    step: StepOption = None,
    steps: StepsOption = None,
    rollout_col: RolloutCol = None,
    training_col: TrainingCol = None,
    mask_col: MaskCol = None,
    step_col: StepCol = None,
    drop_nonfinite: DropNonfinite = False,
    quiet: QuietOption = False,
    debug: DebugOption = False,
) -> None:
    """Write a self-contained HTML report: verdict, trends, where the mismatch lives, what each
    preset would do, and the recommended verl configuration (opens offline in any browser)."""
    with cli_errors(debug):
        from rcdiag.report.render import write_html

        spec_args = (rollout_col, training_col, mask_col, step_col, drop_nonfinite, step, steps)
        document = load_or_compute(paths, from_json, dialect, veto_threshold, top, spec_args, quiet)
        size = write_html(output, document)
        if json_path is not None:
            write_json(json_path, document)
    if quiet:
        return
    stdout.print(headline(document), markup=False, highlight=False)
    stderr.print(f"wrote {output} ({size / 1e6:.1f} MB): open it in a browser", markup=False)
    if json_path is not None:
        stderr.print(f"wrote {json_path}", markup=False)
