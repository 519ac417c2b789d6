"""The CLI starts fast: heavy libraries load only in the command that needs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

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
    ("command", "output"), [("analyze", ["--json", "a.json"]), ("report", ["-o", "r.html"])]
)
def test_a_quiet_run_prints_without_rich(command: str, output: list[str], tmp_path: Path) -> None:
    """``analyze --quiet`` and ``report --quiet`` print nothing, so they never import rich (~30 ms
    of a start-up), nor numpy's masked arrays (~12 ms); their files are written all the same."""
    written = tmp_path / output[1]
    code = (
        f"import sys, runpy; sys.argv = ['rcdiag', {command!r}, sys.argv[1], '--quiet', "
        f"{output[0]!r}, sys.argv[2]]\ntry:\n    runpy.run_module('rcdiag.cli', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(','.join(m for m in sys.modules if m.split('.')[0] == 'rich' or m == 'numpy.ma'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "sample_data" / "drift"), str(written)],
        check=True,
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip() == "", f"imported: {done.stdout.strip()[:200]}"
    if command == "analyze":
        assert json.loads(written.read_text())["source"]["valid_tokens"] > 0
    else:
        assert written.read_text().startswith("<!DOCTYPE html>")


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
