"""``rcdiag compare-presets``: what each rollout-correction configuration would do to a dump."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from rcdiag.commands._common import (
    ALL_STEPS,
    DebugOption,
    DialectOption,
    DumpOptions,
    JsonOption,
    PathsArgument,
    QuietOption,
    cli_errors,
    outputs,
    parse_dialect,
    reads_dump,
    shown,
    stderr,
    stdout,
    write_output,
    wrote,
)
from rcdiag.commands._terminal import progress_bar, warn_about_input
from rcdiag.correction.compare import SUMMARY_FIGURES, WORSE_WHEN_LOWER
from rcdiag.correction.loading import resolve_configs
from rcdiag.correction.sweep import build_sweep
from rcdiag.errors import UsageError
from rcdiag.formatting import fmt
from rcdiag.model import ComparisonResult, ConfigurationResult
from rcdiag.results import compare_dump

COLUMNS: dict[str, str] = {
    "kept_token_share": "kept tok",
    "kept_sequence_share": "seq untouched",
    "rejected_sequence_share": "seq rejected",
    "weight_mass_removed": "IS mass cut",
    "ess": "ESS",
    "max_weight": "max w",
}
NO_PRESET = "none"
"""``--preset none``: compare the --config files (or the --sweep) alone."""

PERCENT = {
    "kept_token_share",
    "kept_sequence_share",
    "rejected_sequence_share",
    "weight_mass_removed",
}


@reads_dump
def compare_presets(
    paths: PathsArgument,
    preset: Annotated[
        list[str] | None,
        typer.Option(
            "--preset",
            "-p",
            help="A preset to compare (repeatable; default: every preset of the dialect, also "
            "beside --config files; --preset none: the --config files or the --sweep alone).",
        ),
    ] = None,
    config: Annotated[
        list[Path] | None,
        typer.Option(
            "--config",
            "-c",
            help="A YAML configuration (repeatable): rollout-correction keys, bare or under "
            "algorithm: rollout_correction:. Named after the file.",
        ),
    ] = None,
    sweep: Annotated[
        str | None,
        typer.Option(
            "--sweep",
            help="Also evaluate a grid of thresholds for a criterion (e.g. seq_mean_k1) or an IS "
            "level (is_token, is_sequence; legacy also rs_token, rs_sequence, rs_geometric).",
        ),
    ] = None,
    grid: Annotated[
        str | None,
        typer.Option(
            "--grid", help="Comma-separated thresholds for --sweep (default: per target)."
        ),
    ] = None,
    sort: Annotated[
        str | None,
        typer.Option(
            "--sort",
            help=f"Sort the table by a figure, best first: {', '.join(SUMMARY_FIGURES)}.",
        ),
    ] = None,
    json_path: JsonOption = None,
    dialect: DialectOption = None,
    quiet: QuietOption = False,
    debug: DebugOption = False,
    dump_options: DumpOptions = ALL_STEPS,
) -> None:
    """Dry-run rollout-correction presets and your own configurations on a dump, in one pass."""
    with cli_errors(debug):
        written = outputs({"--json": json_path}, paths, {"--config": config})
        if sort is not None and sort not in SUMMARY_FIGURES:
            raise UsageError(f"--sort {sort!r}: expected one of {', '.join(SUMMARY_FIGURES)}")
        if grid is not None and sweep is None:
            raise UsageError("--grid needs --sweep")
        presets = chosen_presets(preset)
        if presets == [] and not config and sweep is None:
            raise UsageError(
                f"--preset {NO_PRESET} leaves nothing to compare: add --config or --sweep"
            )
        chosen, configs = resolve_configs(presets, config or (), parse_dialect(dialect))
        planned_sweep = None
        if sweep is not None:
            values = None if grid is None else [v.strip() for v in grid.split(",") if v.strip()]
            if values == []:
                raise UsageError(f"--grid {grid!r}: no threshold (give comma-separated values)")
            planned_sweep = build_sweep(sweep, chosen, values)
            if preset is None and config is None:
                configs = []  # a sweep alone: only its grid
        spec = dump_options.spec(paths)
        with progress_bar(quiet) as advance:
            document = compare_dump(spec, configs, chosen, planned_sweep, advance)
        warn_about_input(document.source, quiet)
        if "--json" in written:
            write_output(written["--json"], document.to_json())
    if quiet:
        return
    show(document, sort)
    if "--json" in written:
        wrote(written["--json"])


def chosen_presets(given: list[str] | None) -> list[str] | None:
    """The ``--preset`` values: None (not given) means every preset; ``none`` means no preset.

    Raises:
        UsageError: ``none`` given with a preset name, or an empty name.
    """
    if given is None:
        return None
    if any(not name.strip() for name in given):
        raise UsageError("--preset: empty preset name (`rcdiag presets` lists them)")
    if NO_PRESET in given:
        if len(given) > 1:
            raise UsageError(f"--preset {NO_PRESET} cannot be combined with a preset name")
        return []
    return given


def _cell(figure: str, value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{100 * value:.2f}%" if figure in PERCENT else fmt(value)


def _sort_key(figure: str) -> Callable[[ConfigurationResult], float]:
    def key(entry: ConfigurationResult) -> float:
        value = entry.summary.get(figure)
        if value is None or math.isnan(value):
            return math.inf
        return value if figure not in WORSE_WHEN_LOWER else -value

    return key


def worst_step_table(presets: Sequence[ConfigurationResult]) -> Table:
    """For each configuration and figure, its worst step: value @ step."""
    table = Table(title="Worst step of each figure (value @ step)", title_justify="left")
    table.add_column("configuration")
    for label in COLUMNS.values():
        table.add_column(label, justify="right")
    for entry in presets:
        cells = []
        for figure in COLUMNS:
            worst = entry.worst_steps.get(figure)
            cells.append("–" if worst is None else f"{_cell(figure, worst.value)} @{worst.step}")
        table.add_row(shown(entry.name), *cells)
    return table


def show(document: ComparisonResult, sort: str | None) -> None:
    """One row per configuration, then the sweep, then warnings."""
    source = document.source
    stdout.print(
        f"[bold]rcdiag compare-presets[/] · dialect {document.dialect} · {source.rows:,} rows "
        f"· {source.valid_tokens:,} valid tokens · {source.steps} steps"
    )
    presets = document.presets
    if presets:
        ordered = sorted(presets, key=_sort_key(sort)) if sort else presets
        table = Table(title="Configurations (overall)", title_justify="left")
        table.add_column("configuration")
        for label in COLUMNS.values():
            table.add_column(label, justify="right")
        for entry in ordered:
            summary = entry.summary
            table.add_row(shown(entry.name), *(_cell(f, summary.get(f)) for f in COLUMNS))
        stdout.print(table)
        if source.steps > 1:
            stdout.print(worst_step_table(ordered))
    if document.sweep is not None:
        sweep = document.sweep
        table = Table(title=f"Sweep of {sweep.target} (overall)", title_justify="left")
        table.add_column("threshold", justify="right")
        for label in COLUMNS.values():
            table.add_column(label, justify="right")
        for point in sweep.points:
            table.add_row(point.threshold, *(_cell(f, point.summary.get(f)) for f in COLUMNS))
        stdout.print(table)
    for entry in presets:
        emptied = entry.fully_rejected_steps
        if emptied:
            listed = ", ".join(map(str, emptied[:10])) + (" …" if len(emptied) > 10 else "")
            stderr.print(
                f"[yellow]Warning:[/] {shown(entry.name)} rejects every token of step(s) {listed}; "
                "verl's loss has nothing to train on there."
            )
