"""``rcdiag watch``: a line per new step within seconds of its shard, a half-written shard waited
for, TensorBoard kept current, and ``--fail-on act`` exiting 1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rcdiag.synth import config_for, write_synthetic_dump

pytestmark = pytest.mark.xdist_group("watch")
INTERVAL = "0.2"
DRIFT = Path(__file__).resolve().parent.parent / "sample_data" / "drift"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("src") / "run"
    write_synthetic_dump(
        root, config_for("drift", steps=4, rows_per_step=16, mean_length=32), shards=True
    )
    return root


def start(*args: str, **popen: Any) -> subprocess.Popen[str]:
    command = [sys.executable, "-c", "from rcdiag.cli import main; main()", "watch", *args]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen
    )


def read_until(process: subprocess.Popen[str], fragment: str, seconds: float = 30.0) -> list[str]:
    """Lines of the watch's output up to one holding ``fragment``."""
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if fragment in line:
            return lines
    raise AssertionError(f"no {fragment!r} in {lines}")


def test_watch_follows_a_growing_run(source: Path, tmp_path: Path) -> None:
    tensorboard = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    run = tmp_path / "run"
    shutil.copytree(source / "step=0", run / "step=0")
    logs = tmp_path / "logs"
    process = start(
        str(run), "--interval", INTERVAL, "--exit-when-idle", "6", "--tensorboard", str(logs)
    )
    try:
        first = read_until(process, "verdict:")
        assert first[0].startswith("step 0: ") and "k3_kl" in first[0]
        shutil.copytree(source / "step=1", run / "step=1")
        began = time.monotonic()
        lines = read_until(process, "step 1: ")
        assert time.monotonic() - began < 10
        assert not any(line.startswith("step 0") for line in lines)  # each step once
        # a shard the trainer is still writing: waited for, then read once complete
        shard = source / "step=2" / "part-0.parquet"
        (run / "step=2").mkdir()
        (run / "step=2" / "part-0.parquet").write_bytes(shard.read_bytes()[:200])
        waiting = read_until(process, "waiting: ")
        assert "step=2/part-0.parquet" in waiting[-1]
        shutil.copyfile(shard, run / "step=2" / "part-0.parquet")
        read_until(process, "step 2: ")
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
        process.communicate()
    assert process.stderr is not None
    (events,) = (logs / "rcdiag").glob("events.out.tfevents.*")
    reader = tensorboard.EventAccumulator(str(events.parent))
    reader.Reload()
    k3 = reader.Scalars("rcdiag/rollout_corr/k3_kl")
    assert [e.step for e in k3] == [0, 1, 2]
    assert [e.step for e in reader.Scalars("rcdiag/verdict")] == [0, 1, 2]


def test_fail_on_act_exits_one(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(DRIFT, run)  # its verdict is act
    process = start(str(run), "--interval", INTERVAL, "--fail-on", "act", "--exit-when-idle", "30")
    out, err = process.communicate(timeout=120)
    assert process.returncode == 1, err
    lines = out.splitlines()
    assert lines[-1] == "stopping: the verdict is act (--fail-on act)"
    assert [line.split(":")[0] for line in lines[:20]] == [f"step {s}" for s in range(20)]
    assert all(line == line.rstrip() for line in lines)


def test_a_bad_fail_on_is_a_usage_error(source: Path) -> None:
    process = start(str(source), "--fail-on", "healthy")
    _, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert "--fail-on" in err and "expected watch or act" in err


def test_a_reader_that_goes_away_ends_watch_quietly(source: Path) -> None:
    """``rcdiag watch … | head -1``: once the pipe's reader has gone, watch exits 0 at its next
    poll, with no traceback and no ``Error:`` line (without ``--exit-when-idle`` it would follow
    the directory forever, writing into nothing)."""
    process = start(str(source), "--interval", INTERVAL)
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("step 0: ")
        process.stdout.close()  # as head does after its line
        code = process.wait(timeout=30)
    finally:
        process.kill()
    assert process.stderr is not None
    err = process.stderr.read()
    assert code == 0, err
    assert err == ""


def test_watch_keeps_mlflow_and_wandb_current(source: Path, tmp_path: Path) -> None:
    """``--mlflow RUN_ID`` and ``--wandb`` log each new step once, at its step, as the run grows;
    a re-analysis that adds no step (a file touched) logs nothing again."""
    pytest.importorskip("mlflow")
    pytest.importorskip("wandb")
    from mlflow.tracking import MlflowClient
    from test_trackers import finished_records
    from wandb.proto import wandb_internal_pb2

    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": (tmp_path / "mlruns").as_uri(),
        "MLFLOW_ALLOW_FILE_STORE": "true",
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(tmp_path),
        "WANDB_SILENT": "true",
    }
    os.environ.update({k: env[k] for k in ("MLFLOW_TRACKING_URI", "MLFLOW_ALLOW_FILE_STORE")})
    try:
        client = MlflowClient()
        run_id = client.create_run(client.create_experiment("rl")).info.run_id
    finally:
        for name in ("MLFLOW_TRACKING_URI", "MLFLOW_ALLOW_FILE_STORE"):
            os.environ.pop(name, None)
    run = tmp_path / "run"
    for step in (0, 1):
        shutil.copytree(source / f"step={step}", run / f"step={step}")
    args = [str(run), "--interval", INTERVAL, "--exit-when-idle", "4", "--mlflow", run_id]
    process = start(*args, "--wandb", env=env, cwd=tmp_path)
    try:
        read_until(process, "step 1: ", seconds=60)
        shutil.copytree(source / "step=2", run / "step=2")
        read_until(process, "step 2: ")
        touched = run / "step=0" / "part-0.parquet"
        os.utime(touched, ns=(touched.stat().st_atime_ns, touched.stat().st_mtime_ns + 10**9))
        time.sleep(2.0)  # re-analysed: the same steps, nothing new to log
        shutil.copytree(source / "step=3", run / "step=3")
        read_until(process, "step 3: ")
        assert process.wait(timeout=120) == 0
    finally:
        process.kill()
        _, err = process.communicate()
    assert "Error" not in err, err
    os.environ.update({k: env[k] for k in ("MLFLOW_TRACKING_URI", "MLFLOW_ALLOW_FILE_STORE")})
    try:
        history = MlflowClient().get_metric_history(run_id, "rcdiag/rollout_corr/k3_kl")
        verdicts = MlflowClient().get_metric_history(run_id, "rcdiag/verdict")
    finally:
        for name in ("MLFLOW_TRACKING_URI", "MLFLOW_ALLOW_FILE_STORE"):
            os.environ.pop(name, None)
    assert sorted(m.step for m in history) == [0, 1, 2, 3]  # each step once
    assert len({(m.step, m.value) for m in verdicts}) == len(verdicts)
    assert max(m.step for m in verdicts) == 3
    (path,) = (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")
    logged = []
    for data in finished_records(path, wandb_internal_pb2):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(data)
        if record.WhichOneof("record_type") == "history":
            items = {
                i.key or "/".join(i.nested_key): json.loads(i.value_json)
                for i in record.history.item
            }
            if "rcdiag/rollout_corr/k3_kl" in items:
                logged.append(items["rcdiag/step"])
    assert sorted(logged) == [0, 1, 2, 3]
