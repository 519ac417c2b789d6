"""``rcdiag presets``: the rollout-correction presets of a dialect, with their parameters."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from rcdiag.commands._common import DebugOption, DialectOption, cli_errors, parse_dialect, stdout
from rcdiag.commands._layout import Col, needed_width, new_table
from rcdiag.correction.presets import PRESETS
from rcdiag.dialects import DEFAULT_DIALECT


def _parameters(config: dict[str, Any]) -> str:
    shown = {k: v for k, v in config.items() if v not in (None, False) or k == "rollout_is"}
    return ", ".join(f"{k}={v!r}" for k, v in shown.items() if v is not None)


def presets(dialect: DialectOption = None, debug: DebugOption = False) -> None:
    """List the rollout-correction presets of a dialect, their parameters and purpose."""
    with cli_errors(debug):
        chosen = parse_dialect(dialect) or DEFAULT_DIALECT
    rows = [
        (preset.name, preset.purpose, _parameters(dict(preset.config)))
        for preset in PRESETS[chosen].values()
    ]
    title = f"{chosen} presets (verl parameters; nulls and false omitted)"
    wide = [Col("preset"), Col("purpose", wrap=True), Col("verl parameters")]
    if needed_width(stdout, wide, rows) <= stdout.width:  # every parameter list on one line
        table = new_table(title, wide)
        for name, purpose, parameters in rows:
            table.add_row(name, purpose, Text(parameters, style="dim"))
    else:  # stacked: the parameters under the purpose, wrapped between parameters
        table = new_table(title, [Col("preset"), Col("purpose and verl parameters", wrap=True)])
        for name, purpose, parameters in rows:
            table.add_row(name, Text.assemble(purpose, "\n", (parameters, "dim")))
    stdout.print(table)
