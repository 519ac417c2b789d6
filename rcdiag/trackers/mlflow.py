"""rcdiag's per-step scalars logged to an existing MLflow run, at explicit steps (the ``mlflow``
extra; the tracking server is MLflow's own setting, ``MLFLOW_TRACKING_URI``)."""

from __future__ import annotations

import re
import time
from typing import Any

from rcdiag.errors import UsageError
from rcdiag.trackers.extras import needed
from rcdiag.trackers.scalars import NewPoints, StepScalars, flat, step_scalars

BATCH = 1000
"""Metrics per ``log_batch`` call (MLflow's limit)."""
_UNSAFE = re.compile(r"[^\w\-. /]")


def key(name: str) -> str:
    """A tag as an MLflow metric key (MLflow allows letters, digits, ``_ - . /`` and spaces).

    Example:
        >>> key("rcdiag/trl/mean|Δ|")
        'rcdiag/trl/mean_Δ_'
    """
    return _UNSAFE.sub("_", name)


def open_run(run_id: str) -> Any:
    """An MLflow client, once the run ``run_id`` is found (MLflow's tracking settings).

    Raises:
        UsageError: mlflow is not installed, or no run ``run_id`` is found.
    """
    needed("mlflow")
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    try:
        client.get_run(run_id)
    except MlflowException as exc:
        first = str(exc.message).splitlines()[0] if exc.message else type(exc).__name__
        raise UsageError(f"--mlflow {run_id}: {first}") from None
    return client


def _log(client: Any, run_id: str, series: list[StepScalars]) -> int:
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    metrics = [Metric(key(t), v, now, step) for step, t, v in flat(series)]
    for start in range(0, len(metrics), BATCH):
        client.log_batch(run_id, metrics=metrics[start : start + BATCH], synchronous=True)
    return len(metrics)


def to_mlflow(result: Any, run_id: str) -> int:
    """Log the per-step scalars of ``result`` to the MLflow run ``run_id`` (which must exist; it
    is left running or finished as it was), each at its step.

    Returns:
        How many values were logged.

    Raises:
        UsageError: mlflow is not installed, or no run ``run_id`` is found.
    """
    return _log(open_run(run_id), run_id, step_scalars(result))


class MlflowStream:
    """An MLflow run kept current with a growing dump (``rcdiag watch --mlflow RUN_ID``): each call
    of :meth:`add` logs the points not logged yet (:class:`~rcdiag.trackers.scalars.NewPoints`:
    each step once, the verdict when it changes)."""

    def __init__(self, run_id: str) -> None:
        self.client, self.run_id, self.new = open_run(run_id), run_id, NewPoints()

    def add(self, result: Any) -> int:
        """Log the new points of ``result``; returns how many values were logged."""
        return _log(self.client, self.run_id, self.new.of(step_scalars(result)))

    def close(self) -> None:
        """Nothing to close: the run is left running or finished as it was."""
