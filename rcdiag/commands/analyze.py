"""``rcdiag analyze``: every off-policy metric verl logs, per step and overall, with verdicts."""

from __future__ import annotations

import math
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from rcdiag.analysis import AnalyzeOptions
from rcdiag.commands._common import (
    DebugOption,
    JsonOption,
    cli_errors,
    stderr,
    stdout,
    write_json,
)
from rcdiag.dialects import DEFAULT_DIALECT, Dialect
from rcdiag.health import evaluate, worst
from rcdiag.io.reader import ColumnNames, StepSelection
from rcdiag.results import DumpSpec, analyze_dump, empty_steps

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

_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}

PathsArgument = Annotated[
    list[str], typer.Argument(help="Parquet files, globs or directories (read recursively).")
]
DialectOption = Annotated[
    str,
    typer.Option(
        "--dialect", help="verl version to match: latest (Aug 2026) or legacy (PR #4070, Nov 2025)."
    ),
]
RolloutCol = Annotated[
    str | None, typer.Option("--rollout-col", help="Column of rollout log-probs.")
]
TrainingCol = Annotated[
    str | None, typer.Option("--training-col", help="Column of trainer (old) log-probs.")
]
MaskCol = Annotated[str | None, typer.Option("--mask-col", help="Column of the response mask.")]
StepCol = Annotated[str | None, typer.Option("--step-col", help="Column of the training step.")]
DropNonfinite = Annotated[
    bool,
    typer.Option(
        "--drop-nonfinite",
        help="Mask NaN/±inf at valid positions (and count them) instead of failing.",
    ),
]
StepOption = Annotated[
    list[int] | None, typer.Option("--step", help="Analyse only this step (repeatable).")
]
StepsOption = Annotated[
    str | None,
    typer.Option("--steps", help="Analyse only steps A:B (inclusive; A or B may be empty)."),
]


def parse_dialect(value: str) -> Dialect:
    from rcdiag.dialects import DIALECTS
    from rcdiag.errors import UsageError

    if value not in DIALECTS:
        raise UsageError(f"--dialect {value!r}: expected one of {', '.join(DIALECTS)}")
    return value  # type: ignore[return-value]


def dump_spec(
    paths: list[str],
    rollout_col: str | None,
    training_col: str | None,
    mask_col: str | None,
    step_col: str | None,
    drop_nonfinite: bool,
    step: list[int] | None,
    steps: str | None,
) -> DumpSpec:
    """The dump options every reading command shares."""
    return DumpSpec(
        paths=paths,
        columns=ColumnNames(rollout_col, training_col, mask_col, step_col),
        drop_nonfinite=drop_nonfinite,
        selection=StepSelection.parse(step or (), steps),
    )


def analyze(
    paths: PathsArgument,
    json_path: JsonOption = None,
    dialect: DialectOption = DEFAULT_DIALECT,
    veto_threshold: Annotated[
        float | None,
        typer.Option(
            "--veto-threshold",
            help="τ: a valid token with π_train/π_rollout < τ is catastrophic (rcdiag default 1e-4; "
            "in the legacy dialect also enables verl's veto metrics).",
        ),
    ] = None,
    step: StepOption = None,
    steps: StepsOption = None,
    rollout_col: RolloutCol = None,
    training_col: TrainingCol = None,
    mask_col: MaskCol = None,
    step_col: StepCol = None,
    drop_nonfinite: DropNonfinite = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,
    debug: DebugOption = False,
) -> None:
    """Compute every off-policy metric verl logs, per training step and overall, with verdicts."""
    with cli_errors(debug):
        options = AnalyzeOptions(dialect=parse_dialect(dialect), veto_threshold=veto_threshold)
        spec = dump_spec(
            paths, rollout_col, training_col, mask_col, step_col, drop_nonfinite, step, steps
        )
        document = run_with_progress(spec, options, quiet)
        if json_path is not None:
            write_json(json_path, document)
    if not quiet:
        show(document)
        if json_path is not None:
            stderr.print(f"wrote {json_path}")


def run_with_progress(spec: DumpSpec, options: AnalyzeOptions, quiet: bool) -> dict[str, Any]:
    """Analyse with a progress bar on stderr (hidden with ``quiet`` or when not a terminal)."""
    with Progress(
        TextColumn("reading"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("rows"),
        TimeRemainingColumn(),
        console=stderr,
        transient=True,
        disable=quiet,
    ) as bar:
        task = bar.add_task("read", total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        document = analyze_dump(spec, options, advance)
    for s in empty_steps(document):
        stderr.print(
            f"[yellow]Warning:[/] step {s} has no valid token: its metrics are null "
            "(verl would raise on this batch); the other steps are analysed."
        )
    if document["source"]["dropped_nonfinite"]:
        stderr.print(
            f"[yellow]Note:[/] masked {document['source']['dropped_nonfinite']} non-finite "
            "log-probs at valid positions (--drop-nonfinite)."
        )
    return document


def fmt(value: float | None) -> str:
    """Compact, aligned numbers: 4 significant digits, scientific when small or large."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if value == 0:
        return "0"
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e5:
        return f"{value:.4g}"
    return f"{value:.3e}"


def show(document: dict[str, Any]) -> None:
    """The terminal view: source line, overall metrics with verdicts, per-step table."""
    source = document["source"]
    stdout.print(
        f"[bold]rcdiag analyze[/] · dialect {document['dialect']} · {source['rows']:,} rows · "
        f"{source['valid_tokens']:,} valid tokens · {source['steps']} steps · "
        f"{len(source['paths'])} file(s)"
    )
    verdict = {c["metric"]: c for c in document["checks"]}
    table = Table(title="Overall (whole dump as one batch)", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("verdict")
    for name, value in document["overall"].items():
        check = verdict.get(name)
        status = ""
        if check is not None:
            style = _STYLE[check["status"]]
            status = f"[{style}]{check['status']}[/] [dim]({_limit(check)})[/]"
        table.add_row(name, fmt(value), status)
    stdout.print(table)
    stdout.print(step_table(document["steps"]))


def _limit(check: dict[str, Any]) -> str:
    threshold = check["threshold"]
    if isinstance(threshold, list):
        return f"ok in [{fmt(threshold[0])}, {fmt(threshold[1])}]"
    return f"limit {fmt(threshold)}"


def step_table(steps: list[dict[str, Any]]) -> Table:
    """One row per step, or per range of consecutive steps (means; worst verdict) when many."""
    group = max(1, math.ceil(len(steps) / STEP_TABLE_ROWS))
    title = (
        "Per step" if group == 1 else f"Per step (groups of {group} steps: means, worst verdict)"
    )
    table = Table(title=title, title_justify="left")
    table.add_column("step", justify="right")
    table.add_column("rows", justify="right")
    table.add_column("valid tok", justify="right")
    for label in STEP_COLUMNS.values():
        table.add_column(label, justify="right")
    table.add_column("verdict")
    for start in range(0, len(steps), group):
        chunk = steps[start : start + group]
        label = (
            str(chunk[0]["step"]) if len(chunk) == 1 else f"{chunk[0]['step']}–{chunk[-1]['step']}"
        )
        values = []
        for name in STEP_COLUMNS:
            present = [s["metrics"][name] for s in chunk if s["metrics"].get(name) is not None]
            values.append(fmt(sum(present) / len(present)) if present else "–")
        statuses = [c["status"] for s in chunk for c in evaluate(s["metrics"])]
        status = worst(statuses) if any(s["valid_tokens"] for s in chunk) else "empty"
        style = _STYLE.get(status, "dim")
        table.add_row(
            label,
            f"{sum(s['rows'] for s in chunk):,}",
            f"{sum(s['valid_tokens'] for s in chunk):,}",
            *values,
            f"[{style}]{status}[/]",
        )
    return table
