"""The CLI starts fast: heavy libraries load only in the command that needs them."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("torch", "plotly", "jinja2", "polars", "yaml")


def test_help_does_not_import_heavy_libraries() -> None:
    code = (
        "import sys; from typer.testing import CliRunner; from rcdiag.cli import app; "
        "r = CliRunner().invoke(app, ['--help']); assert r.exit_code == 0, r.output; "
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert loaded == "", f"imported at start-up: {loaded}"


@pytest.mark.parametrize(
    "command", ["analyze", "compare-presets", "presets", "synth", "report", "recommend", "check"]
)
def test_every_command_has_help(command: str) -> None:
    from typer.testing import CliRunner

    from rcdiag.cli import app

    result = CliRunner().invoke(app, [command, "--help"])
    assert result.exit_code == 0
    assert len(result.stdout.strip()) > 40
