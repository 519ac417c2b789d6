"""What a file's name and place say it is: the files of other trainers' dumps (docs/formats.md).

A leaf of the readers: discovery (:func:`rcdiag.io.files.discover`) and the readers
(:mod:`rcdiag.io.native.detect`) both ask it, so neither imports the other.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from rcdiag.errors import InputError
from rcdiag.io.paths import PARQUET_SUFFIXES, file_kind

V2_FILE = re.compile(r"(\d+)\.pt")
"""slime's ``{rollout_id}.pt`` (format_version 2, and rollout files)."""
RANK_FILE = re.compile(r"(\d+)_(\d+)\.pt")
"""``{rollout_id}_{rank}.pt``: older slime and Miles training files, one per rank."""
EVAL_FILE = re.compile(r"eval_\d+\.pt")
"""slime's evaluation rollouts, which hold no trainer log-probs."""
NEMO_RL_FILE = r"train_data_step(\d+)\.jsonl"
"""NeMo-RL's ``{log_dir}/train_data_step{N}.jsonl``."""
SKYRL_FILE = r"global_step_(\d+)_training_input\.pkl"
"""SkyRL's ``dumped_data/global_step_{N}_training_input.pkl``."""


def kind_of(path: Path) -> str | None:
    """The format family a file's name and place say it belongs to (None: no dump file).

    Example:
        >>> kind_of(Path("run/train_data/3_0.pt")), kind_of(Path("logs/train_data_step2.jsonl"))
        ('slime', 'nemo_rl')
    """
    name, parent = path.name, path.parent.name
    if path.suffix.lower() in PARQUET_SUFFIXES:
        # Miles' rollout-only mirror, and its dashboard's summary cache (dashboard/cache/)
        miles_own = parent == "dashboard_columns" or path.parent.parts[-2:] == (
            "dashboard",
            "cache",
        )
        return None if miles_own else "parquet"
    if re.fullmatch(NEMO_RL_FILE, name):
        return "nemo_rl"
    if re.fullmatch(SKYRL_FILE, name):
        return "skyrl"
    if parent == "train_data" and (V2_FILE.fullmatch(name) or RANK_FILE.fullmatch(name)):
        return "slime"
    if parent == "rollout_data" and V2_FILE.fullmatch(name):
        return "slime"
    return None


def dump_files(directory: Path) -> list[Path]:
    """Every file of a dump under ``directory`` (parquet files and other trainers' dump files;
    searched recursively, symbolic links to directories not followed; names starting with ``.``
    or ``_``, and what is under them, skipped), sorted.

    Raises:
        InputError: a directory under ``directory`` cannot be listed, or a parquet-named entry is
            not a regular file (a part of the dump would be silently left out).
    """

    def unreadable(exc: OSError) -> None:
        where = exc.filename or directory
        raise InputError(
            f"{where}: cannot list the directory ({exc.strerror or exc}); the dump would be read "
            "in part"
        )

    found: list[Path] = []
    for parent, subdirectories, files in os.walk(directory, onerror=unreadable):
        subdirectories[:] = [d for d in subdirectories if not d.startswith((".", "_"))]
        for name in files:
            if name.startswith((".", "_")):
                continue
            path = Path(parent, name)
            if kind_of(path) is None:
                continue
            if not path.is_file():  # a part of the dump that cannot be read: never skipped
                kind = file_kind(path) or "a broken symbolic link"
                wanted = "parquet" if path.suffix.lower() in PARQUET_SUFFIXES else "dump"
                raise InputError(
                    f"{path}: is {kind}, not a {wanted} file; the dump would be read in part"
                )
            found.append(path)
    return sorted(found)


def companions(path: Path) -> list[Path]:
    """The other files of the step a slime/Miles file belongs to (its rank files and rollout file),
    which a run reads with it: never an output's path."""
    if kind_of(path) != "slime":
        return []
    match = V2_FILE.fullmatch(path.name) or RANK_FILE.fullmatch(path.name)
    if match is None:
        return []
    root, step = path.parent.parent, int(match[1])
    rollout = root / "rollout_data" / f"{step}.pt"
    found = [*train_files(root / "train_data", step), *([rollout] if rollout.is_file() else [])]
    return [p for p in found if p != path]


def train_files(directory: Path, step: int) -> list[Path]:
    """The training files of one step: ``{step}.pt``, else its rank files in rank order."""
    single = directory / f"{step}.pt"
    if single.is_file():
        return [single]
    ranks = [
        p
        for p in directory.glob(f"{step}_*.pt")
        if (m := RANK_FILE.fullmatch(p.name)) is not None and int(m[1]) == step
    ]
    return sorted(ranks, key=lambda p: int(p.stem.rsplit("_", 1)[1]))
