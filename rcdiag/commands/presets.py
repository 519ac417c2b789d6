"""``rcdiag presets``: the rollout-correction presets of a dialect, with their parameters."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.text import Text

from rcdiag.commands._common import (
    DebugOption,
    DialectOption,
    cli_errors,
    parse_dialect,
    parse_frameworks_option,
    stdout,
)
from rcdiag.commands._layout import Col, needed_width, new_table
from rcdiag.correction.presets import PRESETS
from rcdiag.dialects import DEFAULT_DIALECT


def _parameters(config: dict[str, Any]) -> str:
    shown = {
        k: v for k, v in config.items() if (v is not None and v is not False) or k == "rollout_is"
    }
    return ", ".join(f"{k}={v!r}" for k, v in shown.items() if v is not None)


def presets(
    dialect: DialectOption = None,
    framework: Annotated[
        str | None,
        typer.Option(
            "--framework",
            metavar="LIST",
            help="List these frameworks' correction modes instead (comma list of trl, slime, "
            "openrlhf, nemo_rl, prime_rl, areal, skyrl, open_instruct, or all), with "
            "their own keys and defaults (docs/frameworks.md).",
        ),
    ] = None,
    debug: DebugOption = False,
) -> None:
    """List the rollout-correction presets of a dialect, their parameters and purpose."""
    with cli_errors(debug):
        chosen = parse_dialect(dialect) or DEFAULT_DIALECT
        frameworks = parse_frameworks_option(framework, "--framework")
    if frameworks:
        for entry in frameworks:
            rows = [(p.name, p.purpose, _parameters(dict(p.config))) for p in entry.presets]
            if not rows:
                stdout.print(
                    f"{entry.title}: rcdiag dry-runs no correction mode of it (metrics only: "
                    f"analyze --frameworks {entry.id})."
                )
                continue
            show_table(
                f"{entry.title} correction modes (defaults of {entry.pin.version}; nulls and "
                "false omitted)",
                rows,
                f"{entry.title} keys",
            )
        return
    rows = [
        (preset.name, preset.purpose, _parameters(dict(preset.config)))
        for preset in PRESETS[chosen].values()
    ]
    show_table(f"{chosen} presets (verl parameters; nulls and false omitted)", rows)


def show_table(title: str, rows: list[tuple[str, str, str]], keys: str = "verl parameters") -> None:
    """One row per preset: on one line when the parameters fit, else stacked under the purpose."""
    wide = [Col("preset"), Col("purpose", wrap=True), Col(keys)]
    if needed_width(stdout, wide, rows) <= stdout.width:  # every parameter list on one line
        table = new_table(title, wide)
        for name, purpose, parameters in rows:
            table.add_row(name, purpose, Text(parameters, style="dim"))
    else:  # stacked: the parameters under the purpose, wrapped between parameters
        table = new_table(title, [Col("preset"), Col(f"purpose and {keys}", wrap=True)])
        for name, purpose, parameters in rows:
            table.add_row(name, Text.assemble(purpose, "\n", (parameters, "dim")))
    stdout.print(table)
