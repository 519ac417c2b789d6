"""Log ratios far beyond what float64 can exponentiate: every command still answers (inf → null),
prints no numpy warning and no traceback."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import rcdiag
from rcdiag.cli import app

runner = CliRunner()


@pytest.fixture(params=[800.0, -800.0], ids=["train_far_above", "train_far_below"])
def extreme_dump(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    rollout = np.array([[-1.0, -0.5, -2.0], [-0.3, -0.2, -0.1]])
    old = rollout.copy()
    if request.param > 0:  # one token with ℓ = ±800, log-probs staying ≤ 0
        rollout[0, 0] -= request.param
    else:
        old[0, 0] += request.param
    return rcdiag.write_dump(tmp_path / "d.parquet", rollout, old)


@pytest.mark.parametrize(
    ("command", "exit_code"),
    [
        (["analyze"], 0),
        (["compare-presets"], 0),
        (["compare-presets", "--dialect", "legacy"], 0),
        (["recommend"], 0),
        (["check"], 1),
    ],
)
def test_commands_answer_on_extreme_log_ratios(
    extreme_dump: Path, tmp_path: Path, command: list[str], exit_code: int
) -> None:
    out = tmp_path / "out.json"
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # an overflow warning would fail the run
        result = runner.invoke(
            app, [command[0], str(extreme_dump), *command[1:], "--json", str(out)]
        )
    assert result.exit_code == exit_code, result.stderr
    assert "Warning" not in result.stderr and "Traceback" not in result.stderr
    json.loads(out.read_text())  # NaN/inf written as null: valid JSON


def test_k3_kl_is_infinite_when_training_dwarfs_rollout(tmp_path: Path) -> None:
    rollout = np.array([[-800.0, -1.0]])
    path = rcdiag.write_dump(tmp_path / "d.parquet", rollout, np.array([[0.0, -1.0]]))
    out = tmp_path / "o.json"
    assert runner.invoke(app, ["analyze", str(path), "--json", str(out), "-q"]).exit_code == 0
    overall = json.loads(out.read_text())["overall"]
    assert overall["rollout_corr/k3_kl"] is None  # exp(800) overflows, as in verl: +inf
    assert overall["rollout_corr/kl"] == pytest.approx(-400.0, rel=1e-6)
    assert overall["rollout_corr/chi2_token"] == pytest.approx((np.exp(40) + 1) / 2 - 1)


BIG = 1.6e308
"""Log-probs near the float64 limit: two of them already sum beyond it."""


@pytest.fixture(
    params=[
        ([[-1e300, -0.5], [-1.0]], [[-1.0, 1e300], [-2.0]]),
        ([[-BIG, -BIG, -0.5], [-1.0]], [[-0.5, -0.5, -BIG], [-2.0]]),
        ([[-BIG, -BIG], [BIG, -1.0]], [[-BIG, -0.1], [-0.1, -2.0]]),
        ([[-1e154, -1e154, -3.4e38], [-800.0, -1.0]], [[1e154, -1.0, 3.4e38], [0.0, -2.0]]),
    ],
    ids=["1e300", "sums_overflow", "inf_minus_inf", "squares_overflow"],
)
def limit_dump(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rollout, old = request.param
    path = tmp_path / "limit.parquet"
    steps = list(range(len(rollout)))
    pq.write_table(
        pa.table({"rollout_log_probs": rollout, "old_log_probs": old, "step": steps}), path
    )
    return path


def test_every_command_is_silent_on_log_probs_near_the_float_limit(
    limit_dump: Path, tmp_path: Path
) -> None:
    baseline = tmp_path / "b.json"
    commands = [
        ["baseline", "-o", baseline],
        ["analyze", "--json", tmp_path / "a.json", "--html", tmp_path / "a.html"],
        ["compare-presets", "--sweep", "seq_mean_k1"],
        ["compare-presets", "--dialect", "legacy"],
        ["analyze", "--dialect", "legacy", "--veto-threshold", "1e-4"],
        ["report", "-o", tmp_path / "r.html"],
        ["recommend"],
        ["check", "--baseline", baseline, "--with-defaults"],
    ]
    for command in commands:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # any warning, numpy's included, fails the run
            args = [command[0], str(limit_dump), *map(str, command[1:]), "-q"]
            result = runner.invoke(app, args)
        assert result.exit_code in (0, 1), (command, result.stderr)
        assert result.stderr == "", (command, result.stderr)


def test_bootstrap_counts_an_infinite_row_only_where_it_is_drawn() -> None:
    from rcdiag.metrics.bootstrap import PoissonBootstrap
    from rcdiag.metrics.ragged import RaggedBatch

    rollout = np.array([-800.0] + [-1.0] * 9)  # row 0: ℓ = 800, its k3 is +inf
    old = np.array([0.0] + [-1.1] * 9)
    batch = RaggedBatch(rollout=rollout, old=old, mask=np.ones(10, dtype=bool),
                        offsets=np.arange(11), steps=np.zeros(10, dtype=np.int64))  # fmt: skip
    boot = PoissonBootstrap(replicates=400)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        boot.update(batch)
        k3 = boot.replicate_metrics()["rollout_corr/k3_kl"]
    drawn = np.isposinf(k3)
    assert not np.isnan(k3).any(), "a row drawn 0 times is absent, not NaN"
    assert 0.5 < drawn.mean() < 0.75  # P(Poisson(1) > 0) = 1 − 1/e ≈ 0.63
    assert np.isfinite(k3[~drawn]).all()


def test_baseline_says_which_replicates_are_stored_as_null(tmp_path: Path) -> None:
    rollout = np.full((20, 2), -1.0)
    rollout[0, 0] = -800.0  # ℓ = 800 in one row: its k3 overflows where the row is drawn
    dump = rcdiag.write_dump(tmp_path / "d.parquet", rollout, np.full((20, 2), -1.1))
    result = runner.invoke(app, ["baseline", str(dump), "-o", str(tmp_path / "b.json")])
    assert result.exit_code == 0, result.stderr
    message = " ".join(result.stderr.split())
    assert "Warning: bootstrap replicates that are not finite are stored as null" in message
    assert "(of 500: rollout_corr/k3_kl " in message
