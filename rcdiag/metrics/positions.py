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
from rcdiag.metrics.ragged import F64, I64, Bool, Floats, RaggedBatch, segment_sum

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
    """Per-row sums of :data:`POSITION_STATISTICS` (module docstring).

    Every bin of every row is one segment of the flat |ℓ| (:func:`bin_cuts`), so the profile is
    one reduction over the batch: no table of positions, and a long response costs no more than
    its |ℓ|.
    """
    offsets, valid = batch.offsets, batch.mask
    abs_ell = np.abs(batch.log_ratio)  # 0 at invalid positions
    cuts = bin_cuts(offsets)
    bins = len(POSITION_EDGES)
    abs_sums = segment_sum(abs_ell, cuts).reshape(-1, bins)
    if batch.all_valid:  # a bin's valid tokens are its positions
        edges = np.array(POSITION_EDGES)
        widths = np.append(np.diff(edges), np.iinfo(np.int64).max)
        counts = np.clip(np.diff(offsets)[:, None] - edges, 0, widths).astype(np.float64)
    else:
        counts = segment_sum(valid, cuts).reshape(-1, bins)
    stats: dict[str, F64] = {}
    for k, edge in enumerate(POSITION_EDGES):
        stats[f"pos_{edge}_abs"] = abs_sums[:, k]
        stats[f"pos_{edge}_n"] = counts[:, k]
    stats.update(_padded_ends(batch, abs_ell))
    return stats


def bin_cuts(offsets: I64) -> I64:
    """Segment offsets that cut each row at the :data:`POSITION_EDGES` (clipped to the row):
    :func:`segment_sum` over them gives, for row i and bin k, entry ``i * len(POSITION_EDGES) + k``.

    Example:
        >>> bin_cuts(np.array([0, 3, 103])).reshape(-1)[:9].tolist()
        [0, 1, 2, 3, 3, 3, 3, 3, 3]
    """
    starts = offsets[:-1, None] + np.array(POSITION_EDGES)
    cuts = np.minimum(starts, offsets[1:, None]).reshape(-1)
    return np.append(cuts, offsets[-1])


def _cut(offsets: I64, at: I64) -> I64:
    """Segment offsets that cut each row ``[offsets[i], offsets[i + 1])`` at ``at[i]`` (within
    it): :func:`segment_sum` of them gives at its odd entries each row's sum over
    ``[at[i], offsets[i + 1])``."""
    out = np.empty(2 * offsets.size - 1, dtype=np.int64)
    out[0::2] = offsets
    out[1::2] = at
    return out


def _end_run(values: Floats, valid: np.ndarray, offsets: I64, from_end: bool, rows: I64) -> I64:
    """For each of the ``rows`` (indices): how many of its first (``from_end``: last) positions
    are valid and hold the value of its first (last) position; 0 for a row that starts (ends) on
    an invalid position.

    Read from a table of each row's first (last) positions, widened for the rows whose run is
    longer: most runs are one position long, and a long row costs no array per token.
    """
    out = np.zeros(rows.size, dtype=np.int64)
    lengths = np.diff(offsets)[rows]
    pending = np.flatnonzero(lengths > 0)
    width = 8
    while pending.size:
        length = lengths[pending]
        end = offsets[rows[pending] + 1] - 1 if from_end else offsets[rows[pending]]
        window = np.minimum(length, width)
        column = np.arange(int(window.max()), dtype=np.int64)
        inside = column < window[:, None]
        step = -column if from_end else column
        position = np.where(inside, end[:, None] + step, end[:, None])
        with np.errstate(invalid="ignore"):
            stops = ~valid[position] | (values[position] != values[end][:, None])
        stops &= inside
        found = stops.any(axis=1)
        whole = ~found & (window == length)  # the run is the whole row
        out[pending[found]] = np.argmax(stops[found], axis=1)
        out[pending[whole]] = length[whole]
        pending = pending[~found & ~whole]
        width *= 4
    return out


def _may_repeat(batch: RaggedBatch, from_end: bool) -> Bool:
    """Per row, whether a run at one end can reach :data:`PAD_RUN` positions in either column:
    its end position and the one :data:`PAD_RUN` − 1 further in are valid and hold the same
    value (a necessary condition, read from two positions per row; most rows fail it)."""
    offsets, valid = batch.offsets, batch.mask
    long_enough = np.diff(offsets) >= PAD_RUN
    if not long_enough.any():
        return long_enough
    end = np.where(long_enough, offsets[1:] - 1 if from_end else offsets[:-1], 0)
    inner = end - (PAD_RUN - 1) if from_end else end + (PAD_RUN - 1)
    inner[~long_enough] = 0
    with np.errstate(invalid="ignore"):
        same = (batch.rollout[end] == batch.rollout[inner]) | (batch.old[end] == batch.old[inner])
    return long_enough & same & valid[end] & valid[inner]


def _padded(rollout: I64, old: I64) -> I64:
    """Per row, a candidate padded run at one end: one column repeats over ≥ :data:`PAD_RUN`
    positions there and the other does not repeat as long."""
    run, shorter = np.maximum(rollout, old), np.minimum(rollout, old)
    return np.where((run >= PAD_RUN) & (shorter < run), run, 0)


def _run_sums(abs_ell: F64, offsets: I64, run: I64, from_end: bool) -> F64:
    """Per row, Σ|ℓ| over its last (or first) ``run`` positions; zeros when no row has a run."""
    if not run.any():
        return np.zeros(run.size)
    if from_end:
        return segment_sum(abs_ell, _cut(offsets, offsets[1:] - run))[1::2]
    return segment_sum(abs_ell, _cut(offsets, offsets[:-1] + run))[0::2]


def _padded_ends(batch: RaggedBatch, abs_ell: F64) -> dict[str, F64]:
    offsets, valid = batch.offsets, batch.mask

    def runs(from_end: bool) -> I64:
        out = np.zeros(batch.rows, dtype=np.int64)
        rows = np.flatnonzero(_may_repeat(batch, from_end))
        if rows.size:  # the exact runs of the few rows where one can reach PAD_RUN
            out[rows] = _padded(
                _end_run(batch.rollout, valid, offsets, from_end, rows),
                _end_run(batch.old, valid, offsets, from_end, rows),
            )
        return out

    # Σ|ℓ| over each candidate run: the columns differ there by more than PAD_GAP on average
    # (the sums are taken only when some row has a candidate: most batches have none)
    with np.errstate(invalid="ignore"):
        tail = runs(from_end=True)
        tail_abs = _run_sums(abs_ell, offsets, tail, from_end=True)
        tail = np.where(tail_abs > PAD_GAP * tail, tail, 0)
        lead = runs(from_end=False)
        lead_abs = _run_sums(abs_ell, offsets, lead, from_end=False)
        lead = np.where(lead_abs > PAD_GAP * lead, lead, 0)
        through = np.minimum(lead, np.diff(offsets) - tail)  # a row padded through: counted once
        if (through != lead).any():
            lead, lead_abs = through, _run_sums(abs_ell, offsets, through, from_end=False)
        padded_abs = np.where(tail > 0, tail_abs, 0.0) + np.where(lead > 0, lead_abs, 0.0)
    return {
        "pad_rows": ((tail > 0) | (lead > 0)).astype(np.float64),
        "pad_tokens": (tail + lead).astype(np.float64),
        "pad_abs": padded_abs,
        "lead_tokens": lead.astype(np.float64),
    }
