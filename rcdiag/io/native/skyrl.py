"""SkyRL's dumped training batches: ``{export_path}/dumped_data/global_step_{N}_training_input.pkl``
(``trainer.dump_data_batch=true``; docs/formats.md, "SkyRL").

Read from NovaSky-AI/SkyRL main at a9564572eb8e91076be43c1bd5e4615e3de17265 (2026-08-21):

* ``skyrl/train/trainer.py`` (``dump_data``) pickles the step's ``TrainingInputBatch`` with
  ``TensorBatch.save`` (``pickle.dump``) after the trainer's forward pass and the advantages, so it
  holds ``action_log_probs`` (the trainer's log-probs) beside ``rollout_logprobs``; the ``uids`` are
  removed from its metadata before, ``policy_prompt_boundaries`` (each prompt's rows) stay, and
  ``pad_size`` rows copied from row 0 may be appended to fill the data-parallel ranks.
* ``skyrl/backends/skyrl_train/training_batch.py``: the batch pickles as
  ``_rebuild_tensor_batch(TrainingInputBatch, state)``, ``state`` a dictionary of ``batch_dict``
  (each tensor as ``{"format": "numpy", "data": bytes, "shape", "dtype"}``, or ``{"format":
  "torch", "data": torch.save bytes}`` for bfloat16), ``batch_size``, ``device`` and ``metadata``.
* ``skyrl/train/dataset/preprocess.py`` (``convert_prompts_responses_to_batch_tensors``): the
  response tensors (``response_mask``, ``loss_mask``, ``rollout_logprobs``, and the forward's
  ``action_log_probs``) are ``[batch, longest response]`` and right-aligned: a shorter response
  occupies the last columns, and ``action_log_probs``' leading columns then hold log-probs of prompt
  tokens, which ``response_mask`` marks 0.

A pickle can run any code while it loads, so these files are read only with ``trust_pickle``
(``--trust-pickle``). They are then read by a pickle reader that builds SkyRL's two classes as
plain dictionaries (SkyRL need not be installed) and imports any other class the file names, as
``pickle.load`` would.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rcdiag.errors import InputError, UsageError
from rcdiag.io.native.common import Rows, import_torch
from rcdiag.io.native.names import SKYRL_FILE

FILE_PATTERN = SKYRL_FILE

_SKYRL_MODULES = ("skyrl.backends.skyrl_train.training_batch", "skyrl_train.training_batch")


def _rebuild(cls: Any, state: dict[str, Any]) -> dict[str, Any]:
    return {"__class__": getattr(cls, "__name__", str(cls)), **state}


class _Batch(dict[str, Any]):
    """Stands for SkyRL's ``TensorBatch`` classes: keeps the state the pickle gives it."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        self["__state__"] = state


class _Device:
    """Stands for ``torch.device`` (the batch records where its tensors were)."""

    def __init__(self, *args: Any) -> None:
        self.args = args


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module in _SKYRL_MODULES:
            return _rebuild if name == "_rebuild_tensor_batch" else _Batch
        if (module, name) == ("torch", "device"):
            return _Device
        return super().find_class(module, name)


def _tensor(value: Any, path: Path, key: str) -> np.ndarray:
    """A tensor of SkyRL's pickled form (``_serialize_tensor``), or a tensor itself."""
    if hasattr(value, "detach"):
        tensor = value.detach().cpu()
        return (tensor.float() if "float16" in str(tensor.dtype) else tensor).numpy()
    if not isinstance(value, dict) or "data" not in value:
        raise InputError(f"{path}: {key!r} is not a tensor SkyRL serialised")
    if value.get("format") == "torch":
        torch = import_torch(path)
        tensor = torch.load(io.BytesIO(value["data"]), weights_only=True)
        return tensor.float().numpy() if "float16" in str(tensor.dtype) else tensor.numpy()
    try:
        array = np.frombuffer(value["data"], dtype=np.dtype(value["dtype"]))
        return array.reshape(value["shape"])
    except (TypeError, ValueError, KeyError) as exc:
        raise InputError(f"{path}: {key!r} cannot be read as an array ({exc})") from None


def _state(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            loaded = _Unpickler(handle).load()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError) as exc:
        reason = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise InputError(f"{path}: not a readable SkyRL pickle ({reason})") from None
    if isinstance(loaded, _Batch):  # pickled as a plain dict subclass (older SkyRL): items + state
        state = loaded.pop("__state__", None) or {}
        if isinstance(state, dict) and isinstance(state.get("batch_dict"), dict):
            return state
        metadata = state.get("metadata") if isinstance(state, dict) else None
        return {"batch_dict": dict(loaded), "metadata": metadata or {}}
    if isinstance(loaded, dict) and isinstance(loaded.get("batch_dict"), dict):
        return loaded
    if isinstance(loaded, dict) and "action_log_probs" in loaded:  # the batch's tensors alone
        return {"batch_dict": loaded, "metadata": loaded.get("metadata") or {}}
    raise InputError(f"{path}: not a SkyRL training batch (no 'batch_dict' in the pickle)")


def refuse_untrusted(path: Path) -> None:
    raise UsageError(
        f"{path}: is a pickle (SkyRL's dumped training batch), and loading a pickle can run any "
        "code it holds; read it only if you trust where it comes from: pass --trust-pickle, or "
        "convert it once where you trust it (rcdiag convert)"
    )


def read(path: Path, trust_pickle: bool) -> Rows:
    """The step's rows: per sample, the response columns (``response_mask`` 1), valid where
    ``loss_mask`` is not 0; SkyRL's padding rows are left out."""
    if not trust_pickle:
        refuse_untrusted(path)
    state = _state(path)
    batch = state["batch_dict"]
    metadata = state.get("metadata") or {}
    for key in ("action_log_probs", "rollout_logprobs", "response_mask", "loss_mask"):
        if batch.get(key) is None:
            hint = (
                " (the generator returned no log-probs: SkyRL records them when sampling "
                "asks for logprobs)"
                if key == "rollout_logprobs"
                else ""
            )
            raise InputError(f"{path}: the batch has no {key!r}{hint}")
    trainer = _tensor(batch["action_log_probs"], path, "action_log_probs")
    rollout = _tensor(batch["rollout_logprobs"], path, "rollout_logprobs")
    response = _tensor(batch["response_mask"], path, "response_mask") != 0
    loss = _tensor(batch["loss_mask"], path, "loss_mask") != 0
    shapes = {
        k: a.shape
        for k, a in (
            ("action_log_probs", trainer),
            ("rollout_logprobs", rollout),
            ("response_mask", response),
            ("loss_mask", loss),
        )
    }
    if len(set(shapes.values())) != 1 or trainer.ndim != 2:
        raise InputError(f"{path}: the response tensors' shapes differ or are not 2-D: {shapes}")
    pad = int(metadata.get("pad_size") or 0)
    kept = trainer.shape[0] - pad
    rows = Rows()
    if pad:
        rows.leave_out("padding", pad)
    lengths = response[:kept].sum(axis=1)
    width = trainer.shape[1]
    # right-aligned: row i's response is its last lengths[i] columns
    starts = width - lengths
    inside = np.arange(width)[None, :] >= starts[:, None]
    if not np.array_equal(inside, response[:kept]):
        row = int(np.flatnonzero((inside != response[:kept]).any(axis=1))[0])
        raise InputError(
            f"{path}: row {row}: 'response_mask' is not right-aligned (SkyRL's layout: a "
            "response fills the last columns)"
        )
    split = np.cumsum(lengths)[:-1]
    rows.rollout = np.split(rollout[:kept][inside], split)
    rows.old = np.split(trainer[:kept][inside], split)
    rows.mask = np.split(loss[:kept][inside], split)
    boundaries = metadata.get("policy_prompt_boundaries")
    if boundaries:
        groups = np.full(kept, -1, dtype=np.int64)
        for number, (start, stop) in enumerate(boundaries):
            groups[int(start) : int(stop)] = number
        if (groups >= 0).all():
            rows.uid = [f"prompt-{g}" for g in groups.tolist()]
    return rows


def chunks(path: Path, trust_pickle: bool) -> Iterator[Rows]:
    yield read(path, trust_pickle)
