"""rcdiag's per-step metrics in TensorBoard, MLflow and W&B: read back with each tracker's own
reader, every value at its step equal to the results JSON, the verdict as a number, a missing
extra as one line."""

from __future__ import annotations

import json
import math
import struct
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import rcdiag
from rcdiag.cli import app

pytestmark = pytest.mark.xdist_group("trackers")
runner = CliRunner()
STATUS_NUMBER = {"healthy": 0, "watch": 1, "act": 2}


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Step 0: training equals rollout (healthy by hand); step 1: a small mismatch; step 2:
    |Δ log p| = 1 on every token (past every act range); step 3: no valid token."""
    root = tmp_path_factory.mktemp("tracked")
    rng = np.random.default_rng(7)
    for step, shift in enumerate([0.0, 0.01, 1.0, 0.0]):
        rollout = rng.normal(-1.5, 0.4, (8, 12)).clip(max=-0.01)
        old = rollout + shift * rng.choice([-1.0, 1.0], rollout.shape)
        mask = np.ones_like(rollout, bool) if step != 3 else np.zeros_like(rollout, bool)
        rcdiag.write_dump(
            root / f"step={10 + step}" / "part-0.parquet", rollout, old, mask, step=10 + step
        )
    return root


@pytest.fixture(scope="module")
def document(dump: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("json") / "run.json"
    result = runner.invoke(
        app, ["analyze", str(dump), "--frameworks", "trl", "--json", str(out), "-q"]
    )
    assert result.exit_code == 0, result.stderr
    return json.loads(out.read_text())


def expected(document: dict[str, Any]) -> dict[tuple[int, str], float]:
    """Every value a tracker must hold, from the results JSON (an independent reading)."""
    values: dict[tuple[int, str], float] = {}
    for entry in document["steps"]:
        for name, value in entry["metrics"].items():
            if value is not None:
                tag = name if name.startswith("rcdiag/") else f"rcdiag/{name}"
                values[(entry["step"], tag)] = value
    for framework in document["frameworks"]:
        for entry in framework["steps"]:
            for name, value in entry["metrics"].items():
                if value is not None:
                    values[(entry["step"], f"rcdiag/{name}")] = value
    return values


def check_statuses(found: dict[tuple[int, str], float], document: dict[str, Any]) -> None:
    # by hand: step 10 agrees exactly, step 12 is past every act range, step 13 has no token
    assert found[(10, "rcdiag/step_status")] == 0
    assert found[(12, "rcdiag/step_status")] == 2
    assert (13, "rcdiag/step_status") not in found
    last = document["steps"][-1]["step"]
    assert found[(last, "rcdiag/verdict")] == STATUS_NUMBER[document["diagnosis"]["verdict"]] == 2
    assert [k for k in found if k[1] == "rcdiag/verdict"] == [(last, "rcdiag/verdict")]


def assert_same(
    found: dict[tuple[int, str], float], want: dict[tuple[int, str], float], rel: float
) -> None:
    assert {k for k in found if k[1] not in ("rcdiag/step_status", "rcdiag/verdict")} == set(want)
    for k, v in want.items():
        assert math.isclose(found[k], v, rel_tol=rel, abs_tol=1e-30), (k, found[k], v)
    assert any(t.startswith("rcdiag/trl/") for _, t in want)


def test_tensorboard_reads_back_on_the_runs_steps(
    dump: Path, document: dict[str, Any], tmp_path: Path
) -> None:
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    logs = tmp_path / "logs"
    logs.mkdir()
    trainer = logs / "events.out.tfevents.1700000000.host.1.0"
    trainer.write_bytes(b"the trainer's own file")
    for _ in range(2):  # a second run replaces rcdiag's file: one point per tag and step
        args = ["analyze", str(dump), "--frameworks", "trl", "--tensorboard", str(logs), "-q"]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.stderr
    assert trainer.read_bytes() == b"the trainer's own file"
    assert sorted(p.name for p in (logs / "rcdiag").iterdir()) == ["events.out.tfevents.rcdiag"]
    reader = accumulator.EventAccumulator(str(logs / "rcdiag"), size_guidance={"scalars": 0})
    reader.Reload()
    found: dict[tuple[int, str], float] = {}
    for tag in reader.Tags()["scalars"]:
        events = reader.Scalars(tag)
        assert len({e.step for e in events}) == len(events), tag
        found.update({(e.step, tag): e.value for e in events})
    assert_same(found, expected(document), rel=1e-6)  # TensorBoard keeps float32
    check_statuses(found, document)


def test_mlflow_logs_to_an_existing_run_at_its_steps(
    dump: Path, document: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # a local file store (MLflow ≥ 3.7)
    client = MlflowClient()
    run = client.create_run(client.create_experiment("rl"))
    run_id = run.info.run_id
    out = tmp_path / "r.html"
    args = ["report", str(dump), "-o", str(out), "--frameworks", "trl", "--mlflow", run_id, "-q"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    assert client.get_run(run_id).info.status == run.info.status  # left as it was
    found: dict[tuple[int, str], float] = {}
    for key in client.get_run(run_id).data.metrics:
        for metric in client.get_metric_history(run_id, key):
            found[(metric.step, key)] = metric.value
    assert_same(found, expected(document), rel=1e-12)
    check_statuses(found, document)
    missing = runner.invoke(app, ["analyze", str(dump), "--mlflow", "no-such-run", "-q"])
    assert missing.exit_code == 2
    assert missing.stderr.startswith("Error: --mlflow no-such-run: ")
    assert missing.stderr.count("\n") == 1 and missing.stdout == ""  # before the pass


def wandb_records(path: Path) -> list[bytes]:
    """The records of a W&B run file (LevelDB's log format: 32 KiB blocks of chunks, each with a
    7-byte header of CRC, length and type, after the file's 7-byte header)."""
    data, records, pending, at, block = path.read_bytes(), [], b"", 7, 32768
    assert data[:4] == b":W&B"
    while at + 7 <= len(data):
        left = block - at % block
        _, length, kind = struct.unpack("<IHB", data[at : at + 7])
        if left < 7 or kind == 0:
            at += left
            continue
        chunk, at = data[at + 7 : at + 7 + length], at + 7 + length
        if kind in (1, 2):
            pending = chunk
        else:
            pending += chunk
        if kind in (1, 4):
            records.append(pending)
    return records


def finished_records(path: Path, proto: Any, seconds: float = 60.0) -> list[bytes]:
    """The run file's records once W&B's service has written its last (``exit``) record: the
    service writes the file on its own, and may still be at it when ``finish`` returns."""
    deadline = time.monotonic() + seconds
    while True:
        records = wandb_records(path)
        kinds = []
        for data in records:
            record = proto.Record()
            record.ParseFromString(data)
            kinds.append(record.WhichOneof("record_type"))
        if "exit" in kinds or time.monotonic() > deadline:
            return records
        time.sleep(0.2)


def test_wandb_offline_logs_against_rcdiags_step(
    dump: Path, document: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("wandb")
    from wandb.proto import wandb_internal_pb2

    for name, value in {
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(tmp_path),
        "WANDB_SILENT": "true",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    result = rcdiag.analyze(dump, frameworks="trl")
    from rcdiag.trackers import to_wandb

    run_id = to_wandb(result)
    (path,) = (tmp_path / "wandb").glob(f"offline-run-*-{run_id}/run-{run_id}.wandb")
    found: dict[tuple[int, str], float] = {}
    step_metric, kinds = None, []
    for data in finished_records(path, wandb_internal_pb2):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(data)
        kind = record.WhichOneof("record_type")
        kinds.append(kind)
        if kind == "metric" and record.metric.glob_name == "rcdiag/*":
            step_metric = record.metric.step_metric
        if kind == "history":
            items = {
                i.key or "/".join(i.nested_key): json.loads(i.value_json)
                for i in record.history.item
            }
            step = items.pop("rcdiag/step")
            found.update({(step, k): v for k, v in items.items() if k.startswith("rcdiag/")})
    assert step_metric == "rcdiag/step", (path.stat().st_size, kinds)
    assert_same(found, expected(document), rel=1e-12)
    check_statuses(found, document)


@pytest.mark.parametrize(
    ("flag", "module", "extra"),
    [
        (["--tensorboard", "logs"], "tensorboardX", "tensorboard"),
        (["--mlflow", "abc"], "mlflow", "mlflow"),
        (["--wandb"], "wandb", "wandb"),
    ],
)
def test_a_missing_extra_is_one_line(
    dump: Path, monkeypatch: pytest.MonkeyPatch, flag: list[str], module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import fails as when not installed
    result = runner.invoke(app, ["analyze", str(dump), *flag])
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: {flag[0]} needs {module}, which is not installed: pip install 'rcdiag[{extra}]'\n"
    )
    assert result.stdout == ""  # refused before the pass
