"""rcdiag's per-step scalars as a TensorBoard event file, written by tensorboardX (no TensorFlow,
no torch needed; the ``tensorboard`` extra)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from rcdiag.errors import UsageError
from rcdiag.trackers.extras import needed
from rcdiag.trackers.scalars import NewPoints, step_scalars

RUN_NAME = "rcdiag"
"""The sub-directory of the run's log directory rcdiag writes to: TensorBoard shows it as a run
beside the trainer's, on the same step axis, and the trainer's own event files stay untouched."""
EVENT_FILE = "events.out.tfevents.rcdiag"
"""The event file rcdiag writes (replaced whole at each write: one point per tag and step)."""


def to_tensorboard(result: Any, directory: str | os.PathLike[str]) -> Path:
    """Write the per-step scalars of ``result`` (:func:`rcdiag.trackers.step_scalars`) to
    ``directory/rcdiag/events.out.tfevents.rcdiag``, atomically: one event per step, each scalar
    at the step the dump gives it.

    Returns:
        The event file written.

    Raises:
        UsageError: tensorboardX is not installed, or ``directory`` cannot be written.
    """
    tensorboardx = needed("tensorboardX")
    from tensorboardX.proto.summary_pb2 import Summary

    series = step_scalars(result)
    target = Path(os.fspath(directory)) / RUN_NAME
    try:
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target, prefix=".writing-") as scratch:
            writer = tensorboardx.FileWriter(scratch, max_queue=1000, flush_secs=3600)
            for entry in series:
                values = [Summary.Value(tag=t, simple_value=v) for t, v in entry.values.items()]
                writer.add_summary(Summary(value=values), global_step=entry.step)
            writer.close()
            (written,) = Path(scratch).glob("events.out.tfevents.*")
            final = target / EVENT_FILE
            os.replace(written, final)
    except OSError as exc:
        raise UsageError(
            f"--tensorboard {directory}: cannot write ({exc.strerror or exc})"
        ) from None
    return final


class TensorboardStream:
    """An event file that grows with a run (``rcdiag watch --tensorboard``): each call of
    :meth:`add` appends the points not written yet (:class:`~rcdiag.trackers.scalars.NewPoints`:
    each step once, the verdict when it changes) and flushes, so a running TensorBoard shows them
    at its next reload."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        tensorboardx = needed("tensorboardX")
        target = Path(os.fspath(directory)) / RUN_NAME
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(
                f"--tensorboard {directory}: cannot write ({exc.strerror or exc})"
            ) from None
        self.writer = tensorboardx.FileWriter(str(target), filename_suffix=".rcdiag-watch")
        self.new = NewPoints()

    def add(self, result: Any) -> int:
        """Append the new points of ``result``; returns how many steps had points."""
        from tensorboardX.proto.summary_pb2 import Summary

        points = self.new.of(step_scalars(result))
        for entry in points:
            values = [Summary.Value(tag=t, simple_value=v) for t, v in entry.values.items()]
            self.writer.add_summary(Summary(value=values), global_step=entry.step)
        self.writer.flush()
        return len(points)

    def close(self) -> None:
        self.writer.close()
