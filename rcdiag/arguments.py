"""The arguments every function of :mod:`rcdiag.api` shares: where the dump is and how to read it
(they mirror the flags every dump-reading command has)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from rcdiag.dialects import DIALECTS, Dialect
from rcdiag.errors import UsageError
from rcdiag.io.files import ColumnNames, StepSelection
from rcdiag.io.native import InputFormat
from rcdiag.pipeline import DumpSpec

PathLike = str | os.PathLike[str]
Paths = PathLike | Sequence[PathLike]
"""A dump: a parquet file, a directory (of ``step=N/`` shards), a glob or a URL, or several."""
Progress = Callable[[int, int], None]
"""Called as ``progress(rows_read, total_rows)`` after each batch."""

DUMP_ARGUMENTS = """\
        step: analyse only this step, or these steps (``--step``).
        steps: analyse only the steps ``"A:B"`` (inclusive; either end may be empty) or
            ``(A, B)`` (``--steps``).
        rollout_col, training_col, mask_col, step_col: column names, when not the defaults
            (``--rollout-col`` …; README.md, "The dump").
        drop_nonfinite: mask NaN/±inf at valid positions (and count them) instead of failing.
        storage_options: keyword arguments of the file system of ``s3://``, ``gs://``, ``hf://``
            and ``http(s)://`` paths (``--storage-option KEY=VALUE``), e.g.
            ``{"endpoint_url": "http://127.0.0.1:9000"}``.
        engine: ``"local"`` (this process) or ``"ray"`` (the dump's files read across a Ray
            cluster with the same results, ``--engine``; docs/scale.md).
        ray_address: the Ray cluster for ``engine="ray"`` (None: ``RAY_ADDRESS``, else a local
            Ray started for the call; ``--ray-address``).
        progress: called as ``progress(rows_read, total_rows)`` after each batch.
        format: the dump's format, when its paths do not tell (``--format``: parquet, slime,
            miles, nemo_rl, skyrl; docs/formats.md).
        trust_pickle: read pickle files, which can run code (SkyRL's dumps; ``--trust-pickle``)."""

F = TypeVar("F", bound=Callable[..., Any])


def documented(function: F) -> F:
    """Put the arguments every dump-reading function shares in its docstring."""
    function.__doc__ = (function.__doc__ or "").replace("        {dump_arguments}", DUMP_ARGUMENTS)
    return function


def as_paths(paths: Paths | None) -> list[str | Path]:
    """One path or several as a list; strings (URLs among them) are kept as given."""
    if paths is None:
        return []
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return [p if isinstance(p, (str, Path)) else Path(os.fspath(p)) for p in paths]


def dialect_of(value: str | None) -> Dialect | None:
    """A ``dialect=`` argument checked (None when not given)."""
    if value is None:
        return None
    if value not in DIALECTS:
        raise UsageError(f"dialect {value!r}: expected one of {', '.join(DIALECTS)}")
    return value  # type: ignore[return-value]


def dump_spec(
    paths: Paths,
    *,
    step: int | Sequence[int] | None = None,
    steps: str | tuple[int | None, int | None] | None = None,
    rollout_col: str | None = None,
    training_col: str | None = None,
    mask_col: str | None = None,
    step_col: str | None = None,
    drop_nonfinite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    engine: str = "local",
    ray_address: str | None = None,
    format: str | None = None,
    trust_pickle: bool = False,
) -> DumpSpec:
    """Where a dump is and how to read it (the arguments of every function here).

    Raises:
        UsageError: a malformed ``steps``, an empty column name.
    """
    for name, value in (
        ("rollout_col", rollout_col),
        ("training_col", training_col),
        ("mask_col", mask_col),
        ("step_col", step_col),
    ):
        if value is not None and not value.strip():
            raise UsageError(f"{name}: empty column name")
    if isinstance(steps, tuple):
        start, stop = steps
        steps = f"{'' if start is None else start}:{'' if stop is None else stop}"
    only = [step] if isinstance(step, int) else list(step or ())
    return DumpSpec(
        paths=as_paths(paths),
        columns=ColumnNames(rollout_col, training_col, mask_col, step_col),
        drop_nonfinite=drop_nonfinite,
        selection=StepSelection.parse(only, steps),
        storage_options=dict(storage_options or {}),
        engine=engine,
        ray_address=ray_address,
        input_format=InputFormat(format, trust_pickle),
    )


_DUMP_KEYS = (
    "step",
    "steps",
    "rollout_col",
    "training_col",
    "mask_col",
    "step_col",
    "drop_nonfinite",
    "storage_options",
    "engine",
    "ray_address",
    "format",
    "trust_pickle",
)


def spec_of(paths: Paths, arguments: Mapping[str, Any]) -> DumpSpec:
    """:func:`dump_spec` of the dump arguments among a function's ``arguments`` (its locals)."""
    return dump_spec(paths, **{key: arguments[key] for key in _DUMP_KEYS})
