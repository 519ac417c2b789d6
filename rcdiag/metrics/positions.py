"""Where in a response the mismatch lives, and responses that end in padding marked valid
(docs/diagnosis.md).

Pure per-row sums of one :class:`~rcdiag.metrics.ragged.RaggedBatch`, summed per step with the
other evidence (:data:`POSITION_STATISTICS`):

* **By position**: Σ|ℓ| and the number of valid tokens in each bin of absolute response positions
  :data:`POSITION_EDGES` (position 0, 1, 2–3, 4–7, …, 64 and after). A mismatch that starts at a
  fixed position (an fp8 KV cache, chunked prefill) or that is huge on the first tokens and decays
  (the two sides scored the response after different contexts) shows in this profile; numerics
  spread evenly over it.
* **Padded ends**: the trailing (or leading) run of valid positions of a response where one column
  holds one value over and over (0.0, a pad token's score) while the other column does not. A
  generated token rarely has the very same log-probability as the tokens beside it, so a run of
  :data:`PAD_RUN` or more such positions where the columns differ by more than :data:`PAD_GAP`
  means positions that were never generated are counted in the mask: padding after the response,
  or the prompt before it (which the engine did not score). Per row: whether it ends or starts
  in such a run, the runs' length (``pad_tokens``, with ``lead_tokens`` of it at the start) and
  Σ|ℓ| over them.
"""

from __future__ import annotations

import numpy as np

from rcdiag.metrics.grouped import Kind
from rcdiag.metrics.ragged import F64, I64, RaggedBatch

POSITION_EDGES: tuple[int, ...] = (0, 1, 2, 4, 8, 16, 32, 64)
"""First position of each bin; the last bin runs to the end of the response."""
PAD_RUN = 4
"""A trailing run of this many repeated values in one column (and not the other) is padding…"""
PAD_GAP = 1.0
"""… when the two columns differ there by more than this on average (|ℓ|): a confident engine
may report log p = 0.0 for a few last tokens that the trainer scores just below 0."""

POSITION_STATISTICS: dict[str, Kind] = {
    **{f"pos_{edge}_abs": "sum" for edge in POSITION_EDGES},
    **{f"pos_{edge}_n": "sum" for edge in POSITION_EDGES},
    "pad_rows": "sum",
    "pad_tokens": "sum",
    "pad_abs": "sum",
    "lead_tokens": "sum",
}
"""The per-row sums this module gives, and how they combine."""


def position_statistics(batch: RaggedBatch) -> dict[str, F64]:
    """Per-row sums of :data:`POSITION_STATISTICS` (module docstring)."""
    offsets, lengths = batch.offsets, batch.lengths
    rows, bins = offsets.size - 1, len(POSITION_EDGES)
    abs_ell = np.abs(batch.log_ratio)  # 0 at invalid positions
    position = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    # one key per (row, position bin): two weighted counts give every bin's sums at once
    key = _BIN_OF[np.minimum(position, POSITION_EDGES[-1])]
    key += np.repeat(np.arange(rows, dtype=np.int64) * bins, lengths)
    size = rows * bins
    sums = np.bincount(key, abs_ell, size).astype(np.float64, copy=False).reshape(rows, bins)
    counts = np.bincount(key, batch.mask, size).astype(np.float64, copy=False).reshape(rows, bins)
    stats: dict[str, F64] = {}
    for index, edge in enumerate(POSITION_EDGES):
        stats[f"pos_{edge}_abs"] = sums[:, index]
        stats[f"pos_{edge}_n"] = counts[:, index]
    stats.update(_padded_ends(batch, abs_ell))
    return stats


_BIN_OF = (
    np.searchsorted(np.asarray(POSITION_EDGES), np.arange(POSITION_EDGES[-1] + 1), "right") - 1
)
"""The bin of each position 0 … the last edge (positions past it share the last bin)."""


def _runs(values: F64, valid: np.ndarray, offsets: I64) -> tuple[I64, I64]:
    """Per row: how many of its first valid positions hold the same value as its first one, and
    how many of its last hold the same value as its last one (0 for a row that does not start,
    or end, on a valid position).

    A *break* is a position that does not continue the run before it: a row's start, a new
    value, an invalid position or the one after it. The trailing run starts at the row's last
    break; the leading run ends at the first break after the row's start.
    """
    n, rows = values.size, offsets.size - 1
    lead, tail = np.zeros(rows, dtype=np.int64), np.zeros(rows, dtype=np.int64)
    nonempty = offsets[1:] > offsets[:-1]
    if n == 0 or not nonempty.any():
        return lead, tail
    starts, ends = offsets[:-1][nonempty], offsets[1:][nonempty]
    invalid = ~valid
    breaks = np.empty(n, dtype=bool)
    breaks[0] = True
    np.not_equal(values[1:], values[:-1], out=breaks[1:])
    breaks |= invalid
    breaks[1:] |= invalid[:-1]
    breaks[starts] = True
    index = np.arange(n, dtype=np.int64)
    last_break = np.maximum.reduceat(np.where(breaks, index, -1), starts)
    tail[nonempty] = np.where(valid[ends - 1], ends - last_break, 0)
    breaks[starts] = False  # the first break after each start ends its leading run
    first_break = np.minimum(np.minimum.reduceat(np.where(breaks, index, n), starts), ends)
    lead[nonempty] = np.where(valid[starts], first_break - starts, 0)
    return lead, tail


def _padded(runs: tuple[I64, I64], other: tuple[I64, I64], side: int) -> I64:
    """Per row, a candidate padded run on one ``side`` (0 leading, 1 trailing): one column
    repeats over ≥ :data:`PAD_RUN` positions and the other does not repeat as long."""
    mine, theirs = runs[side], other[side]
    run, shorter = np.maximum(mine, theirs), np.minimum(mine, theirs)
    return np.where((run >= PAD_RUN) & (shorter < run), run, 0)


def _padded_ends(batch: RaggedBatch, abs_ell: F64) -> dict[str, F64]:
    offsets = batch.offsets
    rollout = _runs(batch.rollout, batch.mask, offsets)
    old = _runs(batch.old, batch.mask, offsets)
    lead, tail = _padded(rollout, old, 0), _padded(rollout, old, 1)
    with np.errstate(invalid="ignore"):
        cumulative = np.concatenate([[0.0], np.cumsum(abs_ell)])
        starts, ends = offsets[:-1], offsets[1:]
        # the columns differ there by more than PAD_GAP on average: never generated
        tail_abs = cumulative[ends] - cumulative[ends - tail]
        tail = np.where(tail_abs > PAD_GAP * tail, tail, 0)
        lead_abs = cumulative[starts + lead] - cumulative[starts]
        lead = np.where(lead_abs > PAD_GAP * lead, lead, 0)
        lead = np.minimum(lead, np.diff(offsets) - tail)  # a row padded through: counted once
        padded_abs = (cumulative[ends] - cumulative[ends - tail]) + (
            cumulative[starts + lead] - cumulative[starts]
        )
    return {
        "pad_rows": ((tail > 0) | (lead > 0)).astype(np.float64),
        "pad_tokens": (tail + lead).astype(np.float64),
        "pad_abs": np.where(tail + lead > 0, padded_abs, 0.0),
        "lead_tokens": lead.astype(np.float64),
    }
