"""slime's (and Miles') ``--dump-details`` directories: ``rollout_data/{id}.pt`` beside
``train_data/{id}.pt`` (slime, ``format_version`` 2) or ``train_data/{id}_{rank}.pt`` (Miles, and
slime before version 2: :mod:`rcdiag.io.native.miles`); docs/formats.md, "slime and Miles".

Read from THUDM/slime main at 624b824a898ab0ec1fcb4d373004c7f3852bf515 (2026-08-21):

* ``slime/observability/rollout_data_utils.py`` (``save_debug_rollout_data``) saves
  ``{"rollout_id": id, "samples": [Sample.to_dict(), …]}``: per sample ``rollout_log_probs`` (a list,
  one per response token), ``loss_mask`` (a list or None: every token), ``status`` (``"completed"``,
  ``"truncated"``, ``"aborted"``, ``"failed"``), ``weight_versions`` (the engine's weight version
  of each turn, strings of the integer the trainer increments at each weight update),
  ``group_index`` (the prompt), ``index``, ``remove_sample``. Evaluation rollouts go to
  ``eval_{id}.pt`` and have no training side.
* ``slime/observability/train_data_utils.py`` (``save_debug_train_data``) saves
  ``{"format_version": 2, "rollout_id", "rank", "samples": [...], "dp_shards": [...]}``, the samples
  of every data-parallel rank sorted into the rollout file's order, each with ``rollout_position``
  (its index in the rollout file's ``samples``), ``sample_index``, and its per-sample training
  fields, the context-parallel ones already gathered to the whole response: ``log_probs`` (the
  trainer's), ``rollout_log_probs``, ``loss_masks``, ``response_lengths``.

Rows are the training samples (rollout samples that were not trained on have no trainer log-probs),
joined to the rollout file by ``rollout_position`` (else by ``sample_index`` = ``Sample.index``).
Samples whose status is ``aborted`` or ``failed`` are left out and counted. The policy lag of a
sample is the newest weight version of the step's rollout file minus the oldest of the sample's
turns (docs/formats.md says what this assumes).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rcdiag.errors import InputError
from rcdiag.io.native.common import Rows, as_array, load_pt, log_probs, same_length
from rcdiag.io.native.miles import TrainSample, read_rank_files

LEFT_OUT_STATUSES = ("aborted", "failed")
"""Sample statuses whose rows are not read: generation stopped or broke (slime's Sample.Status)."""


def is_v2(pack: Any) -> bool:
    """Whether a loaded training file is slime's ``format_version`` 2 (samples in rollout order)."""
    return isinstance(pack, dict) and "samples" in pack and "rollout_data" not in pack


def read_v2_train_file(path: Path, pack: Any) -> list[TrainSample]:
    """The samples of a loaded ``format_version`` 2 training file, in rollout order."""
    if not isinstance(pack, dict) or not isinstance(pack.get("samples"), list):
        raise InputError(f"{path}: not a slime training file (a dictionary with 'samples')")
    samples = []
    for number, sample in enumerate(pack["samples"]):
        where = f"{path}: sample {number}"
        if not isinstance(sample, dict):
            raise InputError(f"{where}: is {type(sample).__name__}, not a dictionary")
        position, index = sample.get("rollout_position"), sample.get("sample_index")
        old, rollout = sample.get("log_probs"), sample.get("rollout_log_probs")
        mask = sample.get("loss_masks")
        response = sample.get("response_lengths")
        if response is None:
            response = len(mask if mask is not None else old if old is not None else rollout or [])
        key: Any = position if position is not None else index
        samples.append(
            TrainSample(
                key=number if key is None else int(key),
                by_position=position is not None,
                joinable=key is not None,
                response_length=int(response),
                old=None if old is None else log_probs(old, where, "log_probs"),
                rollout=None if rollout is None else log_probs(rollout, where, "rollout_log_probs"),
                mask=None if mask is None else as_array(mask, where, "loss_masks") != 0,
                weight_versions=None,
                where=where,
            )
        )
    return samples


def read_rollout_file(path: Path, trust_pickle: bool = False) -> list[dict[str, Any]]:
    """The ``samples`` of a rollout file (``Sample.to_dict()`` each)."""
    pack = load_pt(path, trust_pickle)
    if not isinstance(pack, dict) or not isinstance(pack.get("samples"), list):
        raise InputError(f"{path}: not a slime rollout file (a dictionary with 'samples')")
    for number, sample in enumerate(pack["samples"]):
        if not isinstance(sample, dict):
            raise InputError(f"{path}: sample {number}: is {type(sample).__name__}, not a dict")
    return pack["samples"]


def _numeric_versions(versions: Any) -> list[int]:
    return [int(v) for v in versions or () if str(v).strip().isdigit()]


def _rollout_sample(
    sample: TrainSample, rollout: Sequence[dict[str, Any]], by_index: dict[int, int], path: Path
) -> dict[str, Any]:
    if not sample.joinable:
        raise InputError(
            f"{sample.where}: has neither 'rollout_position' nor 'sample_index', so it cannot "
            f"be joined to {path}"
        )
    if sample.by_position:
        if not 0 <= sample.key < len(rollout):
            raise InputError(
                f"{sample.where}: rollout position {sample.key} is not in {path} "
                f"({len(rollout)} samples); are the files from different steps?"
            )
        return rollout[sample.key]
    if sample.key not in by_index:
        raise InputError(
            f"{sample.where}: no sample with index {sample.key} in {path}; are the files from "
            "different steps?"
        )
    return rollout[by_index[sample.key]]


def join(
    samples: Sequence[TrainSample],
    rollout: Sequence[dict[str, Any]] | None,
    rollout_path: Path | None,
) -> Rows:
    """The rows of one step: each training sample with its rollout sample (when the rollout file
    is there) for the status, the prompt group and the weight versions."""
    rows = Rows()
    by_index: dict[int, int] = {}
    if rollout is not None:
        by_index = {int(s["index"]): i for i, s in enumerate(rollout) if s.get("index") is not None}
    uids: list[Any] = []
    versions: list[list[int]] = []
    for sample in samples:
        source: dict[str, Any] = {}
        if rollout is not None and rollout_path is not None:
            source = _rollout_sample(sample, rollout, by_index, rollout_path)
        status = str(source.get("status", "")).lower()
        if status in LEFT_OUT_STATUSES:
            rows.leave_out(status)
            continue
        where = sample.where
        rollout_values = source.get("rollout_log_probs")
        rollout_lp = (
            sample.rollout
            if rollout_values is None
            else log_probs(rollout_values, where, "rollout_log_probs")
        )
        if rollout_lp is None:
            raise InputError(
                f"{where}: no 'rollout_log_probs' (the rollout engine returned no log-probs)"
            )
        if sample.old is None:
            raise InputError(
                f"{where}: no 'log_probs' (the trainer's log-probs) in any training file of "
                "this step"
            )
        mask = sample.mask
        if mask is None and source.get("loss_mask") is not None:
            mask = as_array(source["loss_mask"], where, "loss_mask") != 0
        if mask is None:
            mask = np.ones(sample.response_length, dtype=bool)
        if source.get("remove_sample"):
            mask = np.zeros_like(mask)
        same_length(
            where,
            sample.response_length,
            rollout_log_probs=rollout_lp,
            log_probs=sample.old,
            loss_masks=mask,
        )
        rows.rollout.append(rollout_lp)
        rows.old.append(sample.old)
        rows.mask.append(mask)
        uids.append(source.get("group_index"))
        turn_versions = source.get("weight_versions", sample.weight_versions)
        versions.append(_numeric_versions(turn_versions))
    if uids and all(u is not None for u in uids):
        rows.uid = uids
    if versions and all(versions):
        newest = max(max(v) for v in versions)
        rows.lag = [newest - min(v) for v in versions]
    return rows


def read_step(
    train_files: Sequence[Path], rollout_file: Path | None, trust_pickle: bool = False
) -> Rows:
    """One step of a ``--dump-details`` directory: its training file(s), joined to its rollout
    file when there is one."""
    first = load_pt(train_files[0], trust_pickle)
    if len(train_files) == 1 and is_v2(first):
        samples = read_v2_train_file(train_files[0], first)
    else:
        samples = read_rank_files(train_files, trust_pickle, {train_files[0]: first})
    rollout = None if rollout_file is None else read_rollout_file(rollout_file, trust_pickle)
    return join(samples, rollout, rollout_file)


def count_training_samples(train_files: Sequence[Path], trust_pickle: bool = False) -> int:
    """The samples of a step's training files, their tensors mapped and not read: the step's rows
    before aborted and failed samples are left out (for progress)."""
    keys: set[Any] = set()
    for path in train_files:
        try:
            pack = load_pt(path, trust_pickle, mmap=True)
        except InputError:
            pack = load_pt(path, trust_pickle)  # a file torch saved without its zip layout
        if is_v2(pack):
            return len(pack["samples"])
        data = pack.get("rollout_data") if isinstance(pack, dict) else None
        if not isinstance(data, dict):
            return 0
        names = data.get("partition")
        if names is None:
            names = data.get("sample_indices")
        if names is None:
            names = range(len(data.get("response_lengths") or ()))
        keys.update(int(k) for k in names if k is not None)
    return len(keys)
