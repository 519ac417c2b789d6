"""verl writes rcdiag's dump, turned on by configuration alone (docs/trainer.md, "verl, with no
code").

verl (volcengine/verl; read at main b178a3cd56f58b2d502255daba591e92833930a7, 2026-01-29, and in
the verl 0.9.1 wheel) loads, when it is imported, every module named in ``VERL_USE_EXTERNAL_MODULES``
and every ``verl.plugins`` entry point (rcdiag declares this module as one). Each of its trainers
(``verl/trainer/ppo/ray_trainer.py``, ``verl/trainer/ppo/v1/trainer_base.py``) calls
``verl.utils.debug.metrics.calculate_debug_metrics(batch)`` once per step, on the driver, with the
step's whole batch once the old log-probs have joined it — when
``actor_rollout_ref.rollout.calculate_log_probs=True`` makes the rollout keep its log-probs. The
batch then holds ``rollout_log_probs``, ``old_log_probs``, ``response_mask`` and the prompt
``uid``.

When ``RCDIAG_VERL_DUMP`` names a directory, this module wraps that function: it still returns
verl's metrics, and also writes the batch with :class:`~rcdiag.io.shards.DumpWriter` to
``RCDIAG_VERL_DUMP/step=N/rank-0.parquet``, on disk before the call returns. N is the caller's
``global_steps`` (the trainer's step, so a resumed run goes on numbering), else the batch's
``meta_info["global_steps"]``, else a count of the calls. The policy lag is written when the
batch says which weights generated each sample (verl's fully asynchronous trainer:
``param_version_start``): the trainer's ``current_param_version`` (else the newest
``param_version_end`` of the batch) minus it. Without ``RCDIAG_VERL_DUMP`` the module changes
nothing. A dump that cannot be written is logged once and never stops training.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from types import FrameType
from typing import Any

import numpy as np

ENVIRONMENT = "RCDIAG_VERL_DUMP"
"""The variable naming the dump's directory; unset: the hook does nothing."""

logger = logging.getLogger("rcdiag.verl")


class VerlDump:
    """Writes each batch verl hands to ``calculate_debug_metrics`` as a step of rcdiag's dump."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.calls = 0
        self.failed = False
        self._writer: Any = None

    def writer(self) -> Any:
        if self._writer is None:
            from rcdiag.io.shards import DumpWriter

            self._writer = DumpWriter(self.directory, rank=0)
        return self._writer

    @staticmethod
    def step(data: Any, caller: FrameType | None, calls: int) -> int:
        trainer = None if caller is None else caller.f_locals.get("self")
        for value in (
            getattr(trainer, "global_steps", None),
            (getattr(data, "meta_info", None) or {}).get("global_steps"),
        ):
            if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
                return int(value)
        return calls

    @staticmethod
    def policy_lag(data: Any, caller: FrameType | None) -> np.ndarray | None:
        extra = getattr(data, "non_tensor_batch", None) or {}
        if "param_version_start" not in extra:
            return None
        start = np.asarray(extra["param_version_start"], dtype=np.int64)
        trainer = None if caller is None else caller.f_locals.get("self")
        current = getattr(trainer, "current_param_version", None)
        if not isinstance(current, (int, np.integer)):
            end = extra.get("param_version_end")
            current = int(np.max(np.asarray(end, dtype=np.int64))) if end is not None else None
        if current is None:
            return None
        return np.maximum(int(current) - start, 0)

    def write(self, data: Any, caller: FrameType | None) -> None:
        """Write one batch (``data``: verl's DataProto) as a step of the dump."""
        self.calls += 1
        if self.failed:
            return
        try:
            batch = data.batch
            rollout, old = batch["rollout_log_probs"], batch["old_log_probs"]
            keys = batch.keys()
            if "response_mask" in keys:
                mask = batch["response_mask"]
            else:
                mask = batch["attention_mask"][:, -rollout.shape[1] :]
            extra = getattr(data, "non_tensor_batch", None) or {}
            self.writer().write(
                self.step(data, caller, self.calls),
                rollout,
                old,
                mask,
                uid=extra.get("uid"),
                policy_lag=self.policy_lag(data, caller),
            )
            self.writer().flush()  # the step is on disk when verl goes on (Ray may end the process)
        except Exception as exc:  # the dump must never stop a training run
            self.failed = True
            logger.warning("rcdiag: stopped writing the dump to %s (%s)", self.directory, exc)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


def wrap(original: Any, dump: VerlDump) -> Any:
    """``original`` (verl's ``calculate_debug_metrics``) that also writes each batch to ``dump``."""
    if getattr(original, "rcdiag_dump", None) is not None:
        return original

    @functools.wraps(original)
    def calculate_debug_metrics(data: Any, *args: Any, **kwargs: Any) -> Any:
        metrics = original(data, *args, **kwargs)
        dump.write(data, sys._getframe(1))
        return metrics

    calculate_debug_metrics.rcdiag_dump = dump  # type: ignore[attr-defined]
    return calculate_debug_metrics


def install(directory: str | None = None) -> VerlDump | None:
    """Wrap verl's ``calculate_debug_metrics`` to write the dump to ``directory`` (default:
    ``RCDIAG_VERL_DUMP``); None, and nothing changed, when neither names one. Called when verl
    loads this module."""
    directory = directory or os.environ.get(ENVIRONMENT) or None
    if directory is None:
        return None
    import verl.utils.debug.metrics as metrics

    dump = VerlDump(directory)
    metrics.calculate_debug_metrics = wrap(metrics.calculate_debug_metrics, dump)
    return dump


if os.environ.get(ENVIRONMENT):
    install()
