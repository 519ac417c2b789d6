"""Dumps in other trainers' own formats, written as each trainer writes them, from the same
per-sample log-probs a parquet dump is written from (tests/test_native_formats.py).

Each writer follows its trainer's source at a named commit (key names, nesting, shapes, dtypes,
file names and layout); this module is written from reading that source, not copied from it:

* slime — THUDM/slime main 624b824a898ab0ec1fcb4d373004c7f3852bf515 (2026-08-21):
  ``slime/observability/rollout_data_utils.py`` (``save_debug_rollout_data``),
  ``slime/observability/train_data_utils.py`` (``_build_dump_payload``, ``save_debug_train_data``),
  ``slime/utils/types.py`` (``Sample``, ``Sample.to_dict``), ``slime/ray/rollout.py``
  (``_convert_samples_to_train_data``, ``_split_train_data_by_dp``), ``slime/utils/arguments.py``
  (``--dump-details`` → ``rollout_data/{rollout_id}.pt``, ``train_data/{rollout_id}.pt``).
* Miles — radixark/miles main 31f1ca961a94cb860cec3b2dea34ec332bfa8f76 (2026-08-21):
  ``miles/utils/train_dump_utils.py`` (``save_debug_train_data_for_rank``),
  ``miles/utils/arguments.py`` (``train_data/{rollout_id}_{rank}.pt``),
  ``miles/backends/training_utils/cp_utils.py`` (``slice_log_prob_with_cp``: the zigzag split),
  ``miles/ray/rollout/train_data_conversion.py`` (``_package_shards``, ``process_rollout_data_shard``:
  ``partition`` is removed on the training side), ``miles/backends/training_utils/debug_dump.py``
  (``policy_loss_debug/rank_{r}_call_{n}.pt``), ``miles/ray/rollout/debug_data.py``
  (``dashboard_columns/rollout_{id}.parquet``).
* NeMo-RL — NVIDIA-NeMo/RL main 7ea279abfbeb698b092856d0dab61e7cf39bc909 (2026-08-22):
  ``nemo_rl/algorithms/grpo.py`` (the ``log_data`` of the training loop),
  ``nemo_rl/utils/logger.py`` (``log_batched_dict_as_jsonl``).
* SkyRL — NovaSky-AI/SkyRL main a9564572eb8e91076be43c1bd5e4615e3de17265 (2026-08-21):
  ``skyrl/backends/skyrl_train/training_batch.py`` (``TensorBatch.__reduce__``, ``__getstate__``,
  ``_serialize_tensor``, ``pad_training_input_batch``), ``skyrl/train/trainer.py`` (``dump_data``,
  ``convert_to_training_input``), ``skyrl/train/dataset/preprocess.py``
  (``convert_prompts_responses_to_batch_tensors``: right-aligned response tensors).
"""

from __future__ import annotations

import json
import pickle
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch


@dataclass
class Sample:
    """One response as every writer takes it: float32 log-probs of the response tokens."""

    prompt_length: int
    rollout: np.ndarray  # float32 [R]
    old: np.ndarray  # float32 [R]
    mask: np.ndarray  # bool [R]
    group: int
    status: str = "completed"
    versions: tuple[str, ...] = ()


def random_samples(
    seed: int, count: int, groups: int = 4, max_length: int = 40, mismatch: float = 0.05
) -> list[Sample]:
    """``count`` samples with a rollout/trainer mismatch and some masked tokens (multi-turn)."""
    rng = np.random.default_rng(seed)
    samples = []
    for i in range(count):
        length = int(rng.integers(3, max_length))
        old = -rng.exponential(0.7, length).astype(np.float32)
        rollout = (old + rng.normal(0, mismatch, length)).astype(np.float32)
        rollout = np.minimum(rollout, 0).astype(np.float32)
        mask = rng.random(length) > 0.1
        mask[0] = True
        samples.append(
            Sample(int(rng.integers(2, 12)), rollout, old, mask, group=i * groups // count)
        )
    return samples


# --------------------------------------------------------------------------------------- slime


def sample_to_dict(sample: Sample, index: int, rollout_id: int) -> dict[str, Any]:
    """``Sample.to_dict()``: every dataclass field, ``status`` as its value, and the two nested
    infos as dictionaries (``slime/utils/types.py``)."""
    response = len(sample.rollout)
    prompt_tokens = list(range(100, 100 + sample.prompt_length))
    return {
        "group_index": sample.group,
        "index": index,
        "rollout_id": None,
        "prompt": "question",
        "tokens": prompt_tokens + list(range(1000, 1000 + response)),
        "multimodal_inputs": None,
        "multimodal_train_inputs": None,
        "multimodal_train_input_id": None,
        "apply_chat_template_kwargs": {},
        "response": "answer",
        "response_length": response,
        "label": "42",
        "reward": 1.0,
        "loss_mask": [int(m) for m in sample.mask],
        "weight_versions": list(sample.versions),
        "rollout_log_probs": [float(v) for v in sample.rollout],  # a list of Python floats
        "rollout_top_p_token_ids": None,
        "rollout_top_p_token_offsets": None,
        "rollout_routed_experts": None,
        "remove_sample": False,
        "teacher_log_probs": None,
        "status": sample.status,
        "metadata": {},
        "generate_function_path": None,
        "custom_rm_path": None,
        "train_metadata": None,
        "session_id": None,
        "non_generation_time": 0.0,
        "spec_info": {
            "spec_accept_token_num": 0,
            "spec_draft_token_num": 0,
            "spec_verify_ct": 0,
            "completion_token_num": 0,
        },
        "prefix_cache_info": {"cached_tokens": 0, "total_prompt_tokens": 0},
    }


def write_slime_rollout(
    root: Path, step: int, samples: list[Sample], evaluation: bool = False
) -> Path:
    """``save_debug_rollout_data``: ``rollout_data/{id}.pt`` (``eval_{id}.pt`` for evaluation)."""
    name = f"eval_{step}.pt" if evaluation else f"{step}.pt"
    path = root / "rollout_data" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "rollout_id": step,
            "samples": [sample_to_dict(s, i, step) for i, s in enumerate(samples)],
        },
        path,
    )
    return path


def _train_columns(samples: list[Sample], positions: list[int]) -> dict[str, Any]:
    """One data-parallel rank's ``rollout_data`` after ``tensorize_rollout_data_for_training``:
    lists with one entry per local sample, per-token fields as CPU tensors of slime's dtypes."""
    chosen = [samples[p] for p in positions]
    return {
        "tokens": [
            torch.arange(s.prompt_length + len(s.rollout), dtype=torch.long) for s in chosen
        ],
        "response_lengths": [len(s.rollout) for s in chosen],
        "total_lengths": [s.prompt_length + len(s.rollout) for s in chosen],
        "rewards": [1.0 for _ in chosen],
        "truncated": [0 for _ in chosen],
        "loss_masks": [torch.as_tensor(s.mask.astype(np.int32), dtype=torch.int) for s in chosen],
        "rollout_log_probs": [torch.as_tensor(s.rollout, dtype=torch.float32) for s in chosen],
        "log_probs": [torch.as_tensor(s.old, dtype=torch.float32) for s in chosen],
    }


def write_slime_v2(root: Path, step: int, samples: list[Sample], dp_size: int = 2) -> Path:
    """``save_debug_train_data`` (format_version 2): the DP shards gathered, each sample a dict with
    ``rollout_position`` and ``sample_index``, sorted by ``rollout_position``; context-parallel
    fields already restored to the whole response."""
    shards = [list(range(r, len(samples), dp_size)) for r in range(dp_size)]
    flat = []
    layout = []
    for dp_rank, positions in enumerate(shards):
        columns = _train_columns(samples, positions)
        for row, position in enumerate(positions):
            entry: dict[str, Any] = {
                "data_parallel_rank": dp_rank,
                "sample_index": position,
                "rollout_position": position,
            }
            entry.update({key: values[row] for key, values in columns.items()})
            flat.append(entry)
        layout.append(
            {
                "rank": dp_rank,
                "data_parallel_rank": dp_rank,
                "sample_indices": positions,
                "partition": positions,
                "micro_batch_indices": [[list(range(len(positions)))]],
                "num_microbatches": [1],
                "global_batch_sizes": [len(samples)],
            }
        )
    flat.sort(key=lambda s: s["rollout_position"])
    path = root / "train_data" / f"{step}.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "format_version": 2,
            "rollout_id": step,
            "rank": 0,
            "samples": flat,
            "dp_shards": layout,
            "raw_reward": [1.0] * len(samples),
        },
        path,
    )
    return path


def zigzag_slice(
    values: torch.Tensor, total: int, response: int, cp_rank: int, cp_size: int
) -> torch.Tensor:
    """What a context-parallel rank keeps of a response's per-token tensor: the sequence is cut
    into 2·cp chunks of ⌈total/(2·cp)⌉ tokens, the rank keeps chunks r and 2·cp−1−r, and the
    log-prob of token t sits at logit t−1 (``slice_log_prob_with_cp``, qkv_format thd)."""
    prompt = total - response
    size = -(-total // (2 * cp_size))
    parts = []
    for chunk in (cp_rank, 2 * cp_size - 1 - cp_rank):
        low, high = max(chunk * size, prompt - 1), min((chunk + 1) * size, total - 1)
        if low < high:
            parts.append(values[low - (prompt - 1) : high - (prompt - 1)])
    return torch.cat(parts) if parts else values[:0]


def write_per_rank(
    root: Path,
    step: int,
    samples: list[Sample],
    *,
    dp_size: int = 2,
    cp_size: int = 1,
    tp_size: int = 1,
    record_cp: bool = True,
    key: str = "sample_indices",
    with_log_probs: bool = True,
    split: tuple[str, ...] = ("rollout_log_probs", "log_probs"),
) -> list[Path]:
    """Per-rank training files, ``train_data/{id}_{rank}.pt``: Miles' ``save_debug_train_data_for_rank``
    (``record_cp``: ``cp_rank``/``cp_size``/``qkv_format`` saved; without: slime's layout before
    format_version 2, keyed by ``partition``). Ranks are numbered tensor-parallel fastest, then
    context-parallel, then data-parallel; tensor-parallel peers write identical files. ``split``:
    the fields stored as each context-parallel rank's slice."""
    paths = []
    for dp_rank in range(dp_size):
        positions = list(range(dp_rank, len(samples), dp_size))
        for cp_rank in range(cp_size):
            columns = _train_columns(samples, positions)
            if not with_log_probs:
                del columns["log_probs"]
            for field in split:
                if field in columns:
                    columns[field] = [
                        zigzag_slice(v, t, r, cp_rank, cp_size) if cp_size > 1 else v
                        for v, t, r in zip(
                            columns[field],
                            columns["total_lengths"],
                            columns["response_lengths"],
                            strict=True,
                        )
                    ]
            if key == "sample_indices":
                columns["sample_indices"] = np.asarray(positions, dtype=np.int64)
                columns["weight_versions"] = [list(samples[p].versions) for p in positions]
            else:
                columns["partition"] = positions
                columns["sample_indices"] = positions
            for tp_rank in range(tp_size):
                rank = (dp_rank * cp_size + cp_rank) * tp_size + tp_rank
                pack: dict[str, Any] = {"rollout_id": step, "rank": rank, "rollout_data": columns}
                if record_cp:
                    pack.update(cp_rank=cp_rank, cp_size=cp_size, qkv_format="thd")
                path = root / "train_data" / f"{step}_{rank}.pt"
                path.parent.mkdir(parents=True, exist_ok=True)
                torch.save(pack, path)
                paths.append(path)
    return paths


def write_miles_extras(root: Path, step: int, samples: list[Sample]) -> None:
    """What else a Miles ``--dump-details`` directory holds: the rollout-only parquet mirror and a
    ``policy_loss_debug`` file (neither is the training dump)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    mirror = root / "dashboard_columns" / f"rollout_{step}.parquet"
    mirror.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.table(
            {
                "sample_index": pa.array(range(len(samples)), pa.int32()),
                "rollout_log_probs": [s.rollout.tolist() for s in samples],
            }
        ),
        mirror,
    )
    cache = root / "dashboard" / "cache" / f"rollout_{step}.parquet"  # the dashboard's summaries
    cache.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"sample_index": list(range(len(samples)))}), cache)
    debug = root / "policy_loss_debug" / "rank_0_call_0.pt"
    debug.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "rank": 0,
            "call": 0,
            "samples": [
                {
                    "index": 0,
                    "train_log_probs": torch.as_tensor(samples[0].old),
                    "old_log_probs": torch.as_tensor(samples[0].old),
                    "rollout_log_probs": torch.as_tensor(samples[0].rollout),
                    "local_loss_mask": torch.ones(len(samples[0].old)),
                }
            ],
        },
        debug,
    )


# ------------------------------------------------------------------------------------- NeMo-RL


def write_nemo_rl(log_dir: Path, step: int, samples: list[Sample]) -> Path:
    """``log_batched_dict_as_jsonl(log_data, f"train_data_step{step}.jsonl")``: the padded batch,
    one line per sample, every per-sample value wrapped in a one-element list. Position t of the
    log-probs is log p(token t | tokens before it): 0 at position 0, the trainer's values over the
    prompt too (``prev_logprobs``), none from the generator there."""
    rng = np.random.default_rng(step)
    width = max(s.prompt_length + len(s.rollout) for s in samples)
    path = log_dir / f"train_data_step{step}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        for i, s in enumerate(samples):
            p, r = s.prompt_length, len(s.rollout)
            generation = np.zeros(width, dtype=np.float32)
            previous = np.zeros(width, dtype=np.float32)
            token_mask = np.zeros(width, dtype=np.float32)
            generation[p : p + r] = s.rollout
            previous[1:p] = -rng.exponential(2.0, p - 1)  # the prompt's log-probs
            previous[p : p + r] = s.old
            token_mask[p : p + r] = s.mask
            sample_mask = 0.0 if s.status == "masked" else 1.0
            record = {
                "content": [
                    [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
                ],
                "rewards": [1.0],
                "input_lengths": [p + r],
                "token_ids": [list(range(width))],
                "token_loss_mask": [token_mask.tolist()],
                "sample_loss_mask": [sample_mask],
                "advantages": [[0.5] * width],
                "generation_logprobs": [generation.tolist()],
                "prev_logprobs": [previous.tolist()],
            }
            handle.write(json.dumps({**record, "idx": i}, default=str) + "\n")
    return path


# --------------------------------------------------------------------------------------- SkyRL


def _serialize(array: np.ndarray) -> dict[str, Any]:
    """``_serialize_tensor``'s fast path: the tensor's numpy bytes, shape and dtype."""
    return {
        "format": "numpy",
        "data": array.tobytes(),
        "shape": array.shape,
        "dtype": str(array.dtype),
    }


def _skyrl_module() -> types.ModuleType:
    """A module at SkyRL's path whose batch class pickles as SkyRL's does (``__reduce__`` →
    ``_rebuild_tensor_batch(cls, __getstate__())``), so that the pickle names SkyRL's globals."""
    name = "skyrl.backends.skyrl_train.training_batch"
    if name in sys.modules:
        return sys.modules[name]
    module = types.ModuleType(name)

    def _rebuild_tensor_batch(cls: Any, state: dict[str, Any]) -> Any:
        obj = dict.__new__(cls)
        obj.update(state["batch_dict"])
        return obj

    class TrainingInputBatch(dict):  # type: ignore[type-arg]
        metadata: dict[str, Any] | None = None

        def __reduce__(self) -> Any:
            state = {
                "batch_dict": {
                    k: None if v is None else _serialize(np.ascontiguousarray(v))
                    for k, v in self.items()
                },
                "batch_size": len(next(iter(self.values()))),
                "device": torch.device("cpu"),
                "metadata": self.metadata,
            }
            return (_rebuild_tensor_batch, (type(self), state))

    _rebuild_tensor_batch.__module__ = name
    _rebuild_tensor_batch.__qualname__ = "_rebuild_tensor_batch"
    TrainingInputBatch.__module__ = name
    TrainingInputBatch.__qualname__ = "TrainingInputBatch"
    module._rebuild_tensor_batch = _rebuild_tensor_batch  # type: ignore[attr-defined]
    module.TrainingInputBatch = TrainingInputBatch  # type: ignore[attr-defined]
    for parent in ("skyrl", "skyrl.backends", "skyrl.backends.skyrl_train"):
        sys.modules.setdefault(parent, types.ModuleType(parent))
    sys.modules[name] = module
    return module


def write_skyrl(export_path: Path, step: int, samples: list[Sample], pad_size: int = 1) -> Path:
    """``dump_data(training_input, f"global_step_{step}_training_input")``: the batch pickled to
    ``dumped_data/``, response tensors ``[B, longest response]`` right-aligned, the trainer's
    ``action_log_probs`` holding prompt-token log-probs in a short response's leading columns, and
    ``pad_size`` rows copied from row 0 (loss mask 0) appended as ``pad_training_input_batch`` does."""
    rng = np.random.default_rng(step)
    width = max(len(s.rollout) for s in samples)
    rows = len(samples)
    response_mask = np.zeros((rows, width), dtype=np.int64)
    loss_mask = np.zeros((rows, width), dtype=np.float32)
    rollout = np.zeros((rows, width), dtype=np.float32)
    action = -rng.exponential(2.0, (rows, width)).astype(np.float32)  # prompt tokens' log-probs
    for i, s in enumerate(samples):
        r = len(s.rollout)
        response_mask[i, width - r :] = 1
        loss_mask[i, width - r :] = s.mask
        rollout[i, width - r :] = s.rollout
        action[i, width - r :] = s.old
    batch = {
        "sequences": np.zeros((rows, width + 4), dtype=np.int64),
        "attention_mask": np.ones((rows, width + 4), dtype=np.int64),
        "response_mask": response_mask,
        "loss_mask": loss_mask,
        "rollout_logprobs": rollout,
        "action_log_probs": action,
        "base_action_log_probs": action.copy(),
        "advantages": np.zeros((rows, width), dtype=np.float32),
        "returns": np.zeros((rows, width), dtype=np.float32),
        "rollout_expert_indices": None,
    }
    if pad_size:
        for key, value in batch.items():
            if value is None:
                continue
            pad = np.zeros_like(value[:pad_size]) if key == "loss_mask" else value[[0] * pad_size]
            batch[key] = np.concatenate([value, pad])
    module = _skyrl_module()
    training_input = module.TrainingInputBatch(batch)
    groups: dict[int, list[int]] = {}
    for i, s in enumerate(samples):
        groups.setdefault(s.group, []).append(i)
    training_input.metadata = {
        "policy_mini_batch_boundaries": [(0, rows)],
        "policy_prompt_boundaries": [(min(v), max(v) + 1) for v in groups.values()],
        "response_length": width,
        "pad_size": pad_size,
    }
    path = export_path / "dumped_data" / f"global_step_{step}_training_input.pkl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        pickle.dump(training_input, handle)
    return path
