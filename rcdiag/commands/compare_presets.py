"""``rcdiag compare-presets``: what each rollout-correction configuration would do to a dump."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from rcdiag import api
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
    refuse_inside_dump,
    shown,
    stderr,
    stdout,
    write_output,
    write_table,
    wrote,
)
from rcdiag.commands._layout import Col, fitted_tables, header_line, paragraph
from rcdiag.commands._progress import progress_bar, warn_about_input
from rcdiag.commands._terminal import plural
from rcdiag.correction.figures import SUMMARY_FIGURES, WORSE_WHEN_LOWER
from rcdiag.errors import UsageError
from rcdiag.formatting import fmt
from rcdiag.io.paths import printable

MARK = "★"
"""Marks the compared configuration ``rcdiag recommend`` picks."""
COLUMNS: dict[str, str] = {
    "kept_token_share": "kept tok",
    "kept_sequence_share": "seq untouched",
    "rejected_sequence_share": "seq rejected",
    "weight_mass_removed": "IS mass cut",
    "ess": "ESS",
    "max_weight": "max w",
}
LEGEND = (
    "kept tok: valid tokens kept · seq untouched: sequences that lose no token · seq rejected: "
    "sequences with every token rejected · IS mass cut: share of the IS weight mass truncation "
    "removes (a bias proxy) · ESS: effective sample size of the applied weights (1 = all equal) · "
    "max w: largest applied IS weight (docs/presets.md)."
)
NO_CHANGE: dict[str, float] = {
    "kept_token_share": 1.0,
    "kept_sequence_share": 1.0,
    "rejected_sequence_share": 0.0,
    "weight_mass_removed": 0.0,
    "ess": 1.0,
    "max_weight": 1.0,
}
"""The figures of a configuration that changes nothing (no rejection, every weight 1)."""
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
    frameworks: Annotated[
        str | None,
        typer.Option(
            "--frameworks",
            "--framework",
            metavar="LIST",
            help="Also dry-run these frameworks' own correction modes with their defaults, beside "
            "verl's presets (comma list of trl, slime, openrlhf, nemo_rl, prime_rl, areal, skyrl, "
            "open_instruct, or all; `rcdiag presets --framework NAME` "
            "lists them).",
        ),
    ] = None,
    json_path: JsonOption = None,
    csv: Annotated[
        str | None,
        typer.Option(
            "--csv",
            metavar="FILE",
            help="Also write the figures and metrics of every configuration at every step as CSV "
            "(one row per step and configuration) to this file (atomically).",
        ),
    ] = None,
    parquet: Annotated[
        str | None,
        typer.Option(
            "--parquet",
            metavar="FILE",
            help="The same table as parquet (atomically).",
        ),
    ] = None,
    dialect: DialectOption = None,
    quiet: QuietOption = False,
    debug: DebugOption = False,
    dump_options: DumpOptions = ALL_STEPS,
) -> None:
    """Dry-run rollout-correction presets and your own configurations on a dump, in one pass."""
    with cli_errors(debug):
        tables = {"--csv": csv, "--parquet": parquet}
        written = outputs({"--json": json_path, **tables}, paths, {"--config": config})
        refuse_inside_dump({k: v for k, v in written.items() if k in tables}, paths)
        if sort is not None and sort not in SUMMARY_FIGURES:
            raise UsageError(f"--sort {sort!r}: expected one of {', '.join(SUMMARY_FIGURES)}")
        if grid is not None and sweep is None:
            raise UsageError("--grid needs --sweep")
        presets = chosen_presets(preset)
        if presets == [] and not config and sweep is None and frameworks is None:
            raise UsageError(
                f"--preset {NO_PRESET} leaves nothing to compare: add --config, --sweep or "
                "--frameworks"
            )
        values = None if grid is None else [v.strip() for v in grid.split(",") if v.strip()]
        if values == []:
            raise UsageError(f"--grid {grid!r}: no threshold (give comma-separated values)")
        with progress_bar(quiet) as advance:
            result = api.compare_presets(
                paths,
                presets=presets,
                configs=config or (),
                sweep=sweep,
                grid=values,
                dialect=parse_dialect(dialect),
                frameworks=frameworks,
                **dump_options.arguments(),
                progress=advance,
            )
        warn_about_input(result.source, quiet)
        if "--json" in written:
            write_output(written["--json"], result.to_json())
        for option, kind in (("--csv", "csv"), ("--parquet", "parquet")):
            if option in written:
                write_table(written[option], result.to_arrow(), kind)
    if quiet:
        return
    # the terminal shows the whole dump's figures and the worst steps, not every step
    overview = dataclasses.replace(result, presets=tuple(p.without_steps() for p in result.presets))
    advice = result.recommendation
    show(overview.to_json(), sort, {} if advice is None else advice.to_json())
    for option in ("--json", "--csv", "--parquet"):
        if option in written:
            wrote(written[option])


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


def _sort_key(figure: str) -> Callable[[dict[str, Any]], float]:
    def key(entry: dict[str, Any]) -> float:
        value = entry["summary"].get(figure)
        if value is None or math.isnan(value):
            return math.inf
        return value if figure not in WORSE_WHEN_LOWER else -value

    return key


def _unchanged(figure: str, worst: dict[str, Any] | None) -> bool:
    """The worst step of ``figure`` is the value of a configuration that changes nothing."""
    return worst is None or (figure in NO_CHANGE and worst["value"] == NO_CHANGE[figure])


def worst_step_rows(presets: list[dict[str, Any]]) -> tuple[list[list[Any]], list[str]]:
    """For each configuration and figure, its worst step (value @ step), ``no change`` where no
    step differs from doing nothing; configurations that change nothing at any step are left out
    (returned apart, by name)."""
    rows, unchanged = [], []
    for entry in presets:
        worst_steps = entry["summary"]["worst_steps"]
        if all(_unchanged(f, worst_steps.get(f)) for f in COLUMNS):
            unchanged.append(entry["name"])
            continue
        cells: list[Any] = [shown(entry["name"])]
        for figure in COLUMNS:
            worst = worst_steps.get(figure)
            if worst is None:
                cells.append("–")
            elif _unchanged(figure, worst):
                cells.append(Text("no change", style="dim"))
            else:
                cells.append(f"{_cell(figure, worst['value'])} @{worst['step']}")
        rows.append(cells)
    return rows, unchanged


def recommended_names(presets: list[dict[str, Any]], recommendation: dict[str, Any]) -> set[str]:
    """The compared configurations equal to the one ``rcdiag recommend`` picks (none for a dump
    bug, or when it picks a configuration that was not compared)."""
    choices = recommendation.get("choices") or []
    if not choices:
        return set()
    config = choices[0]["config"]
    return {entry["name"] for entry in presets if entry["config"] == config}


def _named(entry: dict[str, Any], recommended: set[str]) -> Text:
    name = Text(printable(entry["name"]))
    if entry["name"] in recommended:
        name.stylize("bold green")
        name.append(" " + MARK, style="bold green")
    return name


def show(document: dict[str, Any], sort: str | None, recommendation: dict[str, Any]) -> None:
    """One row per configuration (the recommended one marked), the worst steps, the sweep, a
    legend, then warnings."""
    source = document["source"]
    stdout.print(
        header_line(
            stdout,
            "rcdiag compare-presets",
            [
                f"dialect {document['dialect']}",
                f"{source['rows']:,} rows",
                f"{source['valid_tokens']:,} valid tokens",
                plural(source["steps"], "step"),
            ],
        )
    )
    if recommendation.get("dump_bug"):
        stdout.print(
            paragraph(
                printable(
                    f"Not applicable: the dump shows a bug in how it was made "
                    f"({recommendation['dump_bug']}). Fix the dump: the figures below describe "
                    "the bug, not what a correction would do to training."
                ),
                style="bold yellow",
            )
        )
    presets = document["presets"]
    figures = [Col(label, "right") for label in COLUMNS.values()]
    if presets:
        ordered = sorted(presets, key=_sort_key(sort)) if sort else presets
        recommended = recommended_names(presets, recommendation)
        rows = [
            [_named(e, recommended), *(_cell(f, e["summary"].get(f)) for f in COLUMNS)]
            for e in ordered
        ]
        for table in fitted_tables(
            stdout, "Configurations (overall)", [Col("configuration")], figures, rows
        ):
            stdout.print(table)
        show_recommended(recommendation, recommended)
        if source["steps"] > 1:
            worst_rows, unchanged = worst_step_rows(ordered)
            if worst_rows:
                for table in fitted_tables(
                    stdout,
                    "Worst step of each figure (value @ step)",
                    [Col("configuration")],
                    figures,
                    worst_rows,
                ):
                    stdout.print(table)
            if unchanged:
                stdout.print(
                    paragraph(
                        f"No change at any step (left out above): {', '.join(map(printable, unchanged))}.",
                        style="dim",
                    )
                )
    if "sweep" in document:
        sweep = document["sweep"]
        rows = [
            [point["threshold"], *(_cell(f, point["summary"].get(f)) for f in COLUMNS)]
            for point in sweep["points"]
        ]
        for table in fitted_tables(
            stdout,
            f"Sweep of {sweep['target']} (overall)",
            [Col("threshold", "right")],
            figures,
            rows,
        ):
            stdout.print(table)
    if presets or "sweep" in document:
        stdout.print(paragraph(LEGEND, style="dim"))
    warn_fully_rejected(presets)


def show_recommended(recommendation: dict[str, Any], recommended: set[str]) -> None:
    """Which compared configuration ``rcdiag recommend`` picks, or why none is marked."""
    choices = recommendation.get("choices") or []
    if recommended:
        line = f"{MARK} recommended for this dump (rcdiag recommend says why)."
    elif choices:
        line = (
            f"rcdiag recommend picks a configuration not compared here: {choices[0]['name']} "
            f"({choices[0]['title']})."
        )
    elif recommendation.get("dump_bug"):
        line = (
            f"No configuration is recommended: the dump shows a bug in how it was made "
            f"({recommendation['dump_bug']}); rcdiag recommend says what to fix."
        )
    else:
        line = " ".join(recommendation.get("notes") or [])
    if line:
        stdout.print(paragraph(printable(line), style="green" if recommended else ""))


def warn_fully_rejected(presets: list[dict[str, Any]]) -> None:
    """One warning for the configurations that reject every token of some steps."""
    emptied = [(e["name"], e["summary"]["fully_rejected_steps"]) for e in presets]
    listed = [
        f"{shown(name)} (step{'s' if len(steps) > 1 else ''} {_steps_text(steps)})"
        for name, steps in emptied
        if steps
    ]
    if len(listed) == 1:
        name, steps = next((n, st) for n, st in emptied if st)
        stderr.print(
            f"[yellow]Warning:[/] {shown(name)} rejects every token of step(s) "
            f"{_steps_text(steps)}; verl's loss has nothing to train on there."
        )
    elif listed:
        stderr.print(
            "[yellow]Warning:[/] these configurations reject every token of some steps, where "
            f"verl's loss has nothing to train on: {'; '.join(listed)}."
        )


def _steps_text(steps: list[int]) -> str:
    """``9, 11–19``: consecutive steps as ranges.

    Example:
        >>> _steps_text([9, 11, 12, 13, 19]), _steps_text([4])
        ('9, 11–13, 19', '4')
    """
    runs: list[list[int]] = []
    for step in steps:
        if runs and step == runs[-1][-1] + 1:
            runs[-1].append(step)
        else:
            runs.append([step])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}–{r[-1]}" for r in runs)
