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
from rcdiag.trackers.scalars import NewPoints, StepScalars, step_scalars

STEP_METRIC = "rcdiag/step"
"""The step axis of rcdiag's curves in W&B."""


def _open(wandb: Any) -> Any:
    try:
        run = wandb.init(resume="allow", job_type="rcdiag")
    except Exception as exc:  # wandb raises its own errors, and some of the network's
        raise UsageError(f"--wandb: W&B cannot open the run ({exc})") from None
    return run


def _define(run: Any) -> None:
    """rcdiag's curves against its own step metric (W&B cannot log at a step that has passed)."""
    run.define_metric(STEP_METRIC)
    run.define_metric("rcdiag/*", step_metric=STEP_METRIC)


def _log(run: Any, series: list[StepScalars]) -> None:
    for entry in series:
        run.log({**entry.values, STEP_METRIC: entry.step})


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
        run = _open(wandb)
    try:
        _define(run)
        _log(run, series)
        return str(run.id)
    finally:
        if own:
            run.finish()


class WandbStream:
    """A W&B run kept current with a growing dump (``rcdiag watch --wandb``): opened once from
    W&B's settings, each call of :meth:`add` logs the points not logged yet
    (:class:`~rcdiag.trackers.scalars.NewPoints`), :meth:`close` finishes the run."""

    def __init__(self) -> None:
        self.run, self.new = _open(needed("wandb")), NewPoints()
        _define(self.run)

    @property
    def id(self) -> str:
        return str(self.run.id)

    def add(self, result: Any) -> int:
        """Log the new points of ``result``; returns how many steps had points."""
        points = self.new.of(step_scalars(result))
        _log(self.run, points)
        return len(points)

    def close(self) -> None:
        self.run.finish()
