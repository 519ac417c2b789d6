"""Which format a dump is in, from what its paths hold, and its files opened as the reader reads
them (docs/formats.md).

A path is read as the format its names say: ``*.parquet`` (rcdiag's dump), ``train_data/{id}.pt``,
``train_data/{id}_{rank}.pt`` and ``rollout_data/{id}.pt`` (slime's and Miles' ``--dump-details``),
``train_data_step{N}.jsonl`` (NeMo-RL), ``global_step_{N}_training_input.pkl`` (SkyRL). A directory
is searched recursively for those names; one that holds two formats is ambiguous and needs
``--format``. Other files in a directory (logs, checkpoints, Miles' ``policy_loss_debug``,
``dashboard_columns`` and ``dashboard/cache``, slime's evaluation rollouts ``eval_{id}.pt``) are
not part of the dump.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rcdiag.errors import InputError, UsageError
from rcdiag.io.files import ColumnNames, DumpFile, DumpPath, open_file
from rcdiag.io.native import nemo_rl, skyrl, slime
from rcdiag.io.native.common import NativeFile, step_of
from rcdiag.io.native.names import (
    EVAL_FILE,
    RANK_FILE,
    V2_FILE,
    kind_of,
    train_files,
)
from rcdiag.io.remote import RemotePath

FORMATS = ("parquet", "slime", "miles", "nemo_rl", "skyrl")
"""The values of ``--format`` (slime and Miles share one layout and one reader)."""

_FAMILY = {"parquet": "parquet", "slime": "slime", "miles": "slime", "nemo_rl": "nemo_rl"}
_FAMILY["skyrl"] = "skyrl"
_NAMES = {"parquet": "parquet", "slime": "slime/Miles", "nemo_rl": "NeMo-RL", "skyrl": "SkyRL"}

_ANY_STEP = re.compile(r"(\d+)(?:_\d+)?\.pt$")


@dataclass(frozen=True)
class InputFormat:
    """How to read a dump's files.

    Args:
        format: one of :data:`FORMATS`; None: told from the paths.
        trust_pickle: read files that only a full unpickler reads (SkyRL's pickles, and ``.pt``
            files holding more than tensors and plain containers): such a file can run code.
    """

    format: str | None = None
    trust_pickle: bool = False

    def __post_init__(self) -> None:
        if self.format is not None and self.format not in FORMATS:
            raise UsageError(f"--format {self.format!r}: expected one of {', '.join(FORMATS)}")

    @property
    def family(self) -> str | None:
        return None if self.format is None else _FAMILY[self.format]


def _explicit_kind(path: Path, wanted: str | None) -> str:
    """The family of a file named by the user (or matched by a glob)."""
    kind = kind_of(path)
    if kind is not None:
        return kind
    if path.parent.name == "policy_loss_debug":
        raise InputError(
            f"{path}: is one of Miles' policy_loss_debug files (the loss inputs of one "
            "micro-batch), not its training dump: pass the --dump-details directory"
        )
    if path.parent.name == "rollout_data" and EVAL_FILE.fullmatch(path.name):
        raise InputError(
            f"{path}: is an evaluation rollout, which has no trainer log-probs: pass the "
            "training rollouts (rollout_data/{id}.pt) or the directory"
        )
    suffix = path.suffix.lower()
    if wanted in ("slime", "nemo_rl", "skyrl"):
        return wanted
    if suffix == ".pt":
        return "slime"
    if suffix in (".jsonl", ".pkl", ".pickle"):
        return "nemo_rl" if suffix == ".jsonl" else "skyrl"
    return "parquet"


def _slime_unit(path: Path, trust_pickle: bool) -> tuple[tuple[str, ...], NativeFile] | None:
    """The step of a slime/Miles dump a file belongs to, as one unit."""
    in_layout = path.parent.name in ("train_data", "rollout_data")
    match = V2_FILE.fullmatch(path.name) or RANK_FILE.fullmatch(path.name)
    if match is None and not in_layout:  # a file named by --save-debug-train-data's template
        match = _ANY_STEP.search(path.name)
    if match is None:
        raise InputError(
            f"{path}: a slime/Miles file is named {{rollout_id}}.pt or {{rollout_id}}_{{rank}}.pt;"
            " this name does not give the step"
        )
    step = int(match[1])
    root = path.parent.parent if in_layout else path.parent
    if path.parent.name == "rollout_data":
        train = train_files(root / "train_data", step)
        if not train and any((root / "train_data").glob("*.pt")):
            return None  # a step whose training file is not written yet
        if not train:
            raise InputError(
                f"{path}: no training file for rollout {step} in {root / 'train_data'}: slime "
                "and Miles write the trainer's log-probs there (--dump-details, "
                "--save-debug-train-data)"
            )
    elif in_layout:
        train = train_files(path.parent, step)
    else:
        train = [path]
    rollout = root / "rollout_data" / f"{step}.pt" if in_layout else None
    rollout_file = rollout if rollout is not None and rollout.is_file() else None
    files = [*train, *([rollout_file] if rollout_file else [])]
    label = "miles" if RANK_FILE.fullmatch(train[0].name) else "slime"

    def chunks(_rows: int) -> Any:
        yield slime.read_step(train, rollout_file, trust_pickle)

    key = ("slime", str(root.resolve()), str(step)) if in_layout else ("slime", str(path.resolve()))

    def estimate() -> int:
        return slime.count_training_samples(train, trust_pickle)

    return key, NativeFile(train[0], label, step, chunks, files, estimate=estimate)


def _unit(path: Path, kind: str, trust_pickle: bool) -> tuple[tuple[str, ...], NativeFile] | None:
    if kind == "slime":
        return _slime_unit(path, trust_pickle)
    key = (kind, str(path.resolve()))
    if kind == "nemo_rl":
        step = step_of(path, nemo_rl.FILE_PATTERN, "NeMo-RL training-data")
        return key, NativeFile(
            path,
            "nemo_rl",
            step,
            functools.partial(nemo_rl.chunks, path),
            shape=functools.partial(nemo_rl.shape, path),
        )
    if not trust_pickle:
        skyrl.refuse_untrusted(path)
    step = step_of(path, skyrl.FILE_PATTERN, "SkyRL dumped-batch")
    return key, NativeFile(path, "skyrl", step, lambda _rows: skyrl.chunks(path, trust_pickle))


def open_dump(
    found: Sequence[DumpPath], names: ColumnNames, input_format: InputFormat | None = None
) -> list[DumpFile | NativeFile]:
    """The dump's files opened: parquet files by their footer, native units (a step's files) as
    :class:`~rcdiag.io.native.common.NativeFile` (read when iterated).

    Raises:
        InputError: a file of no known layout, files of two formats without ``--format``, none of
            the format asked for.
    """
    fmt = input_format or InputFormat()
    kinds: list[tuple[DumpPath, str]] = []
    for path in found:
        if isinstance(path, RemotePath):
            kinds.append((path, "parquet"))
        else:
            kinds.append((path, _explicit_kind(path, fmt.family)))
    present = sorted({k for _, k in kinds})
    if fmt.family is not None:
        chosen = fmt.family
        if chosen not in present:
            where = ", ".join(str(p) for p in found[:2]) + (", …" if len(found) > 2 else "")
            raise InputError(
                f"{where}: holds no {_NAMES[chosen]} dump file (--format {fmt.format})"
            )
    elif len(present) > 1:
        listed = " and ".join(_NAMES[k] for k in present)
        raise InputError(
            f"{found[0]}: the input holds {listed} files; pass --format "
            f"({', '.join(FORMATS)}) to say which to read"
        )
    else:
        chosen = present[0] if present else "parquet"
    if chosen != "parquet" and any((names.rollout, names.training, names.mask, names.step)):
        raise UsageError(
            "--rollout-col, --training-col, --mask-col and --step-col name parquet columns; "
            f"a {_NAMES[chosen]} dump's fields are fixed (docs/formats.md)"
        )
    opened: list[DumpFile | NativeFile] = []
    units: dict[tuple[str, ...], NativeFile] = {}
    for path, kind in kinds:
        if kind != chosen:
            continue
        if chosen == "parquet":
            opened.append(open_file(path, names))
            continue
        assert isinstance(path, Path)
        made = _unit(path, kind, fmt.trust_pickle)
        if made is not None:
            units.setdefault(*made)
    native = sorted(units.values(), key=lambda u: (u.step, str(u.path)))
    return opened + list(native)
