"""`rcdiag analyze` end to end: inputs, options, outputs and every kind of bad input."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from rcdiag.cli import app
from rcdiag.io.writer import write_dump
from tests.dumps import simple_columns, write_table

runner = CliRunner()


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def analyze_json(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "out.json"
    code, _, err = run("analyze", *args, "--json", str(out), "--quiet")
    assert code == 0, err
    return json.loads(out.read_text())


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    return write_table(tmp_path / "dump.parquet", simple_columns())


def test_analyze_prints_summary_and_writes_contract_json(dump: Path, tmp_path: Path) -> None:
    out = tmp_path / "res" / "out.json"
    code, stdout, _ = run("analyze", dump, "--json", out)
    assert code == 0
    assert "rollout_corr/kl" in stdout and "Per step" in stdout
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == 2 and doc["dialect"] == "latest"
    assert doc["source"] == {
        "paths": [str(dump)],
        "rows": 3,
        "tokens": 6,
        "valid_tokens": 6,
        "steps": 1,
        "empty_steps": [],
        "dropped_nonfinite": 0,
        "positive_log_probs": 0,
        "first_positive_log_prob": None,
    }
    assert set(doc) >= {"rcdiag_version", "overall", "steps", "checks"}
    assert doc["steps"][0]["step"] == 0 and doc["steps"][0]["rows"] == 3
    assert {c["status"] for c in doc["checks"]} <= {"healthy", "watch", "act"}
    assert doc["diagnosis"]["verdict"] in {"healthy", "watch", "act"}
    assert not [p for p in out.parent.iterdir() if p.name != "out.json"], "no temp file left"


def test_json_writes_nan_as_null_and_never_nan_tokens(tmp_path: Path) -> None:
    columns = simple_columns(2, step=0)
    extra = {"rollout_log_probs": [[-1.0]], "old_log_probs": [[-1.0]], "response_mask": [[0]]}
    extra["step"] = [7]
    for k in columns:
        columns[k] = columns[k] + extra[k]
    path = write_table(tmp_path / "d.parquet", columns)
    out = tmp_path / "o.json"
    code, _, err = run("analyze", path, "--json", out)
    assert code == 0
    assert "step 7 has no valid token" in " ".join(err.split())
    text = out.read_text()
    assert "NaN" not in text and "Infinity" not in text
    step7 = json.loads(text)["steps"][1]
    assert step7["step"] == 7 and step7["valid_tokens"] == 0
    assert all(v is None for v in step7["metrics"].values())


@pytest.mark.parametrize(
    ("rollout", "training", "flags"),
    [
        ("rollout_log_prob", "old_log_prob", []),
        ("rollout_log_probs", "training_log_probs", []),
        ("lp_vllm", "lp_fsdp", ["--rollout-col", "lp_vllm", "--training-col", "lp_fsdp"]),
    ],
)
def test_column_aliases_and_flags(tmp_path: Path, rollout: str, training: str, flags: list) -> None:
    base = simple_columns()
    columns = {rollout: base["rollout_log_probs"], training: base["old_log_probs"]}
    reference = analyze_json(tmp_path, str(write_table(tmp_path / "a.parquet", base)))
    doc = analyze_json(tmp_path, str(write_table(tmp_path / "b.parquet", columns)), *flags)
    assert doc["overall"] == reference["overall"]


@pytest.mark.parametrize("mask_type", [pa.bool_(), pa.int8(), pa.int64(), pa.uint8()])
def test_mask_types_agree(tmp_path: Path, mask_type: pa.DataType) -> None:
    columns = simple_columns(4)
    columns["response_mask"] = pa.array(
        [[t % 2 == 0 for t in range(len(r))] for r in columns["rollout_log_probs"]],
        pa.list_(pa.bool_()),
    ).cast(pa.list_(mask_type))
    doc = analyze_json(tmp_path, str(write_table(tmp_path / "d.parquet", columns)))
    assert doc["source"]["valid_tokens"] == 6  # positions 0 and 2 of rows with 1..4 tokens


def test_float32_and_float64_lists_agree(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    roll = -rng.exponential(1.0, (5, 7)).astype(np.float32)
    old = (roll + rng.normal(0, 0.05, roll.shape)).astype(np.float32)
    d32 = write_dump(tmp_path / "f32.parquet", roll, old)
    d64 = write_dump(tmp_path / "f64.parquet", roll.astype(np.float64), old.astype(np.float64))
    a, b = analyze_json(tmp_path, str(d32)), analyze_json(tmp_path, str(d64))
    assert a["overall"] == b["overall"]


def test_directory_hive_glob_and_many_paths_agree(tmp_path: Path) -> None:
    for step in (3, 1, 2):
        write_table(tmp_path / "hive" / f"step={step}" / "part-0.parquet", simple_columns(step))
        write_table(tmp_path / "flat" / f"s{step}.parquet", simple_columns(step, step=step))
    hive = analyze_json(tmp_path, str(tmp_path / "hive"))
    flat = analyze_json(tmp_path, str(tmp_path / "flat"))
    globbed = analyze_json(tmp_path, str(tmp_path / "flat" / "s*.parquet"))
    listed = analyze_json(tmp_path, *(str(p) for p in sorted((tmp_path / "flat").iterdir())))
    assert [s["step"] for s in hive["steps"]] == [1, 2, 3]
    for doc in (flat, globbed, listed):
        assert doc["overall"] == hive["overall"]
        assert [s["metrics"] for s in doc["steps"]] == [s["metrics"] for s in hive["steps"]]


def test_step_selection(tmp_path: Path) -> None:
    for step in range(5):
        write_table(tmp_path / f"step={step}" / "p.parquet", simple_columns(2 + step))
    only = analyze_json(tmp_path, str(tmp_path), "--step", "1", "--step", "3")
    ranged = analyze_json(tmp_path, str(tmp_path), "--steps", "2:")
    assert [s["step"] for s in only["steps"]] == [1, 3]
    assert [s["step"] for s in ranged["steps"]] == [2, 3, 4]
    assert ranged["source"]["rows"] == 4 + 5 + 6
    code, _, err = run("analyze", tmp_path, "--steps", "10:20")
    assert code == 2 and "no rows in the selected steps" in err


def test_legacy_dialect_adds_verl_veto_metrics(dump: Path, tmp_path: Path) -> None:
    latest = analyze_json(tmp_path, str(dump))
    legacy = analyze_json(tmp_path, str(dump), "--dialect", "legacy")
    assert "rollout_corr/rollout_is_veto_fraction" not in latest["overall"]
    assert legacy["overall"]["rollout_corr/rollout_is_veto_fraction"] == 0.0
    assert legacy["overall"]["rollout_corr/rollout_is_catastrophic_token_fraction"] == 0.0
    strict = analyze_json(tmp_path, str(dump), "--dialect", "legacy", "--veto-threshold", "1.0")
    # at τ = 1 a token is catastrophic when π_train < π_rollout: the even positions (ℓ = −0.005),
    # which every row has; rows of 1, 2, 3 tokens hold 1 + 1 + 2 of them
    overall = strict["overall"]
    assert overall["rollout_corr/rollout_is_veto_fraction"] == 1.0
    assert overall["rollout_corr/rollout_is_catastrophic_token_fraction"] == pytest.approx(4 / 6)


def test_drop_nonfinite_masks_and_counts(tmp_path: Path) -> None:
    columns = simple_columns()
    columns["old_log_probs"][2][1] = math.nan
    columns["rollout_log_probs"][1][0] = math.inf
    path = write_table(tmp_path / "d.parquet", columns)
    doc = analyze_json(tmp_path, str(path), "--drop-nonfinite")
    assert doc["source"]["dropped_nonfinite"] == 2
    assert doc["source"]["valid_tokens"] == 4


def test_garbage_under_the_mask_is_ignored(tmp_path: Path) -> None:
    clean = simple_columns()
    dirty = simple_columns()
    for col, value in (("old_log_probs", math.nan), ("rollout_log_probs", -math.inf)):
        for r in (clean, dirty):
            r[col] = [[*row, -1.0] for row in r[col]]
        dirty[col] = [[*row[:-1], value] for row in dirty[col]]
    for r in (clean, dirty):
        r["response_mask"] = [[*row, 0] for row in r["response_mask"]]
    a = analyze_json(tmp_path, str(write_table(tmp_path / "a.parquet", clean)))
    b = analyze_json(tmp_path, str(write_table(tmp_path / "b.parquet", dirty)))
    assert a["overall"] == b["overall"]


def test_inputs_are_never_modified(dump: Path, tmp_path: Path) -> None:
    before = hashlib.sha256(dump.read_bytes()).hexdigest()
    analyze_json(tmp_path, str(dump), "--drop-nonfinite")
    assert hashlib.sha256(dump.read_bytes()).hexdigest() == before


def _bad(tmp_path: Path, kind: str) -> tuple[list[str], str]:
    """A bad input of the given kind and the fragment its one-line error must contain."""
    p = tmp_path / "bad.parquet"
    cols = simple_columns()
    if kind == "missing":
        return [str(tmp_path / "nope.parquet")], "no such file or directory"
    if kind == "empty_file":
        p.write_bytes(b"")
        return [str(p)], "file is empty"
    if kind == "not_parquet":
        p.write_text("rollout,old\n1,2\n")
        return [str(p)], "not a readable parquet file"
    if kind == "corrupt":
        write_table(p, cols)
        data = bytearray(p.read_bytes())
        data[4:40] = b"\xff" * 36
        p.write_bytes(bytes(data))
        return [str(p)], "bad.parquet"
    if kind == "truncated":
        write_table(p, cols)
        p.write_bytes(p.read_bytes()[:-30])
        return [str(p)], "not a readable parquet file"
    if kind == "misnamed":
        cols["rollout_logprobs"] = cols.pop("rollout_log_probs")
        write_table(p, cols)
        return [str(p)], "did you mean 'rollout_logprobs' (--rollout-col rollout_logprobs)"
    if kind == "ragged":
        cols["old_log_probs"][2] = cols["old_log_probs"][2][:-1]
        write_table(p, cols)
        return [str(p)], "row 2 (step 0): column 'old_log_probs' has 2 entries but"
    if kind == "ragged_mask":
        cols["response_mask"][1] = [1, 1, 1]
        write_table(p, cols)
        return [str(p)], "row 1 (step 0): column 'response_mask' has 3 entries"
    if kind == "nan":
        cols["old_log_probs"][1][1] = math.nan
        write_table(p, cols)
        return [str(p)], "row 1 (step 0): column 'old_log_probs' holds NaN at position 1"
    if kind == "inf":
        cols["rollout_log_probs"][2][0] = -math.inf
        write_table(p, cols)
        return [str(p)], "row 2 (step 0): column 'rollout_log_probs' holds -inf at position 0"
    if kind == "strings":
        cols["old_log_probs"] = [[str(v) for v in r] for r in cols["old_log_probs"]]
        write_table(p, cols)
        return [str(p)], "string>; expected list<float16|float32|float64>"
    if kind == "scalar":
        cols["rollout_log_probs"] = [r[0] for r in cols["rollout_log_probs"]]
        write_table(p, cols)
        return [str(p)], "column 'rollout_log_probs' has type double; expected list"
    if kind == "float_step":
        cols["step"] = [0.5, 1.0, 2.0]
        write_table(p, cols)
        return [str(p)], "column 'step' has type double; expected an integer"
    if kind == "null_row":
        cols["old_log_probs"][1] = None
        write_table(p, cols)
        return [str(p)], "row 1 (step 0): column 'old_log_probs' is null"
    if kind == "no_rows":
        write_table(p, {k: pa.array([], pa.list_(pa.float64())) for k in cols})
        return [str(p)], "the dump holds no rows"
    if kind == "all_masked":
        cols["response_mask"] = [[0] * len(r) for r in cols["response_mask"]]
        write_table(p, cols)
        return [str(p)], "no valid token"
    if kind == "empty_dir":
        (tmp_path / "empty").mkdir()
        return [str(tmp_path / "empty")], "directory holds no parquet file"
    if kind == "bad_glob":
        return [str(tmp_path / "x*.parquet")], "no file matches this pattern"
    if kind == "bad_dialect":
        write_table(p, cols)
        return [str(p), "--dialect", "newest"], "--dialect 'newest': expected one of latest, legacy"
    if kind == "bad_steps":
        write_table(p, cols)
        return [str(p), "--steps", "a-b"], "--steps 'a-b': expected A:B"
    if kind == "steps_reversed":
        write_table(p, cols)
        return [str(p), "--steps", "5:2"], "--steps '5:2': the first step is after the last one"
    if kind == "json_is_dir":
        write_table(p, cols)
        return [str(p), "--json", str(tmp_path)], "is a directory; give a file name"
    if kind == "training_missing":
        cols["a"] = cols.pop("old_log_probs")
        write_table(p, cols)
        return [str(p)], "no column 'old_log_probs' or 'old_log_prob' or 'training_log_probs'"
    if kind == "bad_veto":
        write_table(p, cols)
        return [str(p), "--veto-threshold", "0"], "--veto-threshold must be > 0"
    raise AssertionError(kind)


BAD_KINDS = [
    "missing", "empty_file", "not_parquet", "corrupt", "truncated", "misnamed", "ragged",
    "ragged_mask", "nan", "inf", "strings", "scalar", "float_step", "null_row", "no_rows",
    "all_masked", "empty_dir", "bad_glob", "bad_dialect", "bad_steps", "bad_veto",
    "steps_reversed", "json_is_dir", "training_missing",
]  # fmt: skip


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_bad_input_is_one_line_error_exit_2(tmp_path: Path, kind: str) -> None:
    args, fragment = _bad(tmp_path, kind)
    out = tmp_path / "out.json"
    json_args = [] if "--json" in args else ["--json", str(out)]
    code, stdout, stderr = run("analyze", *args, *json_args)
    assert code == 2, (stdout, stderr)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr
    assert fragment in lines[0]
    assert "Traceback" not in stderr + stdout
    assert not out.exists() or out.is_dir(), "no output on error"
    # a suggestion must never name the column the other side already reads
    assert "did you mean 'rollout_log_probs'" not in lines[0]


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    result = runner.invoke(app, ["analyze", str(tmp_path / "nope.parquet"), "--debug"])
    assert result.exit_code != 0
    assert result.exception is not None and "no such file" in str(result.exception)


def test_positive_log_probs_are_warned_about(tmp_path: Path) -> None:
    columns = simple_columns()
    columns["old_log_probs"][2][1] = 3.5  # not a log-probability
    code, _, stderr = run("analyze", write_table(tmp_path / "d.parquet", columns))
    assert code == 0
    warning = " ".join(stderr.split())
    assert "1 valid log-probs are > 0" in warning
    assert "row 2 (step 0): column 'old_log_probs' = 3.5" in warning


def test_legacy_veto_metrics_get_no_verdict_when_the_veto_is_off(
    dump: Path, tmp_path: Path
) -> None:
    off = analyze_json(tmp_path, str(dump), "--dialect", "legacy")
    on = analyze_json(tmp_path, str(dump), "--dialect", "legacy", "--veto-threshold", "1e-4")
    metric = "rollout_corr/rollout_is_veto_fraction"
    assert metric not in {c["metric"] for c in off["checks"]}
    assert metric in {c["metric"] for c in on["checks"]}


def test_version() -> None:
    from rcdiag import __version__

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"rcdiag {__version__}"
