"""`rcdiag compare-presets` and `rcdiag presets` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rcdiag.cli import app
from rcdiag.correction.presets import PRESETS

runner = CliRunner()
DRIFT = Path(__file__).resolve().parent.parent / "sample_data" / "drift"


def run(*args: object) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def every_preset(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("cmp") / "all.json"
    code, stdout, stderr = run("compare-presets", DRIFT, "--json", out)
    assert code == 0, stderr
    assert "Configurations (overall" in stdout
    return json.loads(out.read_text())


def test_every_preset_of_the_dialect_in_contract_shape(every_preset: dict) -> None:
    doc = every_preset
    assert doc["schema_version"] == 2 and doc["dialect"] == "latest"
    assert [p["name"] for p in doc["presets"]] == list(PRESETS["latest"])
    steps = doc["source"]["steps"]
    for preset in doc["presets"]:
        assert set(preset) == {"name", "config", "overall", "summary", "steps"}
        assert preset["config"] == dict(PRESETS["latest"][preset["name"]].config)
        assert len(preset["steps"]) == steps
        assert set(preset["steps"][0]) == {"step", "metrics", "summary"}
        assert "rollout_corr/kl" in preset["overall"]
        summary = preset["summary"]
        assert 0.0 <= summary["kept_token_share"] <= 1.0
        assert set(summary["worst_steps"]) >= {"kept_token_share", "ess"}


def test_metric_names_follow_the_configuration(every_preset: dict) -> None:
    by_name = {p["name"]: p["overall"] for p in every_preset["presets"]}
    assert "rollout_corr/rollout_is_mean" not in by_name["disabled"]
    assert "rollout_corr/rollout_is_oob_ratio" in by_name["decoupled_token_icepop"]
    geo = by_name["decoupled_geo_rs"]
    assert "rollout_corr/rollout_rs_seq_mean_k1_masked_fraction" in geo
    assert "rollout_corr/rollout_rs_masked_fraction" in geo
    assert "rollout_corr/rollout_rs_seq_mean_k3_mean" in by_name["decoupled_k3_rs"]


def test_geo_rs_empties_late_drift_steps_and_warns(tmp_path: Path) -> None:
    code, _, stderr = run("compare-presets", DRIFT, "-p", "decoupled_geo_rs")
    assert code == 0
    assert "Warning: decoupled_geo_rs rejects every token of step(s)" in " ".join(stderr.split())


def test_custom_configs_bare_and_nested_yaml(tmp_path: Path) -> None:
    bare = tmp_path / "mine.yaml"
    bare.write_text("rollout_is: token\nrollout_is_threshold: 1.5\nrollout_rs: seq_max_k2\n"
                    "rollout_rs_threshold: 2.0\n")  # fmt: skip
    nested = tmp_path / "verl.yaml"
    nested.write_text("algorithm:\n  rollout_correction:\n    rollout_is: sequence\n")
    out = tmp_path / "o.json"
    code, _, err = run(
        "compare-presets", DRIFT, "-c", bare, "-c", nested, "-p", "disabled", "--json", out
    )
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert [p["name"] for p in doc["presets"]] == ["disabled", "mine", "verl"]
    assert "rollout_corr/rollout_rs_seq_max_k2_masked_fraction" in doc["presets"][1]["overall"]


def test_config_keys_choose_the_dialect(tmp_path: Path) -> None:
    cfg = tmp_path / "old.yaml"
    cfg.write_text("rollout_rs: geometric\nrollout_rs_threshold: 1.001\n")
    out = tmp_path / "o.json"
    code, _, err = run("compare-presets", DRIFT, "-c", cfg, "--json", out)
    assert code == 0, err
    assert json.loads(out.read_text())["dialect"] == "legacy"
    code, _, err = run("compare-presets", DRIFT, "-c", cfg, "--dialect", "latest")
    assert code == 2
    assert "uses legacy-dialect keys but --dialect latest was given" in err


def test_sweep_in_the_same_pass(tmp_path: Path) -> None:
    out = tmp_path / "o.json"
    code, stdout, err = run(
        "compare-presets",
        DRIFT,
        "--sweep",
        "seq_mean_k1",
        "--grid",
        "1.001,1.01,1.1",
        "--json",
        out,
    )
    assert code == 0, err
    assert "Sweep of seq_mean_k1" in stdout
    doc = json.loads(out.read_text())
    assert doc["presets"] == []
    kept = [p["summary"]["kept_token_share"] for p in doc["sweep"]["points"]]
    assert [p["threshold"] for p in doc["sweep"]["points"]] == ["1.001", "1.01", "1.1"]
    assert kept == sorted(kept) and kept[-1] > kept[0]


def test_sort_puts_the_best_first(tmp_path: Path) -> None:
    code, stdout, _ = run(
        "compare-presets", DRIFT, "-p", "decoupled_token_is", "-p", "decoupled_geo_rs",
        "--sort", "kept_token_share",
    )  # fmt: skip
    assert code == 0
    table = stdout.split("Configurations (overall")[1]
    assert table.index("decoupled_token_is") < table.index("decoupled_geo_rs")  # keeps more


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["-p", "nope"], "unknown latest preset 'nope'"),
        (["--sort", "speed"], "--sort 'speed': expected one of"),
        (["--grid", "1,2"], "--grid needs --sweep"),
        (["--sweep", "seq_max_k1"], "--sweep 'seq_max_k1' is not available"),
        (["--sweep", "token_k1", "--grid", "0_2"], "--grid value '0_2': rollout_rs_threshold of"),
        (["--sweep", "seq_mean_k1", "--grid", "0.5"], "--grid value '0.5'"),
        (["--dialect", "legacy", "-p", "decoupled_k3_rs"], "unknown legacy preset"),
    ],
)
def test_usage_errors_exit_2(args: list[str], fragment: str) -> None:
    code, _, stderr = run("compare-presets", DRIFT, *args)
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and fragment in lines[0], stderr


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("rollout_is: [", "not valid YAML"),
        ("- a\n- b\n", "expected a mapping"),
        ("rollout_is: token\nrollout_is_threshold: true\n", "not a bool"),
        ("rollout_rs: token_k1\nrollout_rs_threshold_lower: 0.5\n", "mixes the legacy dialect"),
        ("rollout_rs: token_k9\nrollout_rs_threshold: 2\n", "Invalid rollout_rs option 'token_k9'"),
    ],
)
def test_bad_config_files_name_the_file(tmp_path: Path, content: str, fragment: str) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(content)
    code, _, stderr = run("compare-presets", DRIFT, "-c", cfg)
    assert code == 2
    assert str(cfg) in stderr and fragment in stderr, stderr


@pytest.mark.parametrize("dialect", ["latest", "legacy"])
def test_presets_lists_every_preset(dialect: str) -> None:
    code, stdout, _ = run("presets", "--dialect", dialect)
    assert code == 0
    for name in PRESETS[dialect]:  # type: ignore[index]
        assert name in stdout


def test_a_step_without_valid_tokens_is_warned_about(tmp_path: Path) -> None:
    import numpy as np

    from rcdiag.io.writer import write_dump

    lp = np.full((2, 3), -1.0)
    write_dump(tmp_path / "step=0" / "p.parquet", lp, lp - 0.01, step=0)
    write_dump(tmp_path / "step=1" / "p.parquet", lp, lp, np.zeros((2, 3)), step=1)
    out = tmp_path / "o.json"
    code, _, stderr = run("compare-presets", tmp_path, "-p", "decoupled_token_is", "--json", out)
    assert code == 0
    assert "step 1 has no valid token" in " ".join(stderr.split())
    doc = json.loads(out.read_text())
    assert doc["source"]["empty_steps"] == [1]
    assert all(v is None for v in doc["presets"][0]["steps"][1]["metrics"].values())


def test_config_files_are_compared_with_every_preset_unless_preset_none(tmp_path: Path) -> None:
    cfg = tmp_path / "mine.yaml"
    cfg.write_text("rollout_is: token\nrollout_is_threshold: 1.5\n")
    out = tmp_path / "o.json"
    code, _, err = run("compare-presets", DRIFT, "-c", cfg, "--json", out, "-q")
    assert code == 0, err
    names = [p["name"] for p in json.loads(out.read_text())["presets"]]
    assert names == [*PRESETS["latest"], "mine"]
    code, _, err = run("compare-presets", DRIFT, "-c", cfg, "-p", "none", "--json", out, "-q")
    assert code == 0, err
    assert [p["name"] for p in json.loads(out.read_text())["presets"]] == ["mine"]
    code, stdout, _ = run("compare-presets", "--help")
    assert "--preset none" in " ".join(stdout.split())
