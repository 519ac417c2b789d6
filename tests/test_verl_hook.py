"""The verl hook (rcdiag/integrations/verl_dump.py) against verl's own classes: a batch that verl's
``calculate_debug_metrics`` gets becomes a step of rcdiag's dump, turned on by environment alone.

verl imports on a CPU-only machine with a few of its dependencies (``make verl-hook-test`` puts
the verl 0.9.1 wheel and them in a separate directory); without verl the tests are skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rcdiag

pytestmark = pytest.mark.xdist_group("verl")
verl_metrics = pytest.importorskip("verl.utils.debug.metrics", reason="verl is not installed")
import torch  # noqa: E402
from verl import DataProto  # noqa: E402

from rcdiag.integrations import verl_dump  # noqa: E402


def batch(seed: int, rows: int = 6, width: int = 9, versions: bool = False) -> Any:
    """A verl DataProto as the trainer holds it after the old log-probs joined the batch."""
    rng = np.random.default_rng(seed)
    old = -torch.as_tensor(rng.exponential(0.8, (rows, width)), dtype=torch.float32)
    rollout = old + torch.as_tensor(rng.normal(0, 0.05, (rows, width)), dtype=torch.float32)
    lengths = rng.integers(2, width + 1, rows)
    mask = torch.as_tensor(np.arange(width)[None, :] < lengths[:, None], dtype=torch.int64)
    non_tensors: dict[str, Any] = {
        "uid": np.array([f"p{i // 2}" for i in range(rows)], dtype=object)
    }
    if versions:
        non_tensors["param_version_start"] = np.array([3, 4, 4, 2, 4, 3][:rows])
        non_tensors["param_version_end"] = np.array([4, 4, 4, 3, 4, 4][:rows])
    return DataProto.from_dict(
        tensors={
            "rollout_log_probs": rollout,
            "old_log_probs": old,
            "response_mask": mask,
            "responses": torch.zeros(rows, width, dtype=torch.int64),
        },
        non_tensors=non_tensors,
    )


class Trainer:
    """Stands for verl's trainer at its call site: ``self.global_steps``, then the call."""

    def __init__(self, step: int, param_version: int | None = None) -> None:
        self.global_steps = step
        if param_version is not None:
            self.current_param_version = param_version

    def step(self, data: Any) -> dict[str, Any]:
        from verl.utils.debug.metrics import calculate_debug_metrics

        return calculate_debug_metrics(data)


def test_each_batch_becomes_a_step_of_the_dump(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = verl_metrics.calculate_debug_metrics
    monkeypatch.setattr(verl_metrics, "calculate_debug_metrics", original)
    dump = verl_dump.install(str(tmp_path / "dump"))
    assert dump is not None and verl_metrics.calculate_debug_metrics is not original
    batches = {5: batch(1), 6: batch(2)}
    for step, data in batches.items():
        metrics = Trainer(step).step(data)
        assert metrics == original(data)  # verl's own metrics are untouched
    dump.close()
    for step, data in batches.items():
        rcdiag.write_dump(
            tmp_path / "reference" / f"step={step}" / "part.parquet",
            data.batch["rollout_log_probs"].numpy(),
            data.batch["old_log_probs"].numpy(),
            data.batch["response_mask"].numpy(),
            step,
        )
    got = rcdiag.analyze(tmp_path / "dump")
    expected = rcdiag.analyze(tmp_path / "reference")
    assert got.overall == expected.overall
    assert sorted(p.parent.name for p in (tmp_path / "dump").rglob("*.parquet")) == [
        "step=5",
        "step=6",
    ]
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "dump" / "step=5" / "rank-0.parquet")
    assert table.column("uid").to_pylist() == [f"p{i // 2}" for i in range(6)]


def test_policy_lag_from_the_asynchronous_trainer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        verl_metrics, "calculate_debug_metrics", verl_metrics.calculate_debug_metrics
    )
    dump = verl_dump.install(str(tmp_path))
    assert dump is not None
    Trainer(9, param_version=5).step(batch(3, versions=True))
    dump.close()
    import pyarrow.parquet as pq

    lags = pq.read_table(tmp_path / "step=9" / "rank-0.parquet").column("policy_lag").to_pylist()
    assert lags == [2, 1, 1, 3, 1, 2]


def test_without_the_variable_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(verl_dump.ENVIRONMENT, raising=False)
    before = verl_metrics.calculate_debug_metrics
    assert verl_dump.install() is None
    assert verl_metrics.calculate_debug_metrics is before


def test_a_failing_dump_never_stops_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        verl_metrics, "calculate_debug_metrics", verl_metrics.calculate_debug_metrics
    )
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    dump = verl_dump.install(str(blocker / "dump"))  # a directory under a file: cannot be made
    assert dump is not None
    data = batch(4)
    assert Trainer(1).step(data) == Trainer(1).step(data)
    assert dump.failed


@pytest.mark.parametrize("how", ["VERL_USE_EXTERNAL_MODULES", "entry point"])
def test_turned_on_by_the_environment_alone(tmp_path: Path, how: str) -> None:
    """In a fresh process, as verl's Ray workers start: the variables are all the user sets."""
    env = dict(os.environ, RCDIAG_VERL_DUMP=str(tmp_path / "dump"))
    env.pop("VERL_USE_EXTERNAL_MODULES", None)
    if how == "VERL_USE_EXTERNAL_MODULES":
        env["VERL_USE_EXTERNAL_MODULES"] = "rcdiag.integrations.verl_dump"
        env["VERL_USE_EXTERNAL_PLUGINS"] = "none"
    code = (
        "import sys; sys.path.insert(0, 'tests'); import test_verl_hook as t\n"
        "t.Trainer(12).step(t.batch(7))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "dump" / "step=12" / "rank-0.parquet").is_file()
