"""rcdiag: offline diagnostics for rollout/training log-prob mismatch, as verl's Rollout Correction
computes it.

From Python (docs/python-api.md), each command is a function returning its typed result::

    import rcdiag

    result = rcdiag.analyze("dumps/")            # or "s3://bucket/run/"
    result.steps                                  # polars DataFrame, one row per step ([polars] extra)
    result.overall["rollout_corr/ppl_ratio"], result.diagnosis.verdict

:func:`analyze`, :func:`compare_presets`, :func:`report` (and :func:`write_report`), :func:`check`,
:func:`baseline` live in :mod:`rcdiag.api`; :func:`write_dump` writes a dump from a trainer. They are
imported on first use, so ``import rcdiag`` stays fast.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rcdiag.argument_names import renamed as _renamed
from rcdiag.version import SCHEMA_VERSION, __version__

_API = ("analyze", "baseline", "check", "compare_presets", "recommend", "report", "write_report")

__all__ = [
    "SCHEMA_VERSION",
    "__version__",
    "analyze",
    "baseline",
    "check",
    "compare_presets",
    "recommend",
    "report",
    "write_dump",
    "write_report",
]

if TYPE_CHECKING:
    from rcdiag.api import (
        analyze,
        baseline,
        check,
        compare_presets,
        recommend,
        report,
        write_report,
    )
    from rcdiag.io.tensors import Padded


class _Package(types.ModuleType):
    """The ``rcdiag`` module: ``rcdiag.report`` stays the function :func:`rcdiag.api.report`
    when the package of the same name (the HTML report's modules, imported as
    ``from rcdiag.run.documents import …``) is loaded; Python's import would otherwise bind the
    package to that name."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _API and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    """The functions of :mod:`rcdiag.api`, imported on first use (numpy, pyarrow and polars are
    not imported by ``import rcdiag``)."""
    if name in _API:
        from rcdiag import api

        return getattr(api, name)
    raise AttributeError(f"module 'rcdiag' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


@_renamed(path="output")
def write_dump(
    output: str | Path,
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
        output: the parquet file to write (atomically; parent directories are created). To build a
            dump over training, write one file per step, e.g. ``dumps/step=12/part-0.parquet``.
        rollout_log_probs: log π_rollout, [B, T] torch tensor or numpy array (float32 or float64;
            the dtype is kept).
        old_log_probs: log π_train of the same tokens, [B, T].
        response_mask: [B, T] bool or integer mask; ``None`` means every position is valid.
        step: the training step, one int for the batch or one per row.
        trim_padding: drop each row's trailing masked positions (changes no metric).
        extra_columns: per-row columns to add, e.g. ``{"uid": uids}`` (length B each).
        compression: parquet codec (``snappy``, ``zstd``, ``gzip``, ``none``, …).

    Returns:
        The path written. See :func:`rcdiag.io.writer.write_dump`.
    """
    from rcdiag.io.writer import write_dump as _write_dump

    return _write_dump(
        output,
        rollout_log_probs,
        old_log_probs,
        response_mask,
        step,
        trim_padding=trim_padding,
        extra_columns=extra_columns,
        compression=compression,
    )
