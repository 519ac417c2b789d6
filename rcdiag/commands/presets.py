"""``rcdiag presets``: the rollout-correction presets of a dialect, with their parameters."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from rcdiag.commands._common import DebugOption, DialectOption, cli_errors, parse_dialect, stdout
from rcdiag.correction.presets import PRESETS
from rcdiag.dialects import DEFAULT_DIALECT


def _parameters(config: dict[str, Any]) -> str:
    shown = {k: v for k, v in config.items() if v not in (None, False) or k == "rollout_is"}
    return ", ".join(f"{k}={v!r}" for k, v in shown.items() if v is not None)


def presets(dialect: DialectOption = None, debug: DebugOption = False) -> None:
    """List the rollout-correction presets of a dialect, their parameters and purpose."""
    with cli_errors(debug):
        chosen = parse_dialect(dialect) or DEFAULT_DIALECT
    table = Table(title=f"{chosen} presets", title_justify="left", show_lines=False)
    table.add_column("preset")
    table.add_column("purpose")
    table.add_column("verl parameters (nulls and false omitted)")
    for preset in PRESETS[chosen].values():
        table.add_row(preset.name, preset.purpose, _parameters(dict(preset.config)))
    stdout.print(table)
