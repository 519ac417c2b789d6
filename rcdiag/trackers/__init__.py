"""rcdiag's per-step metrics where a run's curves already are: TensorBoard, MLflow and W&B
(docs/trackers.md).

:func:`scalars.step_scalars` turns a result into one mapping of scalars per training step, under an
``rcdiag/`` prefix: verl's metrics (``rcdiag/rollout_corr/k3_kl``), rcdiag's own
(``rcdiag/abs_log_ratio_mean``), other frameworks' with ``frameworks=`` (``rcdiag/trl/…``), each
step's status on the published ranges and the dump's verdict as numbers (0 healthy, 1 watch,
2 act). :func:`to_tensorboard`, :func:`to_mlflow` and :func:`to_wandb` log them on the run's own
step axis; each needs its extra (``rcdiag[tensorboard]``, ``rcdiag[mlflow]``, ``rcdiag[wandb]``)
and says so in one line when it is missing.
"""

from __future__ import annotations

from rcdiag.trackers.mlflow import to_mlflow
from rcdiag.trackers.scalars import StepScalars, step_scalars
from rcdiag.trackers.tensorboard import to_tensorboard
from rcdiag.trackers.wandb import to_wandb

__all__ = ["StepScalars", "step_scalars", "to_mlflow", "to_tensorboard", "to_wandb"]
