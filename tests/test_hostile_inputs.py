"""Hostile inputs: every problem is one ``Error:`` line naming the file and what is wrong, exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from rcdiag.cli import app
from tests.dumps import simple_columns, write_table

runner = CliRunner()


def run(*args: object) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def error_line(*args: object) -> str:
    """The single ``Error:`` line of a run that must fail with exit 2."""
    code, stdout, stderr = run(*args)
    assert code == 2, (stdout, stderr)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr
    assert "internal error" not in lines[0] and "Traceback" not in stderr
    return lines[0]


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    return write_table(tmp_path / "dump.parquet", simple_columns(step=0))


@pytest.mark.parametrize(
    ("flags", "roles"),
    [
        (["--rollout-col", "old_log_probs"], "the rollout log-probs and the training log-probs"),
        (["--training-col", "rollout_log_probs"], "the rollout log-probs and the training"),
        (["--mask-col", "old_log_probs"], "the training log-probs and the response mask"),
        (["--mask-col", "rollout_log_probs"], "the rollout log-probs and the response mask"),
        (["--rollout-col", "x", "--training-col", "x"], "the rollout log-probs and the training"),
        (["--step-col", "response_mask"], "the response mask and the step"),
    ],
)
def test_one_column_cannot_play_two_roles(
    tmp_path: Path, dump: Path, flags: list[str], roles: str
) -> None:
    columns = simple_columns(step=0)
    columns["x"] = columns["old_log_probs"]
    path = write_table(tmp_path / "x.parquet", columns)
    for command in ("analyze", "check", "compare-presets"):
        line = error_line(command, path, *flags)
        assert str(path) in line and "would be read as both" in line and roles in line
        assert flags[1] in line


def test_duplicate_column_names_are_named(tmp_path: Path) -> None:
    lp = pa.array([[-0.5, -0.6], [-0.1]])
    names = ["rollout_log_probs", "old_log_probs", "old_log_probs"]
    pq.write_table(pa.Table.from_arrays([lp, lp, lp], names=names), tmp_path / "dup.parquet")
    line = error_line("analyze", tmp_path / "dup.parquet")
    assert "dup.parquet: the file has 2 columns named 'old_log_probs'" in line


def test_an_unsigned_step_above_int64_is_refused(tmp_path: Path) -> None:
    columns = simple_columns()
    columns["step"] = pa.array([1, 2**63 + 5, 3], pa.uint64())
    path = write_table(tmp_path / "u.parquet", columns)
    line = error_line("analyze", path)
    assert "u.parquet: row 1: column 'step' holds 9223372036854775813" in line


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--step", str(2**64)], "--step 18446744073709551616: a step is a 64-bit"),
        (["--steps", f"0:{2**63}"], "a step is a 64-bit signed integer"),
        (["--rollout-col", ""], "--rollout-col: empty column name"),
        (["--step-col", " "], "--step-col: empty column name"),
    ],
)
def test_bad_step_and_column_options(dump: Path, args: list[str], fragment: str) -> None:
    assert fragment in error_line("analyze", dump, *args)


def test_a_step_directory_contradicting_the_step_column_is_an_error(tmp_path: Path) -> None:
    write_table(tmp_path / "d" / "step=3" / "p.parquet", simple_columns(step=3))
    code, _, err = run("analyze", tmp_path / "d", "-q")
    assert code == 0 and err == "", "agreeing directory and column"
    write_table(tmp_path / "d" / "step=4" / "p.parquet", simple_columns(step=5))
    line = error_line("analyze", tmp_path / "d")
    assert "step=4/p.parquet: row 0: column 'step' holds step 5" in line
    assert "directory step=4" in line
    write_table(tmp_path / "e" / f"step={2**64}" / "p.parquet", simple_columns())
    assert "does not hold an integer step" in error_line("analyze", tmp_path / "e")


def test_non_regular_files_say_what_they_are(tmp_path: Path, dump: Path) -> None:
    fifo = tmp_path / "pipe.parquet"
    os.mkfifo(fifo)
    assert f"{fifo}: is a FIFO (named pipe), not a parquet file" in error_line("analyze", fifo)
    rules = tmp_path / "rules.toml"
    os.mkfifo(rules)  # reading it would block forever
    line = error_line("check", dump, "--rules", rules)
    assert "rules.toml: cannot read rules file (it is a FIFO (named pipe)" in line
    line = error_line("check", dump, "--baseline", tmp_path)
    assert "cannot read baseline (it is a directory" in line


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_dump_is_named(dump: Path) -> None:
    dump.chmod(0)
    try:
        assert "cannot read the file (permission denied)" in error_line("analyze", dump)
    finally:
        dump.chmod(0o644)


LATIN1 = "rules = ['é']\n".encode("latin-1")


@pytest.mark.parametrize(
    ("option", "what"),
    [
        ("--rules", "rules file"),
        ("--baseline", "baseline"),
        ("--config", "configuration"),
    ],
)
def test_text_inputs_that_are_binary_or_parquet(
    tmp_path: Path, dump: Path, option: str, what: str
) -> None:
    latin = tmp_path / "latin.txt"
    latin.write_bytes(LATIN1)
    line = error_line("check", dump, option, latin)
    assert f"{latin}: not a {what} (byte 10 is not UTF-8 text" in line
    line = error_line("check", dump, option, dump)
    assert f"{dump}: not a {what} (it looks like a parquet dump" in line


def test_results_that_are_binary(tmp_path: Path) -> None:
    latin = tmp_path / "r.json"
    latin.write_bytes(LATIN1)
    for command in ("report", "recommend"):
        line = error_line(command, "--from", latin)
        assert "r.json: not a results JSON (byte 10 is not UTF-8 text" in line


@pytest.fixture(scope="module")
def baseline_document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("baseline")
    dump = write_table(root / "d.parquet", simple_columns(8, step=0))
    code, _, err = run("baseline", dump, "-o", root / "b.json", "--replicates", 20, "-q")
    assert code == 0, err
    return json.loads((root / "b.json").read_text())


def _first_metric(doc: dict[str, Any]) -> list[Any]:
    return next(iter(doc["bootstrap"]["metrics"].values()))


BASELINE_DAMAGE = {
    "cut_short": (lambda d: _first_metric(d).pop(), "holds 19 replicates but bootstrap"),
    "unequal": (lambda d: _first_metric(d).append(0.1), "holds 21 replicates"),
    "text_replicate": (lambda d: _first_metric(d).__setitem__(3, "x"), 'holds "x", expected'),
    "not_a_list": (
        lambda d: d["bootstrap"]["metrics"].__setitem__("rollout_corr/kl", 5),
        "bootstrap.metrics['rollout_corr/kl'] is 5, expected a list",
    ),
    "text_overall": (
        lambda d: d["overall"].__setitem__("rollout_corr/kl", "high"),
        "overall['rollout_corr/kl'] is \"high\", expected a number",
    ),
    "bool_count": (
        lambda d: d["bootstrap"].__setitem__("replicates", True),
        "bootstrap.replicates is true, expected an integer",
    ),
    "text_seed": (lambda d: d["bootstrap"].__setitem__("seed", "1"), 'bootstrap.seed is "1"'),
    "one_replicate": (
        lambda d: d["bootstrap"].update(
            replicates=1, metrics={k: v[:1] for k, v in d["bootstrap"]["metrics"].items()}
        ),
        "a bootstrap needs at least 2",
    ),
    "text_veto": (
        lambda d: d["options"].__setitem__("veto_threshold", "x"),
        'options.veto_threshold is "x"',
    ),
    "list_options": (lambda d: d.__setitem__("options", []), "options is [], expected an object"),
}


@pytest.mark.parametrize("damage", sorted(BASELINE_DAMAGE))
def test_malformed_baselines_name_file_and_field(
    tmp_path: Path, dump: Path, baseline_document: dict[str, Any], damage: str
) -> None:
    document = json.loads(json.dumps(baseline_document))
    change, fragment = BASELINE_DAMAGE[damage]
    change(document)
    path = tmp_path / "b.json"
    path.write_text(json.dumps(document))
    line = error_line("check", dump, "--baseline", path)
    assert f"{path}: not a valid baseline (" in line and fragment in line


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("results")
    dump = write_table(root / "d.parquet", simple_columns(8, step=0))
    code, _, err = run("report", dump, "-o", root / "r.html", "--json", root / "r.json", "-q")
    assert code == 0, err
    return json.loads((root / "r.json").read_text())


RESULTS_DAMAGE = {
    "overall": (
        lambda d: d["overall"].__setitem__("rollout_corr/kl", "high"),
        "overall['rollout_corr/kl'] is \"high\", expected a number or null",
    ),
    "steps": (lambda d: d.__setitem__("steps", 3), "steps is 3, expected a list"),
    "step": (lambda d: d["steps"][0].__setitem__("step", "0"), 'steps[0].step is "0"'),
    "rows": (lambda d: d["source"].__setitem__("rows", 1.5), "source.rows is 1.5"),
    "paths": (lambda d: d["source"].__setitem__("paths", [1]), "source.paths[0] is 1"),
    "preset": (
        lambda d: d["presets"][0]["summary"].__setitem__("ess", [1]),
        "presets[0].summary.ess is [1]",
    ),
    "config": (
        lambda d: d["presets"][1]["config"].__setitem__("rollout_is_threshold", {}),
        "presets[1].config.rollout_is_threshold is {}",
    ),
    "profile": (
        lambda d: d["profile"]["by_length"][0].__setitem__("label", 3),
        "profile.by_length[0].label is 3, expected a string",
    ),
    "top": (
        lambda d: d["profile"]["top_sequences"]["by_abs_sum"][0].__setitem__("step", None),
        "profile.top_sequences.by_abs_sum[0].step is null, expected an integer",
    ),
    "source": (lambda d: d.__setitem__("source", []), "no 'source' object"),
    "document": (lambda d: d.clear() or d.update(schema_version=2), "unknown dialect"),
}


@pytest.mark.parametrize("damage", sorted(RESULTS_DAMAGE))
def test_malformed_results_name_file_and_field(
    tmp_path: Path, results: dict[str, Any], damage: str
) -> None:
    document = json.loads(json.dumps(results))
    change, fragment = RESULTS_DAMAGE[damage]
    change(document)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(document))
    for command in ("report", "recommend"):
        line = error_line(command, "--from", path, "-o" if command == "report" else "--json",
                          tmp_path / "out")  # fmt: skip
        assert str(path) in line and fragment in line
        assert not (tmp_path / "out").exists()


def test_a_forged_verdict_is_recomputed(tmp_path: Path, results: dict[str, Any]) -> None:
    document = json.loads(json.dumps(results))
    document["verdict"] = {"status": "<b>forged</b>", "deciding": "x"}
    document["recommendation"] = 7
    path = tmp_path / "r.json"
    path.write_text(json.dumps(document))
    out = tmp_path / "again.json"
    code, _, err = run("report", "--from", path, "-o", tmp_path / "r.html", "--json", out, "-q")
    assert code == 0, err
    again = json.loads(out.read_text())
    assert (again["verdict"], again["recommendation"]) == (
        results["verdict"],
        results["recommendation"],
    )


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["check", "{dump}", "--rule", ""], "--rule: empty rule"),
        (["compare-presets", "{dump}", "-p", ""], "--preset: empty preset name"),
        (["compare-presets", "{dump}", "-p", "none"], "leaves nothing to compare"),
        (["compare-presets", "{dump}", "-p", "none", "-p", "disabled"], "cannot be combined"),
    ],
)
def test_empty_names(dump: Path, args: list[str], fragment: str) -> None:
    assert fragment in error_line(*(a.format(dump=dump) for a in args))


@pytest.mark.parametrize("name", ["evil\nError: fake.parquet", "esc\x1bc\x07ape", "bidi\u202ename"])
def test_control_characters_in_paths_stay_on_one_escaped_line(tmp_path: Path, name: str) -> None:
    line = error_line("analyze", tmp_path / f"{name}.parquet")
    assert "no such file or directory" in line
    assert repr(name)[1:-1] in line and not any(c in line for c in "\n\x1b\x07\u202e")
