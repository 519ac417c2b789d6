"""Output paths: no run writes over one of its inputs, two outputs never share a path, a path naming
a directory is refused — all before anything is read, as one ``Error:`` line and exit 2."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rcdiag.cli import app
from tests.dumps import simple_columns, write_table

runner = CliRunner()


def run(*args: object, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args], env=env)
    return result.exit_code, result.stdout, result.stderr


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    """A dump directory of two files and one file of every other kind of input."""
    root = tmp_path / "in"
    files = {
        "dump": root / "dump",
        "part": write_table(root / "dump" / "step=0" / "part-0.parquet", simple_columns()),
        "other": write_table(root / "dump" / "step=1" / "part-0.parquet", simple_columns()),
        "rules": root / "rules.toml",
        "config": root / "mine.yaml",
        "results": root / "results.json",
        "baseline": root / "baseline.json",
    }
    files["rules"].write_text('rules = ["rollout_corr/k3_kl.overall < 1"]\n')
    files["config"].write_text("rollout_is: token\nrollout_is_threshold: 2.0\n")
    code, _, err = run("analyze", files["dump"], "--json", files["results"], "-q")
    assert code == 0, err
    code, _, err = run("baseline", files["dump"], "-o", files["baseline"], "-q")
    assert code == 0, err
    return files


def refused(args: list[object], inputs: dict[str, Path], fragment: str) -> str:
    """Run, expect exit 2 with one Error line holding ``fragment``, and no input changed."""
    before = {name: digest(p) for name, p in inputs.items() if p.is_file()}
    code, stdout, stderr = run(*args)
    assert code == 2, (stdout, stderr)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr
    assert fragment in lines[0], lines[0]
    assert {name: digest(p) for name, p in inputs.items() if p.is_file()} == before
    return lines[0]


COMMAND_OUTPUTS = [
    ("analyze", "--json"),
    ("analyze", "--html"),
    ("compare-presets", "--json"),
    ("report", "-o"),
    ("report", "--json"),
    ("recommend", "--json"),
    ("check", "--json"),
    ("check", "--junit"),
    ("check", "--markdown"),
    ("baseline", "-o"),
]


@pytest.mark.parametrize(("command", "flag"), COMMAND_OUTPUTS)
def test_no_output_may_overwrite_a_file_of_the_dump(
    inputs: dict[str, Path], command: str, flag: str
) -> None:
    line = refused([command, inputs["dump"], flag, inputs["part"]], inputs, "an input of this run")
    assert str(inputs["part"]) in line and "a file of the dump" in line


@pytest.mark.parametrize(
    ("command", "option", "target"),
    [
        ("check", "--rules", "rules"),
        ("check", "--baseline", "baseline"),
        ("check", "--config", "config"),
        ("compare-presets", "--config", "config"),
        ("report", "--from", "results"),
        ("recommend", "--from", "results"),
    ],
)
def test_no_output_may_overwrite_another_input(
    inputs: dict[str, Path], command: str, option: str, target: str
) -> None:
    dump = [] if option == "--from" else [inputs["dump"]]
    flag = "--junit" if command == "check" else "--json"
    args = [command, *dump, option, inputs[target], flag, inputs[target]]
    if command == "check" and option == "--config":
        args += ["-r", "preset:mine/rollout_corr/rollout_is_mean.overall < 9"]
    line = refused(args, inputs, "an input of this run")
    assert f"({option})" in line


def test_links_and_globs_name_the_same_file(inputs: dict[str, Path], tmp_path: Path) -> None:
    soft = tmp_path / "soft.json"
    soft.symlink_to(inputs["part"])
    hard = tmp_path / "hard.json"
    os.link(inputs["other"], hard)
    line = refused(["analyze", inputs["dump"], "--json", soft], inputs, "the same file as")
    assert str(inputs["part"]) in line
    refused(["analyze", inputs["dump"], "--html", hard], inputs, "the same file as")
    glob = str(inputs["dump"] / "step=*" / "*.parquet")
    refused(["analyze", glob, "--json", inputs["other"]], inputs, "an input of this run")
    assert soft.is_symlink() and hard.stat().st_nlink == 2


def test_the_step_summary_is_an_output_too(inputs: dict[str, Path], tmp_path: Path) -> None:
    env = {"GITHUB_STEP_SUMMARY": str(inputs["rules"])}
    before = digest(inputs["rules"])
    code, _, stderr = run("check", inputs["dump"], "--rules", inputs["rules"], "-q", env=env)
    assert code == 2 and "$GITHUB_STEP_SUMMARY" in stderr and "(--rules)" in stderr
    assert digest(inputs["rules"]) == before
    md = tmp_path / "summary.md"
    env = {"GITHUB_STEP_SUMMARY": str(md)}
    code, _, stderr = run("check", inputs["dump"], "--markdown", md, "-q", env=env)
    assert code == 2 and "are the same file" in stderr


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--json", "{out}/r.json", "--html", "{out}/r.json"], "are the same file"),
        (["--json", "{out}/nosuch/"], "names a directory (it ends in /)"),
        (["--json", "{out}"], "is a directory; give a file name"),
        (["--html", "{out}/file.txt/r.html"], "is not a directory"),
        (["--json", ""], "--json: empty path"),
    ],
)
def test_bad_output_paths_are_refused_before_reading(
    inputs: dict[str, Path], tmp_path: Path, flags: list[str], fragment: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "file.txt").write_text("keep me\n")
    args = ["analyze", tmp_path / "missing.parquet", *(f.format(out=out) for f in flags)]
    refused(args, inputs, fragment)  # the missing dump is never looked at
    assert sorted(p.name for p in out.iterdir()) == ["file.txt"], "nothing written"
    assert (out / "file.txt").read_text() == "keep me\n"


def test_report_default_output_is_checked_too(
    inputs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # report writes report.html by default
    (tmp_path / "report.html").mkdir()
    refused(["report", inputs["dump"]], inputs, "--output report.html: is a directory")


def test_an_output_fifo_without_reader_is_an_error_not_a_hang(
    inputs: dict[str, Path], tmp_path: Path
) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    refused(
        ["analyze", inputs["dump"], "--json", fifo, "-q"], inputs, "a FIFO that no process reads"
    )
    assert fifo.exists() and not fifo.is_file(), "the FIFO is not replaced by a file"


def test_dev_null_is_written_in_place(inputs: dict[str, Path]) -> None:
    code, _, stderr = run("analyze", inputs["dump"], "--json", os.devnull, "-q")
    assert code == 0 and stderr == ""
    assert Path(os.devnull).is_char_device()
