"""A dump written by a trainer while it trains: one parquet shard per step and rank, written on a
background thread (docs/trainer.md).

Needs neither torch nor a GPU: it takes torch tensors (any device, any float dtype) or numpy arrays.
"""

from __future__ import annotations

import atexit
import queue
import threading
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from rcdiag.io.writer import padded_arrays, write_dump

if TYPE_CHECKING:
    from rcdiag.io.tensors import Padded

_STOP = object()


def host_copy(x: Any) -> np.ndarray:
    """A numpy array that owns a copy of ``x`` (a torch tensor on any device, or anything numpy
    takes), so that the trainer may overwrite or free ``x`` as soon as this returns. bfloat16 and
    float16 become float32 (exactly: numpy has no bfloat16), as :func:`~rcdiag.io.writer.write_dump`
    does.

    Example:
        >>> a = np.zeros(2); b = host_copy(a); a[0] = 1.0; b.tolist()
        [0.0, 0.0]
    """
    if hasattr(x, "detach"):  # torch.Tensor, without importing torch here
        t = x.detach()
        if str(t.dtype) in ("torch.bfloat16", "torch.float16"):
            return t.float().cpu().numpy()  # .float() already made a new tensor
        return t.to("cpu", copy=True).numpy()
    return np.array(x, copy=True)


class DumpWriter:
    """Writes a trainer's batches as an rcdiag dump: ``DIRECTORY/step=N/rank-R.parquet``, one file
    per :meth:`write` call, each the dump :func:`~rcdiag.io.writer.write_dump` writes of the same
    arrays (trailing padding trimmed, written atomically).

    :meth:`write` only copies the arrays to host memory (a device→host copy of the two log-prob
    tensors and the mask) and queues them; a background thread encodes and writes the parquet
    files. At most ``max_pending`` writes wait in the queue: past that, :meth:`write` blocks until
    the thread catches up, so memory stays bounded. :meth:`close` (or leaving a ``with`` block, or
    the interpreter's exit) writes everything queued. An error of the thread (a full disk) is
    raised again by the next :meth:`write`, :meth:`flush` or :meth:`close`.

    Args:
        directory: the dump's directory (created when missing).
        rank: this process's rank; each rank writes its own files, so ranks never collide.
        max_pending: how many written steps may wait for the thread.
        compression: the parquet codec (``snappy``, ``zstd``, …).

    Example:
        >>> import tempfile
        >>> with DumpWriter(tempfile.mkdtemp(), rank=1) as w:
        ...     w.write(7, np.full((2, 3), -1.0), np.full((2, 3), -1.1), np.ones((2, 3), bool))
        >>> sorted(p.relative_to(w.directory).as_posix() for p in w.written)
        ['step=7/rank-1.parquet']
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        rank: int = 0,
        max_pending: int = 4,
        compression: str = "snappy",
    ) -> None:
        if int(rank) != rank or rank < 0:
            raise ValueError(f"rank must be an integer >= 0, got {rank!r}")
        from rcdiag.argument_checks import compression_argument

        compression_argument("compression", compression)
        if max_pending < 1:
            raise ValueError(f"max_pending must be >= 1, got {max_pending!r}")
        self.directory = Path(directory)
        self.rank = int(rank)
        self.compression = compression
        self.written: list[Path] = []
        """The files written so far, in order."""
        self._steps: set[int] = set()
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_pending)
        self._error: BaseException | None = None
        self._closed = False
        self._lock = threading.Lock()
        # pyarrow looks for pandas on its first conversion; done here, not in the writer thread at
        # interpreter exit, where importing pandas (its thread pools) fails
        pa.array(np.zeros(1))
        self._thread = threading.Thread(target=self._run, name="rcdiag-dump-writer", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def path(self, step: int) -> Path:
        """The file of ``step``: ``DIRECTORY/step=N/rank-R.parquet``."""
        return self.directory / f"step={step}" / f"rank-{self.rank}.parquet"

    def write(
        self,
        step: int,
        rollout_log_probs: Padded,
        old_log_probs: Padded,
        response_mask: Padded | None = None,
        uid: Any = None,
        policy_lag: Any = None,
    ) -> None:
        """Queue one step's batch; returns once the arrays are copied to host memory.

        Args:
            step: the training step; one call per step (a second call for a step raises
                ``ValueError``: it would replace the first one's file).
            rollout_log_probs: log π_rollout, [B, T] torch tensor or numpy array (float).
            old_log_probs: log π_train of the same tokens, [B, T].
            response_mask: [B, T] bool or integer mask; ``None``: every position is valid.
            uid: each row's prompt-group id (B values), written as the dump's ``uid`` column.
            policy_lag: optimizer steps the rollout policy was behind, one int for the batch or B
                of them (the dump's ``policy_lag`` column).
        """
        self._raise_pending_error()
        if self._closed:
            raise ValueError("DumpWriter is closed")
        step = int(step)
        rollout, old, mask = padded_arrays(
            host_copy(rollout_log_probs),
            host_copy(old_log_probs),
            None if response_mask is None else host_copy(response_mask),
        )
        extra: dict[str, np.ndarray] = {}
        if uid is not None:
            extra["uid"] = host_copy(uid)
            if extra["uid"].shape[:1] != rollout.shape[:1]:
                raise ValueError(f"uid has {len(extra['uid'])} entries; expected {len(rollout)}")
        if policy_lag is not None:
            lag = host_copy(policy_lag).astype(np.int64)
            extra["policy_lag"] = np.broadcast_to(lag, rollout.shape[:1]).copy()
        with self._lock:
            if step in self._steps:
                raise ValueError(
                    f"step {step} was already written to {self.path(step)}; one call per step"
                )
            self._steps.add(step)
        self._queue.put((self.path(step), rollout, old, mask, step, extra))

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                path, rollout, old, mask, step, extra = item
                write_dump(
                    path,
                    rollout,
                    old,
                    mask,
                    step=step,
                    extra_columns=extra,
                    compression=self.compression,
                )
                self.written.append(path)
            except BaseException as exc:  # kept for the trainer's thread, which raises it
                with self._lock:
                    self._error = self._error or exc
            finally:
                self._queue.task_done()

    def _raise_pending_error(self) -> None:
        with self._lock:
            error, self._error = self._error, None
        if error is not None:
            raise RuntimeError(f"rcdiag DumpWriter could not write {self.directory}") from error

    def flush(self) -> None:
        """Wait until every queued step is written; raise the thread's error, if any."""
        if not self._closed:
            self._queue.join()
        self._raise_pending_error()

    def close(self) -> None:
        """Write everything queued and stop the thread; safe to call twice (also runs at exit)."""
        if not self._closed:
            self._closed = True
            atexit.unregister(self.close)
            self._queue.put(_STOP)
            self._thread.join()
        self._raise_pending_error()

    def __enter__(self) -> DumpWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
