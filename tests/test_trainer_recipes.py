"""The recipes of docs/trainer.md, run exactly as written against stand-ins of verl's and TRL's
batches: they write the dump, and what they log equals the command line's on it."""

from __future__ import annotations

import re
import sys
import types
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

torch = pytest.importorskip("torch")

from trainer_data import assert_same, batch, cli_json  # noqa: E402

DOC = Path(__file__).resolve().parent.parent / "docs" / "trainer.md"
BLOCK = re.compile(r"(?:<!-- recipe: (\w+) -->\n)?```python\n(.*?)```", re.DOTALL)


def recipes() -> dict[str | None, str]:
    found: dict[str | None, str] = {}
    for name, code in BLOCK.findall(DOC.read_text(encoding="utf-8")):
        found[name or None] = code
    return found


def run_recipe(name: str, namespace: dict[str, Any]) -> dict[str, Any]:
    exec(compile(recipes()[name], f"{DOC}:{name}", "exec"), namespace)
    return namespace


def test_every_python_block_of_the_doc_is_a_tested_recipe() -> None:
    assert set(recipes()) == {"loop", "verl", "trl"}  # a None key: a block no test runs


def per_step(directory: Path, out: Path) -> tuple[dict[int, dict], dict[str, dict[int, dict]]]:
    """The command line's metrics per step: analyze's, and each preset's of compare-presets."""
    analysis = cli_json("analyze", directory, "--json", out / "a.json")
    comparison = cli_json("compare-presets", directory, "--json", out / "c.json")
    steps = {s["step"]: s["metrics"] for s in analysis["steps"]}
    presets = {
        p["name"]: {s["step"]: s["metrics"] for s in p["steps"]} for p in comparison["presets"]
    }
    return steps, presets


def preset_part(logged: dict[str, Any], preset: str, prefix: str) -> dict[str, Any]:
    start = f"{prefix}{preset}/"
    return {k[len(start) :]: v for k, v in logged.items() if k.startswith(start)}


def test_the_loop_recipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    logs: dict[int, dict[str, float]] = {}
    logger = SimpleNamespace(log=lambda values, step: logs.setdefault(step, values))
    run_recipe("loop", {"batches": [batch(seed) for seed in range(3)], "logger": logger})
    analysis, presets = per_step(tmp_path / "rcdiag_dump", tmp_path)
    assert sorted(analysis) == sorted(logs) == [0, 1, 2]
    chosen = ("decoupled_token_is", "decoupled_geo_rs")
    for step, log in logs.items():
        assert_same({k: v for k, v in log.items() if k in analysis[step]}, analysis[step])
        for preset in chosen:
            assert_same(preset_part(log, preset, ""), presets[preset][step])
        assert len(log) == len(analysis[step]) + sum(len(presets[p][step]) for p in chosen)


class FakeDataProto:
    """What the recipe reads of verl's DataProto: a dict-like ``batch`` of tensors and a
    ``non_tensor_batch`` dict of numpy arrays."""

    def __init__(self, tensors: dict[str, Any], non_tensors: dict[str, np.ndarray]) -> None:
        self.batch = tensors
        self.non_tensor_batch = non_tensors


def test_the_verl_recipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace = run_recipe("verl", {})
    logged: dict[int, dict[str, Any]] = {}
    for step in (1, 2, 3):
        rollout, old, mask = batch(10 + step)
        uid = np.array([f"prompt-{i // 4}" for i in range(len(mask))], dtype=object)
        data = FakeDataProto(
            {"rollout_log_probs": rollout, "old_log_probs": old, "response_mask": mask},
            {"uid": uid},
        )
        metrics: dict[str, Any] = {"actor/entropy": 1.0}
        namespace["rcdiag_step"](data, step, metrics)
        logged[step] = metrics
    without = FakeDataProto({"old_log_probs": old, "response_mask": mask}, {})
    namespace["rcdiag_step"](without, 4, {})  # calculate_log_probs off: nothing to do
    namespace["rcdiag_writer"].close()
    analysis, presets = per_step(tmp_path / "rcdiag_dump", tmp_path)
    assert sorted(analysis) == [1, 2, 3]
    for step, metrics in logged.items():
        assert metrics.pop("actor/entropy") == 1.0
        ours = {k: v for k, v in metrics.items() if not k.startswith("rcdiag_preset/")}
        assert_same(ours, analysis[step])
        for preset in namespace["RCDIAG_PRESETS"]:
            assert_same(preset_part(metrics, preset, "rcdiag_preset/"), presets[preset][step])
    table = pq.read_table(tmp_path / "rcdiag_dump" / "step=2" / "rank-0.parquet")
    assert table.column("uid").to_pylist()[:5] == ["prompt-0"] * 4 + ["prompt-1"]


class FakeGRPOTrainer:
    """What the recipe touches of TRL's GRPOTrainer; ``_generate_and_score_completions`` returns
    the tensors of its ``inputs`` as TRL's batch dict."""

    def __init__(self, *, output_dir: str, process_index: int) -> None:
        self.args = SimpleNamespace(output_dir=output_dir)
        self.accelerator = SimpleNamespace(process_index=process_index)
        self.model = SimpleNamespace(training=True)
        self.state = SimpleNamespace(global_step=0)
        self._metrics: dict[str, defaultdict[str, list[float]]] = {
            "train": defaultdict(list),
            "eval": defaultdict(list),
        }

    def _generate_and_score_completions(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return {"completion_ids": torch.zeros(1), **inputs}


def test_the_trl_recipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "trl", types.ModuleType("trl"))
    sys.modules["trl"].GRPOTrainer = FakeGRPOTrainer  # type: ignore[attr-defined]
    namespace = run_recipe("trl", {"__name__": "recipe"})
    trainer = namespace["RcdiagGRPOTrainer"](output_dir=str(tmp_path / "run"), process_index=1)
    for step in (0, 1):
        trainer.state.global_step = step
        rollout, old, mask = batch(20 + step)
        inputs = {
            "sampling_per_token_logps": rollout,
            "old_per_token_logps": old,
            "completion_mask": mask,
        }
        assert trainer._generate_and_score_completions(inputs)["completion_mask"] is mask
    trainer.model.training = False  # evaluation: nothing written, nothing logged
    trainer._generate_and_score_completions(inputs)
    trainer.model.training = True
    trainer.state.global_step = 2
    trainer._generate_and_score_completions({"completion_mask": mask})  # no IS correction
    trainer.rcdiag_writer.close()
    dump = tmp_path / "run" / "rcdiag_dump"
    assert sorted(p.relative_to(dump).as_posix() for p in dump.rglob("*.parquet")) == [
        "step=0/rank-1.parquet",
        "step=1/rank-1.parquet",
    ]
    analysis, presets = per_step(dump, tmp_path)
    logged = trainer._metrics["train"]
    assert not trainer._metrics["eval"]
    for index, step in enumerate((0, 1)):
        at_step = {k: v[index] for k, v in logged.items()}
        ours = {k: v for k, v in at_step.items() if not k.startswith("rcdiag_preset/")}
        assert_same(ours, analysis[step])
        for preset in trainer.rcdiag_presets:
            assert_same(preset_part(at_step, preset, "rcdiag_preset/"), presets[preset][step])


def test_the_readme_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    readme = (DOC.parent.parent / "README.md").read_text(encoding="utf-8")
    (code,) = [c for _, c in BLOCK.findall(readme) if "rcdiag.torch" in c]
    rollout, old, mask = batch(30)
    names = {"rank": 0, "step": 4, "response_mask": mask}
    namespace = {"rollout_log_probs": rollout, "old_log_probs": old, **names}
    exec(compile(code, "README.md", "exec"), namespace)
    namespace["writer"].close()
    analysis, presets = per_step(tmp_path / "rcdiag_dump", tmp_path)
    metrics = namespace["metrics"]
    assert_same({k: v for k, v in metrics.items() if k in analysis[4]}, analysis[4])
    assert_same(
        {k: metrics[k] for k in presets["decoupled_geo_rs"][4]}, presets["decoupled_geo_rs"][4]
    )
