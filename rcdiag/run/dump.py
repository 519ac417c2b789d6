"""Where a dump is and how to read it: :class:`DumpSpec`, and the arguments every function of
:mod:`rcdiag.api` shares to describe it (they mirror the flags every dump-reading command has)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from rcdiag.dialects import DIALECTS, Dialect
from rcdiag.errors import UsageError
from rcdiag.io.files import ColumnNames, StepSelection
from rcdiag.io.native.detect import InputFormat
from rcdiag.io.reader import BATCH_TOKENS, DumpReader

PathLike = str | os.PathLike[str]
Paths = PathLike | Sequence[PathLike]
"""A dump: a parquet file, a directory (of ``step=N/`` shards), a glob or a URL, or several."""

ENGINES = ("local", "ray")
"""Where a pass runs: this process (``local``) or a Ray cluster (``ray``, docs/scale.md)."""


@dataclass(frozen=True)
class DumpSpec:
    """Where a dump is and how to read it.

    Args:
        engine: ``local`` (this process) or ``ray`` (the files spread over a Ray cluster).
        ray_address: the cluster for ``ray`` (None: ``RAY_ADDRESS``, else a local Ray).
    """

    paths: Sequence[str | Path]
    columns: ColumnNames = field(default_factory=ColumnNames)
    drop_nonfinite: bool = False
    selection: StepSelection = field(default_factory=StepSelection)
    engine: str = "local"
    ray_address: str | None = None
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of the file system of remote paths (:mod:`rcdiag.io.remote`)."""
    input_format: InputFormat = field(default_factory=InputFormat)
    """The files' format (``--format``) and whether pickles may be read (``--trust-pickle``)."""
    cache: Path | None = None
    """Where each file's finished consumers are kept between passes (:mod:`rcdiag.run.cache`)."""

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise UsageError(f"--engine {self.engine!r}: expected one of {', '.join(ENGINES)}")
        if self.cache is not None and self.engine != "local":
            raise UsageError("--cache: the cache serves the local engine only")

    def reader(
        self,
        row_details: bool = False,
        paths: Sequence[str | Path] | None = None,
        stream_offset: int = 0,
        batch_tokens: int = BATCH_TOKENS,
    ) -> DumpReader:
        """A streaming reader; ``row_details`` also reads each row's uid and position. ``paths``
        and ``stream_offset``: a part of the dump (its files, and the rows before them);
        ``batch_tokens``: tokens per batch."""
        return DumpReader(
            self.paths if paths is None else paths,
            self.columns,
            drop_nonfinite=self.drop_nonfinite,
            selection=self.selection,
            row_details=row_details,
            stream_offset=stream_offset,
            batch_tokens=batch_tokens,
            storage_options=self.storage_options,
            input_format=self.input_format,
        )


Progress = Callable[[int, int], None]
"""Called as ``progress(rows_read, total_rows)`` after each batch."""


@dataclass(frozen=True)
class DumpOption:
    """One of the ten ways to say where a dump is and how to read it: a keyword argument of every
    API function (:class:`DumpArguments`) and a flag of every command that reads a dump.

    Attributes:
        name: the keyword argument (``rollout_col``).
        flag: the command-line flag (``--rollout-col``).
        help: what it does, in the command's help.
        metavar: the word the help shows for its value (None for a flag without one).
        kind: the type of the flag's value (``bool`` for a switch).
        repeatable: the flag may be given several times.
        default: its value when not given.
    """

    name: str
    flag: str
    help: str
    metavar: str | None = None
    kind: type = str
    repeatable: bool = False
    default: Any = None


DUMP_OPTIONS: tuple[DumpOption, ...] = (
    DumpOption("step", "--step", "Analyse only this step (repeatable).", "N", int, True),
    DumpOption(
        "steps", "--steps", "Analyse only steps A:B (inclusive; A or B may be empty).", "A:B"
    ),
    DumpOption("rollout_col", "--rollout-col", "Column of rollout log-probs.", "COLUMN"),
    DumpOption("training_col", "--training-col", "Column of trainer (old) log-probs.", "COLUMN"),
    DumpOption("mask_col", "--mask-col", "Column of the response mask.", "COLUMN"),
    DumpOption("step_col", "--step-col", "Column of the training step.", "COLUMN"),
    DumpOption(
        "drop_nonfinite",
        "--drop-nonfinite",
        "Mask NaN/±inf at valid positions (and count them) instead of failing.",
        kind=bool,
        default=False,
    ),
    DumpOption(
        "engine",
        "--engine",
        "Where the pass runs: local (this process) or ray (the dump's files spread over a Ray "
        "cluster, pip install 'rcdiag[ray]'; docs/scale.md).",
        "local|ray",
        default="local",
    ),
    DumpOption(
        "ray_address",
        "--ray-address",
        "The Ray cluster for --engine ray (default: RAY_ADDRESS, else a local Ray).",
        "ADDRESS",
    ),
    DumpOption(
        "storage_options",
        "--storage-option",
        "An option of the file system of s3://, gs://, hf://, http(s):// paths, e.g. "
        "endpoint_url=http://127.0.0.1:9000 (repeatable; docs/python-api.md).",
        "KEY=VALUE",
        repeatable=True,
    ),
    DumpOption(
        "format",
        "--format",
        "The dump's format when its paths do not tell: parquet, slime, miles, nemo_rl or skyrl "
        "(docs/formats.md).",
        "FORMAT",
    ),
    DumpOption(
        "trust_pickle",
        "--trust-pickle",
        "Read pickle files (SkyRL's dumped batches), which can run code: only files you trust.",
        kind=bool,
        default=False,
    ),
    DumpOption(
        "cache",
        "--cache",
        "Keep each file's finished results in DIR and read again only new or changed files "
        "(a growing run; docs/scale.md).",
        "DIR",
    ),
)
"""The dump options, in the order the help lists them: the one table from which the commands'
flags are made (:func:`rcdiag.commands._common.reads_dump`); :class:`DumpArguments` types the same
names for the API (a test holds the two together)."""


class DumpArguments(TypedDict, total=False):
    """The keyword arguments every dump-reading function of :mod:`rcdiag.api` takes as
    ``**dump`` (each mirrors a flag of every dump-reading command):

    Attributes:
        step: analyse only this step, or these steps (``--step``).
        steps: analyse only the steps ``"A:B"`` (inclusive; either end may be empty) or
            ``(A, B)`` (``--steps``).
        rollout_col: the rollout log-prob column, when not the default (``--rollout-col``;
            README.md, "The dump"); likewise training_col, mask_col and step_col.
        training_col: the training log-prob column (``--training-col``).
        mask_col: the response-mask column (``--mask-col``).
        step_col: the step column (``--step-col``).
        drop_nonfinite: mask NaN/±inf at valid positions (and count them) instead of failing
            (``--drop-nonfinite``).
        storage_options: keyword arguments of the file system of ``s3://``, ``gs://``, ``hf://``
            and ``http(s)://`` paths (``--storage-option KEY=VALUE``), e.g.
            ``{"endpoint_url": "http://127.0.0.1:9000"}``.
        engine: ``"local"`` (this process) or ``"ray"`` (the dump's files read across a Ray
            cluster with the same results, ``--engine``; docs/scale.md).
        ray_address: the Ray cluster for ``engine="ray"`` (None: ``RAY_ADDRESS``, else a local
            Ray started for the call; ``--ray-address``).
        format: the dump's format, when its paths do not tell (``--format``: parquet, slime,
            miles, nemo_rl, skyrl; docs/formats.md).
        trust_pickle: read pickle files, which can run code (SkyRL's dumps; ``--trust-pickle``).
        cache: a directory where each file's finished results are kept, so that a pass over a
            grown dump reads only its new or changed files (``--cache``; docs/scale.md).
    """

    step: int | Sequence[int] | None
    steps: str | tuple[int | None, int | None] | None
    rollout_col: str | None
    training_col: str | None
    mask_col: str | None
    step_col: str | None
    drop_nonfinite: bool
    engine: str
    ray_address: str | None
    storage_options: Mapping[str, Any] | None
    format: str | None
    trust_pickle: bool
    cache: PathLike | None


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
    cache: PathLike | None = None,
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
        cache=None if cache is None else Path(os.fspath(cache)),
    )


def spec_of(paths: Paths, dump: Mapping[str, Any], function: str) -> DumpSpec:
    """:func:`dump_spec` of the ``**dump`` arguments given to ``function``.

    Raises:
        TypeError: an argument that is not one of :class:`DumpArguments`, named as Python names it.
    """
    for name in dump:
        if name not in DumpArguments.__annotations__:
            raise TypeError(f"{function}() got an unexpected keyword argument {name!r}")
    return dump_spec(paths, **dump)
