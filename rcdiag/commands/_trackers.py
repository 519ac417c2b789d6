"""The tracker flags of the commands that analyse a dump (``--tensorboard``, ``--mlflow``,
``--wandb``; docs/trackers.md), and logging a result to them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import typer

from rcdiag.io.paths import printable

TensorboardOption = Annotated[
    str | None,
    typer.Option(
        "--tensorboard",
        metavar="DIR",
        help="Also write the per-step metrics as TensorBoard scalars (rcdiag/…) to DIR/rcdiag/: "
        "point it at the run's log directory to see them beside its curves "
        "(pip install 'rcdiag[tensorboard]').",
    ),
]
MlflowOption = Annotated[
    str | None,
    typer.Option(
        "--mlflow",
        metavar="RUN_ID",
        help="Also log the per-step metrics to this existing MLflow run, at the dump's steps "
        "(MLFLOW_TRACKING_URI; pip install 'rcdiag[mlflow]').",
    ),
]
WandbOption = Annotated[
    bool,
    typer.Option(
        "--wandb",
        help="Also log the per-step metrics to a W&B run against rcdiag/step (WANDB_RUN_ID "
        "resumes one; WANDB_MODE=offline; pip install 'rcdiag[wandb]').",
    ),
]


@dataclass(frozen=True)
class Trackers:
    """The trackers a command was asked to log to."""

    tensorboard: str | None = None
    mlflow: str | None = None
    wandb: bool = False

    @property
    def asked(self) -> bool:
        """Whether any tracker was asked for (else nothing of the trackers is imported)."""
        return self.tensorboard is not None or self.mlflow is not None or self.wandb

    def check(self) -> None:
        """Fail before the pass when a tracker's library is missing or the MLflow run is not
        found (one ``Error:`` line)."""
        if not self.asked:
            return
        from rcdiag.trackers.extras import needed
        from rcdiag.trackers.mlflow import open_run

        for asked, module in (
            (self.tensorboard, "tensorboardX"),
            (self.mlflow, "mlflow"),
            (self.wandb, "wandb"),
        ):
            if asked:
                needed(module)
        if self.mlflow is not None:
            open_run(self.mlflow)

    def publish(self, result: Any) -> list[str]:
        """Log ``result`` to every tracker asked for; what was written, one line each."""
        if not self.asked:
            return []
        from rcdiag.trackers import to_mlflow, to_tensorboard, to_wandb

        done = []
        if self.tensorboard is not None:
            done.append(f"wrote {printable(str(to_tensorboard(result, self.tensorboard)))}")
        if self.mlflow is not None:
            count = to_mlflow(result, self.mlflow)
            done.append(f"logged {count:,} values to MLflow run {printable(self.mlflow)}")
        if self.wandb:
            done.append(f"logged to W&B run {printable(to_wandb(result))}")
        return done

    def streams(self) -> list[Any]:
        """A stream per tracker asked for, each logging only what it has not logged yet
        (``rcdiag watch``); call :meth:`check` first. Each has ``add(result)`` and ``close()``."""
        from rcdiag.trackers.mlflow import MlflowStream
        from rcdiag.trackers.tensorboard import TensorboardStream
        from rcdiag.trackers.wandb import WandbStream

        out: list[Any] = []
        if self.tensorboard is not None:
            out.append(TensorboardStream(self.tensorboard))
        if self.mlflow is not None:
            out.append(MlflowStream(self.mlflow))
        if self.wandb:
            out.append(WandbStream())
        return out
