"""NeMo-RL's training-data log: ``{log_dir}/train_data_step{N}.jsonl``, one JSON line per sample
(docs/formats.md, "NeMo-RL").

Read from NVIDIA-NeMo/RL main at 7ea279abfbeb698b092856d0dab61e7cf39bc909 (2026-08-22):

* ``nemo_rl/algorithms/grpo.py`` (the training loop's logging) puts in ``log_data`` the batch's
  ``token_ids``, ``token_loss_mask`` (the batch's ``token_mask``), ``sample_loss_mask``
  (``sample_mask``), ``generation_logprobs`` and ``prev_logprobs`` (the trainer's log-probs, of the
  policy before the step's update), ``input_lengths``, ``advantages``, ``rewards`` and ``content``,
  and writes it with ``log_batched_dict_as_jsonl(log_data, f"train_data_step{step}.jsonl")``, the
  step counted from 1.
* ``nemo_rl/utils/logger.py`` (``log_batched_dict_as_jsonl``) writes one line per sample from a
  micro-batch of one sample: every per-sample value is a one-element list (``"prev_logprobs":
  [[…]]``, ``"sample_loss_mask": [1.0]``), plus ``"idx"``.
* The log-probs are full padded sequences over prompt and response: the value at position t is the
  log-prob of token t given the tokens before it, so position 0 has none (0). NeMo-RL's own
  comparison of the two (``compute_and_apply_seq_logprob_error_masking`` in ``grpo.py``, and
  ``log_plot_token_mult_prob_error`` in ``logger.py``) drops position 0 of ``token_mask``,
  ``generation_logprobs`` and ``prev_logprobs`` (``[:, 1:]``) and weighs each position by
  ``token_mask[:, 1:] * sample_mask``.

A row is the positions from the first to the last with ``token_loss_mask`` 1 (after position 0 is
dropped, as NeMo-RL drops it), valid where ``token_loss_mask × sample_loss_mask`` is not 0. The
file is read line by line with the standard ``json`` module: memory holds one batch of lines.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rcdiag.errors import InputError
from rcdiag.io.native.common import Rows, Shape, as_array, log_probs
from rcdiag.io.native.names import NEMO_RL_FILE

FILE_PATTERN = NEMO_RL_FILE
KEYS = ("generation_logprobs", "prev_logprobs", "token_loss_mask", "sample_loss_mask")


def _unwrap(record: dict[str, Any], key: str, where: str) -> Any:
    """A per-sample value without its one-element batch list (a value written without it is
    taken as it is)."""
    if key not in record:
        present = ", ".join(sorted(record)) or "(none)"
        raise InputError(f"{where}: no key {key!r}; keys are: {present}")
    value = record[key]
    if key == "sample_loss_mask":
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"{where}: {key!r} is {value!r}; expected a number")
        return value
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
        return value[0]
    if isinstance(value, list):
        return value
    raise InputError(f"{where}: {key!r} is not a list of per-token values")


def sample_row(record: Any, where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rollout, trainer, valid)`` of one JSON line: positions 1… of the padded sequence, from
    the first to the last position ``token_loss_mask`` marks."""
    if not isinstance(record, dict):
        raise InputError(f"{where}: is {type(record).__name__}, not a JSON object")
    generation = log_probs(
        _unwrap(record, "generation_logprobs", where), where, "generation_logprobs"
    )
    previous = log_probs(_unwrap(record, "prev_logprobs", where), where, "prev_logprobs")
    token_mask = as_array(_unwrap(record, "token_loss_mask", where), where, "token_loss_mask")
    sample_mask = float(_unwrap(record, "sample_loss_mask", where))
    width = len(token_mask)
    for key, values in (("generation_logprobs", generation), ("prev_logprobs", previous)):
        if len(values) != width:
            raise InputError(
                f"{where}: {key!r} has {len(values)} entries but 'token_loss_mask' has {width}"
            )
    marked = np.flatnonzero(token_mask[1:] != 0) + 1
    if marked.size == 0:
        empty = np.zeros(0, dtype=np.float64)
        return empty, empty, np.zeros(0, dtype=bool)
    span = slice(int(marked[0]), int(marked[-1]) + 1)
    valid = (token_mask[span] * sample_mask) != 0
    return generation[span], previous[span], valid


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle):
                if line.strip():
                    yield number, line
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start}); not a JSONL file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None


def chunks(path: Path, batch_rows: int) -> Iterator[Rows]:
    """The file's samples, ``batch_rows`` lines at a time."""
    rows = Rows()
    for number, line in _lines(path):
        where = f"{path}: line {number + 1}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
        rollout, trainer, valid = sample_row(record, where)
        rows.rollout.append(rollout)
        rows.old.append(trainer)
        rows.mask.append(valid)
        if len(rows) >= batch_rows:
            yield rows
            rows = Rows()
    if len(rows):
        yield rows


def shape(path: Path) -> Shape:
    """The rows of the file (its non-blank lines), without parsing them; the mean row length is a
    guess from the file's size (it only sizes the batches)."""
    count = sum(1 for _ in _lines(path))
    size = os.path.getsize(path)
    return count, False, False, max(1.0, size / max(1, count) / 60)
