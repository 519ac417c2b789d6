"""`rcdiag synth`: the generator's statistics match its configuration, and the command's edges."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from rcdiag.cli import app
from rcdiag.errors import UsageError
from rcdiag.synth import (
    CATASTROPHIC_RANGE,
    SCENARIO_DESCRIPTIONS,
    SCENARIOS,
    SynthConfig,
    config_for,
    generate,
    write_synthetic_dump,
)

runner = CliRunner()
SMALL = {"steps": 2, "rows_per_step": 16, "mean_length": 64, "max_length": 256}


def run(*args: object) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def log_ratios(config: SynthConfig) -> list[np.ndarray]:
    """ℓ = old − rollout at the valid tokens of each step."""
    return [(s.old_log_probs - s.rollout_log_probs)[s.response_mask] for s in generate(config)]


def read_rows(path: Path) -> dict[str, list]:
    """Every column of a dump (file or step shards, in step order) as Python lists."""
    files = [path]
    if path.is_dir():
        files = sorted(path.glob("step=*/part-0.parquet"), key=lambda p: int(p.parent.name[5:]))
    columns: dict[str, list] = {}
    for file in files:
        for name, values in pq.read_table(file).to_pydict().items():
            columns.setdefault(name, []).extend(values)
    return columns


def test_same_seed_same_dump_and_other_seed_another(tmp_path: Path) -> None:
    config = SynthConfig(seed=7, hole_rate=0.05, empty_row_rate=0.1, **SMALL)
    a = write_synthetic_dump(tmp_path / "a.parquet", config)
    b = write_synthetic_dump(tmp_path / "b.parquet", config)
    c = write_synthetic_dump(tmp_path / "c.parquet", SynthConfig(seed=8, **SMALL))
    assert a.path.read_bytes() == b.path.read_bytes()
    ta, tc = pq.read_table(a.path), pq.read_table(c.path)
    assert ta.num_rows == tc.num_rows and not ta.equals(tc)


def test_shards_hold_the_same_rows_as_the_single_file(tmp_path: Path) -> None:
    config = SynthConfig(seed=3, hole_rate=0.02, **SMALL)
    single = write_synthetic_dump(tmp_path / "one.parquet", config)
    shards = write_synthetic_dump(tmp_path / "dir", config, shards=True)
    assert sorted(p.parent.name for p in shards.path.glob("*/part-0.parquet")) == [
        "step=0",
        "step=1",
    ]
    one, many = read_rows(single.path), read_rows(shards.path)
    assert (
        one.keys()
        == many.keys()
        == {
            "rollout_log_probs",
            "old_log_probs",
            "response_mask",
            "step",
            "uid",
        }
    )
    assert one["response_mask"] == many["response_mask"] and one["uid"] == many["uid"]
    mask = np.concatenate([np.asarray(m, dtype=bool) for m in one["response_mask"]])
    for name in ("rollout_log_probs", "old_log_probs"):
        values = np.concatenate([np.asarray(v, dtype=np.float64) for v in one[name]])
        np.testing.assert_array_equal(
            values, np.concatenate([np.asarray(v, dtype=np.float64) for v in many[name]])
        )
        assert np.isnan(values).any() and not np.isnan(values[mask]).any()
    assert single.rows == shards.rows == 32 and single.valid_tokens == shards.valid_tokens
    assert pq.read_schema(single.path).field("old_log_probs").type.value_type == "float"


def test_a_step_does_not_depend_on_how_many_steps_are_generated() -> None:
    short = list(generate(SynthConfig(seed=1, steps=1, rows_per_step=4, mean_length=8)))
    long = list(generate(SynthConfig(seed=1, steps=3, rows_per_step=4, mean_length=8)))
    np.testing.assert_array_equal(short[0].old_log_probs, long[0].old_log_probs)


def test_noise_is_zero_mean_with_the_configured_std() -> None:
    ell = np.concatenate(log_ratios(SynthConfig(noise=0.05, dtype="float64", **SMALL)))
    assert ell.std() == pytest.approx(0.05, rel=0.1)
    assert abs(ell.mean()) < 0.05 * 5 / np.sqrt(ell.size)


def test_bias_is_proportional_to_the_log_prob() -> None:
    for s in generate(SynthConfig(noise=0.0, bias=0.3, dtype="float64", **SMALL)):
        rollout = s.rollout_log_probs[s.response_mask]
        ell = s.old_log_probs[s.response_mask] - rollout
        np.testing.assert_allclose(ell, 0.3 * rollout, atol=1e-12)


def test_catastrophic_tokens_at_the_configured_rate() -> None:
    config = SynthConfig(noise=0.01, catastrophic_rate=0.01, dtype="float64", **SMALL)
    ell = np.concatenate(log_ratios(config))
    catastrophic = ell[ell < -1]
    assert catastrophic.size / ell.size == pytest.approx(0.01, rel=0.25)
    low, high = CATASTROPHIC_RANGE
    assert ((catastrophic >= -high) & (catastrophic <= -low)).all()


def test_student_t_tails_are_heavier_than_gaussian() -> None:
    common = {"noise": 0.0, "tail_scale": 0.01, "dtype": "float64", **SMALL}
    t = np.concatenate(log_ratios(SynthConfig(tail_df=2.0, **common)))
    assert np.mean(np.abs(t) > 0.1) > 1e-3  # a Gaussian of this width: ~1e-23
    assert not np.any(np.concatenate(log_ratios(SynthConfig(**common))))


def test_drift_grows_the_mismatch_to_one_plus_drift_squared() -> None:
    config = SynthConfig(
        noise=0.01, drift=1.0, dtype="float64", **{**SMALL, "steps": 5, "rows_per_step": 32}
    )
    stds = [ell.std() for ell in log_ratios(config)]
    assert stds[-1] / stds[0] == pytest.approx(4.0, rel=0.1)
    assert config.drift_factor(0) == 1.0 and config.drift_factor(4) == 4.0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_holes_and_empty_rows_hold_nan_only_where_masked(dtype: str) -> None:
    config = SynthConfig(
        hole_rate=0.05, empty_row_rate=0.1, dtype=dtype, **{**SMALL, "rows_per_step": 64}
    )
    holes = inner = empty = rows = 0
    for s in generate(config):
        assert s.rollout_log_probs.dtype == np.dtype(dtype)
        mask = s.response_mask
        inside = np.arange(mask.shape[1])[None, :] < s.lengths[:, None]
        for values in (s.rollout_log_probs, s.old_log_probs):
            np.testing.assert_array_equal(np.isnan(values), inside & ~mask)
            assert (values[mask] <= 0).all()
            assert (values[~inside] == 0).all()  # padding
        row_empty = ~mask.any(axis=1)
        empty += int(row_empty.sum())
        rows += mask.shape[0]
        interior = inside & (np.arange(mask.shape[1])[None, :] < s.lengths[:, None] - 1)
        holes += int((interior & ~mask)[~row_empty].sum())
        inner += int(interior[~row_empty].sum())
        assert mask[np.arange(mask.shape[0]), s.lengths - 1][~row_empty].all(), "last token valid"
    assert holes / inner == pytest.approx(0.05, rel=0.15)
    assert 0.04 < empty / rows < 0.2


@pytest.mark.parametrize(
    ("dist", "check"),
    [
        ("fixed", lambda n: (n == 100).all()),
        ("uniform", lambda n: n.min() >= 1 and n.max() <= 199 and abs(n.mean() - 100) < 10),
        ("lognormal", lambda n: n.max() <= 400 and abs(n.mean() - 100) < 10),
    ],
)
def test_length_distributions(dist: str, check) -> None:
    config = SynthConfig(
        length_dist=dist,
        mean_length=100,
        max_length=400,
        rows_per_step=256,
        steps=2,
    )
    assert check(np.concatenate([s.lengths for s in generate(config)]))


def test_uid_groups_consecutive_rows_of_one_prompt() -> None:
    step = next(generate(SynthConfig(rows_per_step=12, group_size=4, mean_length=4)))
    assert len(set(step.uid)) == 3
    assert (step.uid[:4] == step.uid[0]).all() and step.uid[4] != step.uid[3]


def test_every_scenario_is_valid_and_described() -> None:
    assert SCENARIOS.keys() == SCENARIO_DESCRIPTIONS.keys()
    for name in SCENARIOS:
        config_for(name)
    assert 0.005 <= config_for("bf16").noise <= 0.01 and config_for("bf16").bias == 0
    assert config_for("heavy_tails").tail_df == 2.0
    assert config_for("long_responses").mean_length == 4000


def test_fp8_scenario_matches_the_published_mean_abs_log_ratio() -> None:
    config = config_for("fp8", rows_per_step=32, steps=1, dtype="float64")
    ell = np.concatenate(log_ratios(config))
    assert np.abs(ell).mean() == pytest.approx(0.27, rel=0.15)


def test_explicit_values_override_the_scenario() -> None:
    assert (
        config_for("drift", noise=0.2).noise == 0.2 and config_for("drift", noise=0.2).bias == 0.002
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("noise", -0.1, "--noise must be a finite number ≥ 0"),
        ("noise", float("nan"), "--noise must be a finite number ≥ 0"),
        ("hole_rate", 1.5, "--hole-rate must be in [0, 1]"),
        ("catastrophic_rate", -1e-3, "--catastrophic-rate must be in [0, 1]"),
        ("bias", -2.0, "--bias must be a finite number ≥ −1"),
        ("tail_df", 0.0, "--tail-df must be a finite number > 0"),
        ("steps", 0, "--steps must be ≥ 1"),
        ("length_dist", "normal", "--length-dist must be one of lognormal, uniform, fixed"),
        ("max_length", 10, "--max-length (10) must be ≥ --mean-length (256)"),
    ],
)
def test_bad_values_are_usage_errors(field: str, value: object, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        SynthConfig(**{field: value})


def test_unknown_scenario() -> None:
    with pytest.raises(UsageError, match="--scenario 'fp4': expected one of bf16, fp8"):
        config_for("fp4")


# --- the command -------------------------------------------------------------------------------


def test_cli_writes_a_single_file_that_analyze_reads(tmp_path: Path) -> None:
    out = tmp_path / "d.parquet"
    code, stdout, _ = run(
        "synth", out, "--scenario", "heavy_tails", "--steps", "2", "--rows-per-step", "16",
        "--mean-length", "64", "--hole-rate", "0.05", "--empty-row-rate", "0.1",
    )  # fmt: skip
    assert code == 0
    assert stdout.startswith("wrote 32 rows · ") and "2 steps → " in stdout
    assert len(stdout.strip().splitlines()) == 1
    assert pq.read_schema(out).field("rollout_log_probs").type.value_type == "float"
    report = tmp_path / "r.json"
    code, _, err = run("analyze", out, "--json", report, "--quiet")
    assert code == 0, err  # NaN garbage under the mask is ignored
    doc = json.loads(report.read_text())
    assert doc["source"]["rows"] == 32 and doc["source"]["steps"] == 2
    assert doc["overall"]["rcdiag/catastrophic_token_fraction"] > 0


def test_cli_writes_step_shards_with_float64(tmp_path: Path) -> None:
    out = tmp_path / "shards"
    code, stdout, _ = run(
        "synth", out, "--steps", "3", "--rows-per-step", "8", "--mean-length", "16",
        "--float64", "--tail-df", "0",
    )  # fmt: skip
    assert code == 0 and "step shards" in stdout
    assert sorted(p.name for p in out.iterdir()) == ["step=0", "step=1", "step=2"]
    schema = pq.read_schema(out / "step=2" / "part-0.parquet")
    assert schema.field("old_log_probs").type.value_type == "double"
    code, _, _ = run("synth", tmp_path / "x.parquet", "--shards", "--steps", "1")
    assert code == 0 and (tmp_path / "x.parquet" / "step=0" / "part-0.parquet").is_file()


def test_cli_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    out = tmp_path / "d.parquet"
    assert run("synth", out, "--steps", "1", "--rows-per-step", "4")[0] == 0
    before = out.read_bytes()
    code, stdout, stderr = run("synth", out, "--steps", "1", "--seed", "9")
    assert code == 2 and stdout == ""
    assert stderr == f"Error: {out} already exists (use --force to replace it)\n"
    assert out.read_bytes() == before
    code, _, _ = run("synth", out, "--steps", "1", "--rows-per-step", "4", "--seed", "9", "--force")
    assert code == 0 and out.read_bytes() != before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.parquet"], "no temp files left"


def test_cli_force_replaces_shards_but_not_a_directory_of_other_files(tmp_path: Path) -> None:
    out = tmp_path / "shards"
    assert run("synth", out, "--steps", "3", "--rows-per-step", "4")[0] == 0
    assert run("synth", out, "--steps", "1", "--rows-per-step", "4", "--force")[0] == 0
    assert [p.name for p in out.iterdir()] == ["step=0"]
    precious = tmp_path / "home"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    code, _, stderr = run("synth", precious, "--force")
    assert code == 2 and stderr.startswith("Error: refusing to replace directory ")
    assert (precious / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--noise", "-1"], "Error: --noise must be a finite number ≥ 0, got -1.0\n"),
        (
            ["--empty-row-rate", "2"],
            "Error: --empty-row-rate must be in [0, 1) (a dump needs rows with valid tokens), got 2.0\n",
        ),
        (
            ["--empty-row-rate", "1"],
            "Error: --empty-row-rate must be in [0, 1) (a dump needs rows with valid tokens), got 1.0\n",
        ),
        (["--scenario", "fp4"], "Error: --scenario 'fp4': expected one of "),
        (["--length-dist", "normal"], "Error: --length-dist must be one of "),
    ],
)
def test_cli_bad_option_is_a_one_line_error(tmp_path: Path, args: list[str], error: str) -> None:
    code, _, stderr = run("synth", tmp_path / "d.parquet", *args)
    assert code == 2
    assert stderr.startswith(error) and stderr.count("\n") == 1 and "Traceback" not in stderr
    assert not (tmp_path / "d.parquet").exists()
