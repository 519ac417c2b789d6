"""Progress on long work: a bar on a terminal's stderr for the commands that read or write a dump
(``watch`` and ``synth`` included), none in a pipe or a test's captured output, and in a Jupyter
notebook a bar under the cell drawn by IPython's display, none in a plain script."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

import rcdiag
from rcdiag.cli import app
from rcdiag.commands import _progress
from rcdiag.synth import config_for, write_synthetic_dump

runner = CliRunner()
pytestmark = pytest.mark.xdist_group("progress")


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("progress") / "run"
    config = config_for("drift", steps=3, rows_per_step=16, mean_length=24)
    write_synthetic_dump(root, config, shards=True)
    return root


def terminal(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """stderr as a terminal: what the bar draws lands in the returned buffer."""
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=100, stderr=True)
    monkeypatch.setattr(_progress, "stderr", console)
    return screen


COMMANDS = {
    "analyze": lambda d, out: ["analyze", str(d)],
    "watch": lambda d, out: ["watch", str(d), "--interval", "0.1", "--exit-when-idle", "0"],
    "synth": lambda d, out: ["synth", str(out / "new"), "--steps", "3", "--rows-per-step", "8"],
    "convert": lambda d, out: ["convert", str(d), "-o", str(out / "one.parquet")],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_terminal_gets_a_bar_on_stderr(
    command: str, dump: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    screen = terminal(monkeypatch)
    done = runner.invoke(app, COMMANDS[command](dump, tmp_path))
    assert done.exit_code == 0, done.output
    drawn = screen.getvalue()
    unit = "steps" if command == "synth" else "rows"
    assert f" {unit}" in drawn and "\x1b[" in drawn, drawn  # drawn, then cleared (transient)
    label = "writing" if command == "synth" else "reading"
    assert label in drawn
    assert label not in done.stdout and "\x1b[" not in done.stdout  # never on stdout


@pytest.mark.parametrize("command", list(COMMANDS))
def test_piped_output_carries_no_bar(command: str, dump: Path, tmp_path: Path) -> None:
    done = runner.invoke(app, COMMANDS[command](dump, tmp_path))
    assert done.exit_code == 0, done.output
    assert "\x1b[" not in done.stderr and "reading" not in done.stderr
    assert "\x1b[" not in done.stdout


def test_the_api_is_silent_outside_a_notebook(
    dump: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[tuple[int, int]] = []
    rcdiag.analyze(dump, progress=lambda read, total: seen.append((read, total)))
    assert seen[0] == (0, 48)  # the total at once, before the first batch
    assert seen[-1] == (48, 48)  # then per batch, up to every row
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)
    rcdiag.analyze(dump)
    out = capsys.readouterr()
    assert out.out == out.err == ""


def test_a_notebook_shows_a_bar_then_one_line(dump: Path, tmp_path: Path) -> None:
    pytest.importorskip("ipykernel")
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    where = tmp_path / "run"
    shutil.copytree(dump, where)
    cells = [
        "import rcdiag",
        f"result = rcdiag.analyze({str(where)!r})",
        f"seen = []\nresult = rcdiag.analyze({str(where)!r}, progress=lambda *a: seen.append(a))",
        f"import rcdiag.api\ndocument = rcdiag.recommend({str(where)!r})",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3").execute()
    outputs = [cell.outputs for cell in notebook.cells]
    for shown in (outputs[1], outputs[3]):
        (line,) = [o for o in shown if o.output_type == "display_data"]  # one bar, updated
        assert line.data["text/plain"].startswith("rcdiag: read 48 rows in ")
        assert 'class="rcdiag-progress"' in line.data["text/html"]
    assert outputs[2] == []  # a progress callback of one's own: no bar
