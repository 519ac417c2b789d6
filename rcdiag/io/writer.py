"""Writing dumps and result files atomically."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rcdiag.metrics.ragged import trimmed_lengths
from rcdiag.process import signals_deferred

if TYPE_CHECKING:
    from rcdiag.io.tensors import Padded

ROW_GROUP_TOKENS = 1 << 20
"""Rows are grouped so that a row group holds about this many tokens, which keeps reads streamable."""


RUN_STARTED = time.time()
"""When this process started writing (module import): older unlocked temporary files are stale."""


def _naming_target(exc: OSError, target: Path) -> OSError:
    """The same error, about ``target`` (not the temporary file, nor no file at all)."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return OSError(exc.errno, reason, str(target)) if exc.errno else OSError(reason, str(target))


def _lock(fd: int) -> bool:
    """Take an exclusive lock on an open file without waiting; False when another process holds it."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: rely on the age test alone
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


TEMPORARY_EXTRA = len("..12345678.tmp")
"""Bytes a temporary file's name adds to its target's name."""
NAME_MAX = 255
"""The longest file name most file systems take, in bytes."""


def _temporary_stem(name: str) -> str:
    """What a temporary file for the file ``name`` is named after: the name itself, or, when
    the temporary name would be too long (a name of 242-255 bytes), its start and a hash of it."""
    if len(os.fsencode(name)) + TEMPORARY_EXTRA <= NAME_MAX:
        return name
    import hashlib

    digest = hashlib.sha256(os.fsencode(name)).hexdigest()[:16]
    return f"{os.fsencode(name)[:100].decode('utf-8', 'ignore')}~{digest}"


def remove_stale_temporary_files(target: Path) -> list[Path]:
    """Remove what killed runs left beside ``target``: files named like this module's temporary
    files for that target (``.NAME.XXXXXXXX.tmp``), regular, last modified before this process
    started and locked by no process (a writer holds a lock on its temporary file until it renames
    it). Anything else is left alone. Returns the removed paths.
    """
    stem = _temporary_stem(target.name)
    pattern = re.compile(rf"\.{re.escape(stem)}\.[a-z0-9_]{{8}}\.tmp")
    removed: list[Path] = []
    try:
        candidates = [p for p in target.parent.iterdir() if pattern.fullmatch(p.name)]
    except OSError:
        return removed
    for candidate in candidates:
        with contextlib.suppress(OSError):
            info = candidate.lstat()
            if not stat.S_ISREG(info.st_mode) or info.st_mtime >= RUN_STARTED:
                continue
            fd = os.open(candidate, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            try:
                if _lock(fd):
                    candidate.unlink()
                    removed.append(candidate)
            finally:
                os.close(fd)
    return removed


def _is_stream(path: Path) -> bool:
    """A FIFO or a character device (``/dev/null``, a terminal): written in place, not replaced."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


@contextlib.contextmanager
def _write_in_place(target: Path, mode: str) -> Iterator[IO[Any]]:
    try:  # O_NONBLOCK: a FIFO nobody reads is an error (ENXIO) instead of a hang
        fd = os.open(target, os.O_WRONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OSError(exc.errno, "a FIFO that no process reads", str(target)) from None
        raise
    os.set_blocking(fd, True)
    with open(fd, mode, **_text_options(mode)) as handle:
        yield handle


def _text_options(mode: str) -> dict[str, Any]:
    return {} if "b" in mode else {"encoding": "utf-8", "errors": "backslashreplace"}


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path``; on success it replaces ``path`` in one rename.

    Readers never see a half-written file and a failure leaves any existing ``path`` untouched.
    Missing parent directories are created. Text is UTF-8 (an undecodable file-name byte that
    reaches it is written as a backslash escape). A FIFO or a character device (``/dev/null``) is
    written in place. Every error names ``path``, never the temporary file; temporary files that
    killed runs left for the same ``path`` are removed (:func:`remove_stale_temporary_files`).
    """
    target = Path(path)
    if str(path).endswith(("/", os.sep)) or target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory; give a file name", str(path))
    try:
        if _is_stream(target):
            with _write_in_place(target, mode) as handle:
                yield handle
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporary_files(target)
    except OSError as exc:
        raise _naming_target(exc, target) from exc
    tmp: str | None = None
    try:
        with signals_deferred():  # a Ctrl-C or SIGTERM never falls between creating and naming
            fd, tmp = tempfile.mkstemp(
                prefix=f".{_temporary_stem(target.name)}.", suffix=".tmp", dir=target.parent
            )
        _lock(fd)
        handle = os.fdopen(fd, mode, **_text_options(mode))
    except BaseException as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if isinstance(exc, OSError):
            raise _naming_target(exc, target) from exc
        raise
    assert tmp is not None
    try:
        try:
            yield handle
            handle.flush()
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(
                tmp, 0o666 & ~umask
            )  # mkstemp creates 0600; give the file ordinary permissions
            os.replace(tmp, target)  # still locked: the name is never unlocked while it exists
        finally:
            handle.close()
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise _naming_target(exc, target) from exc
        raise


def _as_numpy(x: Any) -> np.ndarray:
    """A numpy view of a numpy array, torch tensor (any device) or nested sequence."""
    if hasattr(x, "detach"):  # torch.Tensor, without importing torch here
        x = x.detach().cpu()
        if str(x.dtype) in ("torch.bfloat16", "torch.float16"):  # numpy has no bfloat16
            x = x.float()
        x = x.numpy()
    return np.asarray(x)


def _argument_array(name: str, value: Any) -> np.ndarray:
    """``value`` as a numpy array; what numpy cannot take (ragged lists) names the argument."""
    try:
        return _as_numpy(value)
    except (ValueError, TypeError) as exc:
        reason = str(exc).split(". ")[0]
        raise ValueError(f"{name}: not a rectangular array of numbers ({reason})") from None


def _step_column(step: np.ndarray, rows: int) -> np.ndarray:
    """``step`` (one integer, or one per row) as an int64 column of ``rows`` entries."""
    if step.dtype == np.bool_ or not np.issubdtype(step.dtype, np.integer):
        raise TypeError(f"step must be an integer or one integer per row, got dtype {step.dtype}")
    if step.ndim > 1 or (step.ndim == 1 and step.size != rows):
        raise ValueError(f"step has shape {step.shape}; expected one integer or {rows} of them")
    return np.broadcast_to(step.astype(np.int64), (rows,))


def padded_arrays(
    rollout: np.ndarray, old: np.ndarray, mask: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Check padded [B, T] log-probs and mask; returns them with the mask as bool (``None``: every
    position valid).

    Raises:
        ValueError: not two [B, T] float arrays, or a mask of another shape.
    """
    if rollout.ndim != 2 or rollout.shape != old.shape:
        raise ValueError(
            f"rollout_log_probs {rollout.shape} and old_log_probs {old.shape} must both be [B, T]"
        )
    if not (np.issubdtype(rollout.dtype, np.floating) and np.issubdtype(old.dtype, np.floating)):
        raise ValueError("log-probs must be floating point")
    if mask is None:
        return rollout, old, np.ones(rollout.shape, dtype=bool)
    if mask.shape != rollout.shape:
        raise ValueError(f"response_mask {mask.shape} must match the log-probs {rollout.shape}")
    if mask.dtype == np.bool_:
        return rollout, old, mask
    if not np.issubdtype(mask.dtype, np.number):
        raise TypeError(f"response_mask has dtype {mask.dtype}; expected bool or integer")
    if not np.issubdtype(mask.dtype, np.integer):
        # the command line reads bool or integer masks only; a float mask is taken only when it
        # is exactly 0/1 (a NaN would otherwise count as valid: NaN != 0)
        bad = (mask != 0) & (mask != 1)
        if bad.any():
            row, position = (int(i[0]) for i in np.nonzero(bad))
            raise ValueError(
                f"response_mask is {mask.dtype} and holds {float(mask[row, position])} at row {row}, "
                f"position {position}; expected a bool or integer mask (0/1)"
            )
    return rollout, old, mask != 0


def _list_column(padded: np.ndarray, lengths: np.ndarray) -> pa.Array:
    flat = padded[np.arange(padded.shape[1])[None, :] < lengths[:, None]]
    offsets = np.zeros(lengths.size + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat))


_CORE_ARGUMENT = {
    "rollout_log_probs": "rollout_log_probs",
    "old_log_probs": "old_log_probs",
    "response_mask": "response_mask",
    "step": "step",
}
"""The columns :func:`write_dump` writes itself, and the argument each comes from."""


def write_dump(
    path: str | Path,
    rollout_log_probs: Padded,
    old_log_probs: Padded,
    response_mask: Padded | None = None,
    step: int | Any = 0,
    *,
    trim_padding: bool = True,
    extra_columns: Mapping[str, Any] | None = None,
    compression: str = "snappy",
) -> Path:
    """Write one batch of padded [B, T] log-probs as an rcdiag dump (one row per response).

    Args:
        path: the parquet file to write (atomically; parent directories are created). To build a
            dump over training, write one file per step, e.g. ``dumps/step=12/part-0.parquet``.
        rollout_log_probs: log π_rollout, [B, T] torch tensor or numpy array (float32 or float64;
            the dtype is kept).
        old_log_probs: log π_train of the same tokens, [B, T].
        response_mask: [B, T] bool or integer mask; ``None`` means every position is valid.
        step: the training step, one int for the batch or one per row.
        trim_padding: drop each row's trailing masked positions (values under the mask are never
            read, so this changes no metric and makes the file smaller).
        extra_columns: per-row columns to add, e.g. ``{"uid": uids}`` (length B each).
        compression: parquet codec (``snappy``, ``zstd``, ``gzip``, ``none``, …); ``zstd`` makes
            smaller files.

    Returns:
        The path written.

    Example:
        >>> import numpy as np, tempfile, pyarrow.parquet as pq
        >>> out = write_dump(tempfile.mkdtemp() + "/d.parquet", np.zeros((2, 3)), np.zeros((2, 3)),
        ...                  np.array([[1, 1, 0], [1, 0, 0]]), step=5)
        >>> pq.read_table(out).column("old_log_probs").to_pylist()
        [[0.0, 0.0], [0.0]]
    """
    from rcdiag.argument_checks import check_dump_writing

    check_dump_writing(locals())
    rollout, old, mask = padded_arrays(
        _argument_array("rollout_log_probs", rollout_log_probs),
        _argument_array("old_log_probs", old_log_probs),
        None if response_mask is None else _argument_array("response_mask", response_mask),
    )
    rows, width = rollout.shape
    lengths = trimmed_lengths(mask) if trim_padding else np.full(rows, width)
    steps = _step_column(_argument_array("step", step), rows)
    columns: dict[str, Any] = {
        "rollout_log_probs": _list_column(rollout, lengths),
        "old_log_probs": _list_column(old, lengths),
        "response_mask": _list_column(mask, lengths),
        "step": pa.array(steps),
    }
    for name, values in (extra_columns or {}).items():
        if name in columns:
            raise ValueError(
                f"extra_columns: {name!r} is a column write_dump writes itself (from "
                f"{_CORE_ARGUMENT[name]}); give it there, or name the extra column otherwise"
            )
        array = _as_numpy(values)
        if len(array) != rows:
            raise ValueError(f"extra column {name!r} has {len(array)} entries; expected {rows}")
        columns[name] = pa.array(list(array) if array.ndim > 1 else array)
    table = pa.table(columns)
    tokens_per_row = max(1.0, float(lengths.mean()) if rows else 1.0)
    with atomic_write(path, "wb") as handle:
        pq.write_table(
            table,
            handle,
            row_group_size=max(1, int(ROW_GROUP_TOKENS / tokens_per_row)),
            compression=compression,
            # log-probs are nearly all distinct: a dictionary of them only makes the file larger
            use_dictionary=[n for n in columns if n not in ("rollout_log_probs", "old_log_probs")],
        )
    return Path(path)
