"""What a person reading piped output finds: no trailing spaces, the asked-for framework's
configuration first, and ``report`` saying where it wrote without ``-o``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

DRIFT = Path(__file__).resolve().parent.parent / "sample_data" / "drift"


def rcdiag(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    command = [sys.executable, "-c", "from rcdiag.cli import main; main()", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env, check=False)


@pytest.mark.parametrize(
    "args",
    [
        ["analyze", str(DRIFT)],
        ["analyze", str(DRIFT), "--dialect", "legacy"],
        ["recommend", str(DRIFT), "--framework", "trl"],
        ["compare-presets", str(DRIFT)],
    ],
)
def test_piped_output_has_no_trailing_spaces(args: list[str]) -> None:
    done = rcdiag(*args)
    assert done.returncode == 0, done.stderr
    lines = (done.stdout + done.stderr).splitlines()
    assert len(lines) > 10
    assert [line for line in lines if line != line.rstrip()] == []


def test_recommend_shows_the_asked_framework_first() -> None:
    out = rcdiag("recommend", str(DRIFT), "--framework", "trl").stdout
    assert out.index("TRL configuration") < out.index("verl YAML") < out.index("Python")


def test_report_without_output_says_where_it_wrote(tmp_path: Path) -> None:
    done = rcdiag("report", str(DRIFT), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    page = tmp_path / "report.html"
    assert page.is_file()
    assert f"wrote {page}" in done.stderr and "no -o given" in done.stderr
