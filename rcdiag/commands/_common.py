"""What every command shares: common options, error handling at the CLI edge, JSON writing."""

from __future__ import annotations

import contextlib
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from rcdiag.errors import RcdiagError
from rcdiag.io.writer import atomic_write

EXIT_OK = 0
EXIT_CHECKS_FAILED = 1
EXIT_BAD_INPUT = 2

DebugOption = Annotated[bool, typer.Option("--debug", help="Show the full traceback on errors.")]
JsonOption = Annotated[
    Path | None,
    typer.Option("--json", help="Also write the results as JSON to this file (atomically)."),
]

# soft_wrap: a message naming a long path stays one line (tables still fit the width).
stdout = Console(soft_wrap=True)
if not stdout.is_terminal:  # logs and pipes: wide enough for the step table
    stdout = Console(width=140, soft_wrap=True)
stderr = Console(stderr=True, soft_wrap=True)


@contextlib.contextmanager
def cli_errors(debug: bool) -> Iterator[None]:
    """Turn library errors into one ``Error: …`` line and exit code 2 (a traceback with --debug)."""
    try:
        yield
    except RcdiagError as exc:
        if debug:
            raise
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"Error: {message}", file=sys.stderr)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except KeyboardInterrupt:
        print("Error: interrupted", file=sys.stderr)
        raise typer.Exit(130) from None


def json_safe(value: Any) -> Any:
    """NaN and ±inf become ``null`` (contract §4); containers are converted recursively."""
    if isinstance(value, float):
        return value + 0.0 if math.isfinite(value) else None  # + 0.0 turns -0.0 into 0.0
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def write_json(path: Path, document: dict[str, Any]) -> None:
    """Write ``document`` to ``path`` atomically, NaN as null."""
    with atomic_write(path) as handle:
        json.dump(json_safe(document), handle, indent=2, allow_nan=False)
        handle.write("\n")
