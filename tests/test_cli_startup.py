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


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["analyze", "--jsn", "x"], "No such option: --jsn"),
        (["analyse", "x"], "No such command 'analyse'"),
        (["analyze"], "Missing argument 'paths'"),
        (["report", "--top", "-1", "x.parquet"], "Invalid value for '--top'"),
    ],
)
def test_usage_errors_are_one_line_from_the_console_script(args: list[str], fragment: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from rcdiag.cli import main; main()", *args],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and fragment in lines[0], done.stderr
