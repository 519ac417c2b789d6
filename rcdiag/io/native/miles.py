"""Miles' ``--dump-details`` training files, one per rank: ``train_data/{rollout_id}_{rank}.pt``
(also slime's layout before its ``format_version`` 2; docs/formats.md, "slime and Miles").

Read from radixark/miles main at 31f1ca961a94cb860cec3b2dea34ec332bfa8f76 (2026-08-21):
``miles/utils/train_dump_utils.py`` saves ``dict(rollout_id, rank, rollout_data, cp_rank, cp_size,
qkv_format)`` per rank, ``rollout_data`` being the rank's own training batch (lists with one entry
per local sample: ``sample_indices``, ``response_lengths``, ``total_lengths``, ``loss_masks``,
``rollout_log_probs``, ``log_probs``, ``weight_versions``, …);
``miles/backends/training_utils/cp_utils.py`` splits each response's per-token tensors over the
context-parallel ranks (two "zigzag" chunks of the whole sequence per rank); the trainer's
``log_probs`` are present only on ranks that computed them (the last pipeline stage), and tensor-
parallel peers hold identical copies. slime's older files are the same dictionary without
``cp_rank``/``cp_size``, saved from GPU memory.

This module puts each sample back together from the rank files of one step: the copies of
tensor-parallel peers are read once, the slices of context-parallel ranks are placed where the split
took them from, and a field is taken from the ranks that hold it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rcdiag.errors import InputError
from rcdiag.io.native.common import as_array, load_pt, log_probs
from rcdiag.io.native.names import RANK_FILE

PER_TOKEN_FIELDS = ("log_probs", "rollout_log_probs")
"""The split fields rcdiag reads (the loss mask is kept whole on every rank)."""


@dataclass
class TrainSample:
    """One sample of a step's training batch, put back together.

    Attributes:
        key: the sample's position in the rollout file (``by_position``) or its ``Sample.index``.
        old: the trainer's log-probs (``log_probs``), None when no file holds them.
        rollout: the rollout log-probs the trainer got, None when absent.
        mask: the loss mask (1: trained on), None when absent.
        weight_versions: the policy version of each turn, when the file holds them.
        where: the file and sample, for errors.
    """

    key: int
    by_position: bool
    response_length: int
    old: np.ndarray | None
    rollout: np.ndarray | None
    mask: np.ndarray | None
    weight_versions: list[Any] | None
    where: str
    joinable: bool = True
    """Whether ``key`` names the sample in the rollout file (False: only its place in the file)."""


def cp_ranges(
    total: int, response: int, cp_rank: int, cp_size: int, basis: int
) -> list[tuple[int, int]]:
    """The response positions ``[start, stop)`` a context-parallel rank holds, in its order.

    The sequence (``basis`` tokens: the whole length with packed sequences, the padded length
    otherwise) is cut into 2·cp_size chunks of ⌈basis / (2·cp_size)⌉; rank r holds chunks r and
    2·cp_size − 1 − r. The log-prob of token t comes from the logit at t − 1, so a chunk covering
    logits [a, b) holds the response positions [a − (P − 1), b − (P − 1)) that fall within the
    response, P being the prompt's length.

    Example:
        A 3-token prompt and a 9-token response in chunks of 3: logits 2 … 10 score the response;
        rank 0 holds chunks 0 (logit 2) and 3 (logits 9, 10), rank 1 chunks 1 and 2.

        >>> cp_ranges(total=12, response=9, cp_rank=0, cp_size=2, basis=12)
        [(0, 1), (7, 9)]
        >>> cp_ranges(total=12, response=9, cp_rank=1, cp_size=2, basis=12)
        [(1, 4), (4, 7)]
    """
    prompt = total - response
    chunk = -(-basis // (2 * cp_size))
    ranges = []
    for index in (cp_rank, 2 * cp_size - 1 - cp_rank):
        low = max(index * chunk, prompt - 1)
        high = min((index + 1) * chunk, total - 1)
        if low < high:
            ranges.append((low - (prompt - 1), high - (prompt - 1)))
    return ranges


def assemble(
    chunks: dict[int, np.ndarray], total: int, response: int, cp_size: int, basis: int, where: str
) -> np.ndarray:
    """One response's values from every context-parallel rank's slice (:func:`cp_ranges`)."""
    first = next(iter(chunks.values()))
    out = np.zeros(response, dtype=first.dtype)
    for cp_rank, chunk in chunks.items():
        taken = 0
        for start, stop in cp_ranges(total, response, cp_rank, cp_size, basis):
            out[start:stop] = chunk[taken : taken + stop - start]
            taken += stop - start
        if taken != len(chunk):
            raise InputError(
                f"{where}: context-parallel rank {cp_rank} of {cp_size} holds {len(chunk)} "
                f"values; its slice of a {response}-token response has {taken}"
            )
    return out


def rank_of(path: Path) -> int:
    match = RANK_FILE.fullmatch(path.name)
    return int(match[2]) if match else 0


@dataclass
class _Pack:
    path: Path
    data: dict[str, Any]
    cp_rank: int | None
    cp_size: int
    qkv_format: str

    def column(self, key: str) -> Any:
        return self.data.get(key)


def _open(path: Path, trust_pickle: bool, loaded: Mapping[Path, Any]) -> _Pack:
    pack = loaded[path] if path in loaded else load_pt(path, trust_pickle)
    if not isinstance(pack, dict) or not isinstance(pack.get("rollout_data"), dict):
        raise InputError(
            f"{path}: not a per-rank training file (a dictionary with 'rollout_data', as Miles "
            "and slime before format_version 2 write)"
        )
    data = pack["rollout_data"]
    if data.get("response_lengths") is None:
        raise InputError(f"{path}: 'rollout_data' has no 'response_lengths'")
    cp_rank = pack.get("cp_rank")
    return _Pack(
        path,
        data,
        None if cp_rank is None else int(cp_rank),
        int(pack.get("cp_size") or 1),
        str(pack.get("qkv_format") or "thd"),
    )


def _keys(pack: _Pack, by_position: bool) -> list[int]:
    name = "partition" if by_position else "sample_indices"
    values = pack.column(name)
    count = len(pack.column("response_lengths"))
    if values is None or len(values) != count:
        raise InputError(
            f"{pack.path}: 'rollout_data' has no {name!r} with one entry per sample; rcdiag "
            "cannot tell which sample each row is"
        )
    keys = []
    for row, value in enumerate(values):
        if value is None:
            raise InputError(f"{pack.path}: sample {row}: {name!r} is None")
        keys.append(int(value))
    return keys


def _entry(pack: _Pack, key: str, row: int) -> Any:
    values = pack.column(key)
    return None if values is None or row >= len(values) else values[row]


def _layout(
    packs: Sequence[_Pack],
    locations: list[tuple[int, int]],
    total: int,
    response: int,
    where: str,
    probe: str,
) -> tuple[int, dict[int, int]]:
    """``(cp_size, {pack: cp_rank})`` of one sample's field ``probe``: recorded in the files
    (Miles), else told apart by the distinct slices the ranks hold, in rank order (slime's older
    files)."""
    if all(packs[p].cp_rank is not None for p, _ in locations):
        return packs[locations[0][0]].cp_size, {p: int(packs[p].cp_rank or 0) for p, _ in locations}
    seen: list[np.ndarray] = []
    layout: dict[int, int] = {}
    for p, row in locations:  # in rank order: context-parallel rank r comes before r + 1
        value = _entry(packs[p], probe, row)
        if value is None:
            continue
        values = as_array(value, where, probe)
        match = next((i for i, s in enumerate(seen) if np.array_equal(s, values)), None)
        if match is None:
            match = len(seen)
            seen.append(values)
        layout[p] = match
    cp_size = max(1, len(seen))
    if cp_size == 1:
        return 1, {p: 0 for p, _ in locations}
    widths = [len(s) for s in seen]
    expected = [
        sum(b - a for a, b in cp_ranges(total, response, r, cp_size, total)) for r in range(cp_size)
    ]
    if widths != expected:
        raise InputError(
            f"{where}: the rank files hold {cp_size} different slices of {probe!r} "
            f"(lengths {widths}) that are no context-parallel split of {response} tokens, and "
            "they record no cp_rank"
        )
    return cp_size, layout


def _field(
    packs: Sequence[_Pack],
    locations: list[tuple[int, int]],
    key: str,
    total: int,
    response: int,
    basis: int,
    where: str,
) -> np.ndarray | None:
    held = [
        (p, log_probs(value, where, key))
        for p, row in locations
        if (value := _entry(packs[p], key, row)) is not None
    ]
    whole = [values for _, values in held if len(values) == response]
    if whole:  # a field kept whole on every rank (never split, or gathered before saving)
        return whole[0]
    if not held:
        return None
    cp_size, ranks = _layout(packs, locations, total, response, where, key)
    chunks: dict[int, np.ndarray] = {}
    for p, values in held:
        if p in ranks:
            chunks.setdefault(ranks[p], values)  # tensor-parallel copies: the first one
    if not chunks:
        return None
    if cp_size == 1:
        return chunks[0] if 0 in chunks else next(iter(chunks.values()))
    missing = sorted(set(range(cp_size)) - set(chunks))
    if missing:
        raise InputError(
            f"{where}: {key!r} lacks the slices of context-parallel ranks {missing} (of "
            f"{cp_size}); is a rank file missing?"
        )
    return assemble(chunks, total, response, cp_size, basis, f"{where}: {key!r}")


def read_rank_files(
    paths: Sequence[Path], trust_pickle: bool = False, loaded: Mapping[Path, Any] | None = None
) -> list[TrainSample]:
    """The samples of one step's rank files (sorted by rank), in rollout order; ``loaded``: files
    already loaded."""
    packs = [_open(p, trust_pickle, loaded or {}) for p in sorted(paths, key=rank_of)]
    by_position = all(p.column("partition") is not None for p in packs)
    locations: dict[int, list[tuple[int, int]]] = {}
    for index, pack in enumerate(packs):
        for row, key in enumerate(_keys(pack, by_position)):
            locations.setdefault(key, []).append((index, row))
    samples = []
    for key in sorted(locations):
        where_at = locations[key]
        first, row = where_at[0]
        pack = packs[first]
        name = "rollout position" if by_position else "sample_index"
        where = f"{pack.path}: sample with {name} {key}"
        response = int(_entry(pack, "response_lengths", row))
        lengths = _entry(pack, "total_lengths", row)
        total = response + 1 if lengths is None else int(lengths)
        for p, r in where_at[1:]:
            if int(_entry(packs[p], "response_lengths", r)) != response:
                raise InputError(
                    f"{packs[p].path}: sample with {name} {key} has another response length "
                    f"than in {pack.path}; are these files from different runs?"
                )
        seq_lens = pack.column("max_seq_lens")
        basis = total
        if pack.cp_size > 1 and pack.qkv_format != "thd":
            if seq_lens is None:
                raise InputError(f"{where}: qkv_format {pack.qkv_format!r} needs 'max_seq_lens'")
            basis = int(seq_lens[row])
        values = {
            k: _field(packs, where_at, k, total, response, basis, where) for k in PER_TOKEN_FIELDS
        }
        mask = _entry(pack, "loss_masks", row)
        versions = _entry(pack, "weight_versions", row)
        samples.append(
            TrainSample(
                key=key,
                by_position=by_position,
                response_length=response,
                old=values["log_probs"],
                rollout=values["rollout_log_probs"],
                mask=None if mask is None else as_array(mask, where, "loss_masks") != 0,
                weight_versions=None if versions is None else list(versions),
                where=where,
            )
        )
    return samples
