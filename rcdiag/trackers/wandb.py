"""rcdiag's per-step scalars logged to a W&B run (the ``wandb`` extra).

W&B cannot write to a step of a run that has passed, so rcdiag logs against its own step metric,
``rcdiag/step`` (the dump's training step), with ``define_metric``: the curves sit on the run's
steps whatever the run's own step counter is. Which run is W&B's own setting: ``WANDB_RUN_ID``
(with ``WANDB_PROJECT``, ``WANDB_ENTITY``) resumes a run, none starts one, ``WANDB_MODE=offline``
writes it locally for ``wandb sync``.
"""

from __future__ import annotations

from typing import Any

from rcdiag.errors import UsageError
from rcdiag.trackers.extras import needed
from rcdiag.trackers.scalars import step_scalars

STEP_METRIC = "rcdiag/step"
"""The step axis of rcdiag's curves in W&B."""


def to_wandb(result: Any, run: Any = None) -> str:
    """Log the per-step scalars of ``result`` to ``run`` (a ``wandb`` run), or to the run
    ``wandb.init(resume="allow")`` opens from W&B's settings, finished afterwards.

    Returns:
        The run's id.

    Raises:
        UsageError: wandb is not installed, or W&B cannot open the run.
    """
    wandb = needed("wandb")
    series = step_scalars(result)
    own = run is None
    if own:
        try:
            run = wandb.init(resume="allow", job_type="rcdiag")
        except Exception as exc:  # wandb raises its own errors, and some of the network's
            raise UsageError(f"--wandb: W&B cannot open the run ({exc})") from None
    try:
        run.define_metric(STEP_METRIC)
        run.define_metric("rcdiag/*", step_metric=STEP_METRIC)
        for entry in series:
            run.log({**entry.values, STEP_METRIC: entry.step})
        return str(run.id)
    finally:
        if own:
            run.finish()
