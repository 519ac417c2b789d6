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
