"""The two verl dialects rcdiag speaks (docs/presets.md)."""

from __future__ import annotations

from typing import Literal, get_args

Dialect = Literal["latest", "legacy"]
DIALECTS: tuple[str, ...] = get_args(Dialect)
DEFAULT_DIALECT: Dialect = "latest"
