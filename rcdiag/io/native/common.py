"""What every native-format reader shares: a file (or a group of files) of a trainer's own dump read
as rcdiag's record batches, the step in a file name, and loading ``.pt`` files without running
code (docs/formats.md).

A native reader turns one unit of a dump (a step's files) into :class:`Rows`: per sample, the
rollout log-probs, the trainer's log-probs and the valid positions, already aligned to each other.
:class:`NativeFile` makes the record batches the parquet reader reads from a parquet dump (columns
``rollout_log_probs``, ``old_log_probs``, ``response_mask``, ``step``, and ``uid`` and
``policy_lag`` when the format holds them), so every check and every metric after that is the
parquet path's own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from rcdiag.errors import InputError, UsageError
from rcdiag.io.files import INT64_MAX, FileColumns

ROLLOUT, TRAINING, MASK, STEP, UID, LAG = (
    "rollout_log_probs",
    "old_log_probs",
    "response_mask",
    "step",
    "uid",
    "policy_lag",
)
"""The columns a native file is read as: the parquet dump's default names (README.md)."""


@dataclass
class Rows:
    """Aligned samples of one unit of a native dump: for sample i, ``rollout[i]``, ``old[i]`` and
    ``mask[i]`` have one entry per response position.

    Attributes:
        left_out: samples not read, by reason (``"aborted"``, ``"padding"``, …).
    """

    rollout: list[np.ndarray] = field(default_factory=list)
    old: list[np.ndarray] = field(default_factory=list)
    mask: list[np.ndarray] = field(default_factory=list)
    uid: list[Any] | None = None
    lag: list[int] | None = None
    left_out: dict[str, int] = field(default_factory=dict)

    def leave_out(self, reason: str, count: int = 1) -> None:
        self.left_out[reason] = self.left_out.get(reason, 0) + count

    def __len__(self) -> int:
        return len(self.rollout)


def _float_values(parts: Sequence[np.ndarray]) -> np.ndarray:
    """The concatenated values, float32 when every part is float32 (as written), else float64."""
    if not parts:
        return np.zeros(0, dtype=np.float64)
    dtype = np.float32 if all(p.dtype == np.float32 for p in parts) else np.float64
    return np.concatenate([p.astype(dtype, copy=False) for p in parts])


def _list_array(values: np.ndarray, offsets: np.ndarray) -> pa.Array:
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(values))


def record_batch(rows: Rows, step: int) -> pa.RecordBatch:
    """The rows as one record batch of the parquet dump's columns."""
    lengths = np.fromiter((len(r) for r in rows.rollout), dtype=np.int64, count=len(rows))
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > np.iinfo(np.int32).max:
        raise InputError("a step holds more than 2^31 tokens; split it")
    columns: dict[str, pa.Array] = {
        ROLLOUT: _list_array(_float_values(rows.rollout), offsets),
        TRAINING: _list_array(_float_values(rows.old), offsets),
        MASK: _list_array(
            np.concatenate(rows.mask).astype(bool) if rows.mask else np.zeros(0, bool), offsets
        ),
        STEP: pa.array(np.full(len(rows), step, dtype=np.int64)),
    }
    if rows.uid is not None:
        columns[UID] = pa.array([str(u) for u in rows.uid], type=pa.string())
    if rows.lag is not None:
        columns[LAG] = pa.array(np.asarray(rows.lag, dtype=np.int64))
    return pa.RecordBatch.from_pydict(columns)


def step_of(path: Path, pattern: str, what: str) -> int:
    """The step a file name holds: the first group of ``pattern`` matched against the name.

    Example:
        >>> step_of(Path("train_data_step12.jsonl"), r"train_data_step(\\d+)\\.jsonl", "NeMo-RL")
        12
    """
    match = re.fullmatch(pattern, path.name)
    if match is None or int(match[1]) > INT64_MAX:
        raise InputError(
            f"{path}: a {what} file is named like {pattern.replace(chr(92), '')!r}; this name "
            "does not give the step"
        )
    return int(match[1])


Shape = tuple[int, bool, bool, float]
"""A unit's rows, whether it has uids, whether it has policy lags, and its mean row length."""


class NativeFile:
    """One unit of a native dump read as the parquet reader reads a parquet file.

    Args:
        path: the unit's main file (errors and results name it; the Ray engine re-opens it).
        format: the format's name (``slime`` …).
        step: the training step, from the file name.
        chunks: ``chunks(rows)`` reads the unit as :class:`Rows` of about ``rows`` rows each (a
            ``.pt`` file is read whole, in one chunk; a JSONL file line by line).
        files: every file the unit reads (never written over by an output).
        shape: the unit's :data:`Shape` when it is known without reading the rows (else it is
            known once the unit is read: a unit read in one chunk is then read once).
        estimate: a cheap count of the unit's rows before it is read, for progress only
            (:attr:`estimated_rows`); :attr:`rows` is exact, and reads the unit when asked first.
    """

    def __init__(
        self,
        path: Path,
        format: str,
        step: int,
        chunks: Callable[[int], Iterator[Rows]],
        files: Sequence[Path] = (),
        shape: Callable[[], Shape] | None = None,
        estimate: Callable[[], int] | None = None,
    ) -> None:
        self.path = path
        self.format = format
        self.step = step
        self.files = tuple(files) or (path,)
        self._chunks = chunks
        self._shape_of = shape
        self._estimate = estimate
        self._shape: Shape | None = None
        self.left_out: dict[str, int] = {}

    def _read(self, batch_size: int) -> Iterator[Rows]:
        self.left_out = {}
        for rows in self._chunks(batch_size):
            for reason, count in rows.left_out.items():
                self.left_out[reason] = self.left_out.get(reason, 0) + count
            yield rows

    @staticmethod
    def _shape_of_rows(rows: Rows) -> Shape:
        count = len(rows)
        tokens = sum(len(r) for r in rows.rollout)
        return (
            count,
            rows.uid is not None and count > 0,
            rows.lag is not None and count > 0,
            (tokens / max(1, count)),
        )

    def _known(self) -> Shape:
        if self._shape is None:
            if self._shape_of is not None:
                self._shape = self._shape_of()
            else:  # a unit read in one chunk: read it once for its counts
                for rows in self._read(1 << 30):
                    self._shape = self._shape_of_rows(rows)
                if self._shape is None:
                    self._shape = (0, False, False, 0.0)
        return self._shape

    @property
    def rows(self) -> int:
        return self._known()[0]

    @property
    def estimated_rows(self) -> int:
        """The rows, or before the unit is read a cheap estimate of them (progress only)."""
        if self._shape is None and self._estimate is not None:
            return self._estimate()
        return self.rows

    def mean_row_length(self) -> float:
        return 512.0 if self._shape is None and self._shape_of is None else self._known()[3]

    @property
    def columns(self) -> FileColumns:
        _, has_uid, has_lag, _ = self._known()
        return FileColumns(
            rollout=ROLLOUT,
            training=TRAINING,
            mask=MASK,
            step=STEP,
            hive_step=None,
            uid=UID if has_uid else None,
            lag=LAG if has_lag else None,
        )

    def record_batches(
        self, batch_size: int, columns: Sequence[str] | None = None
    ) -> Iterator[pa.RecordBatch]:
        """The unit's rows as record batches of at most ``batch_size`` rows (``columns``: only
        these). :attr:`columns` is known once the first batch is yielded."""
        expected = self._shape
        if expected is None and self._shape_of is not None:
            expected = self._known()
        read = 0
        for rows in self._read(batch_size):
            if expected is None:  # a unit read in one chunk, not counted before: known now
                self._shape = self._shape_of_rows(rows)
            assert self._shape is not None
            _, has_uid, has_lag, _ = self._shape
            if (rows.uid is not None, rows.lag is not None) != (has_uid, has_lag) and len(rows):
                raise InputError(
                    f"{self.path}: some rows have a prompt group or a policy lag and others "
                    "do not; rcdiag reads both for every row or for none"
                )
            if not has_uid:
                rows.uid = None
            if not has_lag:
                rows.lag = None
            batch = record_batch(rows, self.step)
            read += batch.num_rows
            if columns is not None:
                batch = batch.select([c for c in columns if c in batch.schema.names])
            for start in range(0, batch.num_rows, max(1, batch_size)):
                yield batch.slice(start, batch_size)
        if self._shape is None:
            self._shape = (0, False, False, 0.0)
        if read != self._shape[0]:
            raise InputError(f"{self.path}: the file changed while it was read")


TORCH_EXTRA = "pip install 'rcdiag[torch]'"


def import_torch(path: Path) -> Any:
    """torch, or a one-line error naming the extra."""
    try:
        import torch  # noqa: TID251  (lazily: only a .pt or bfloat16 input needs it)
    except ImportError:
        raise UsageError(
            f"{path}: reading a .pt file needs torch: {TORCH_EXTRA} (or convert the dump where "
            "torch is installed: rcdiag convert)"
        ) from None
    return torch


def _numpy_globals() -> list[Any]:
    """What unpickling a numeric numpy array or scalar needs (Miles stores some per-sample columns
    as numpy arrays): array and scalar constructors and dtypes, no code. An object array would need
    more, and is refused."""
    core = getattr(np, "_core", None) or np.core
    names = [core.multiarray._reconstruct, core.multiarray.scalar, np.ndarray, np.dtype]
    dtypes = getattr(np, "dtypes", None)
    if dtypes is not None:
        names += [
            getattr(dtypes, n)
            for n in dir(dtypes)
            if n.endswith("DType") and n not in ("ObjectDType", "VoidDType", "StringDType")
        ]
    return names


def load_pt(path: Path, trust_pickle: bool = False, mmap: bool = False) -> Any:
    """A ``.pt`` file loaded on the CPU with ``torch.load(weights_only=True)``: tensors, plain
    containers and scalars only, no code run. ``trust_pickle`` allows the full unpickler for a file
    that holds other objects (it can run code: only for files you trust). ``mmap``: tensors are
    mapped, not read (to count samples without reading their values)."""
    torch = import_torch(path)
    try:
        with torch.serialization.safe_globals(_numpy_globals()):
            return torch.load(path, weights_only=True, map_location="cpu", mmap=mmap)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except Exception as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        unsafe = "weights_only" in str(exc) or "Unsupported global" in str(exc)
        if not unsafe:
            raise InputError(f"{path}: not a readable torch file ({reason})") from None
        if not trust_pickle:
            raise InputError(
                f"{path}: holds objects torch.load(weights_only=True) refuses ({reason}); reading "
                "them runs the file's pickle code: pass --trust-pickle only "
                "for a file you trust"
            ) from None
    try:
        return torch.load(path, weights_only=False, map_location="cpu")
    except Exception as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"{path}: not a readable torch file ({reason})") from None


def as_array(value: Any, where: str, key: str, dtype: Any = None) -> np.ndarray:
    """A 1-D numpy array of a tensor (bfloat16 and float16 as float32) or a list; ``where`` and
    ``key`` name it in the error."""
    try:
        if hasattr(value, "detach"):  # a torch tensor
            tensor = value.detach().cpu()
            if str(tensor.dtype) in ("torch.bfloat16", "torch.float16"):
                tensor = tensor.float()
            array = tensor.numpy()
        else:
            array = np.asarray(value)
        if dtype is not None:
            array = array.astype(dtype, copy=False)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise InputError(f"{where}: {key!r} is not a list of numbers ({exc})") from None
    if array.ndim != 1:
        raise InputError(
            f"{where}: {key!r} has shape {tuple(array.shape)}; expected one value "
            "per response token"
        )
    if array.dtype.kind not in "fiub":
        raise InputError(f"{where}: {key!r} holds {array.dtype} values; expected numbers")
    return array


def log_probs(value: Any, where: str, key: str) -> np.ndarray:
    """A per-token log-prob array (float32 kept as float32, anything else as float64)."""
    array = as_array(value, where, key)
    return array if array.dtype == np.float32 else array.astype(np.float64)


def same_length(where: str, expected: int, **arrays: np.ndarray) -> None:
    """Every array has ``expected`` entries, or an error naming the first that has not."""
    for key, array in arrays.items():
        if len(array) != expected:
            raise InputError(
                f"{where}: {key!r} has {len(array)} entries; expected {expected} (one per "
                "response token)"
            )
