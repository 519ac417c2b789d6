"""Per-row sums over a batch's tokens: the reductions every row statistic is a function of
(:mod:`rcdiag.metrics.offpolicy` turns them into verl's statistics).

Notation as in docs/metrics.md: per token ℓ = log π_train − log π_rollout, ρ = e^ℓ, w = e^clamp(ℓ)
the token weight. The sums are taken over pieces of the batch (:func:`token_pieces`) so that their
temporaries stay small: a row cut by a piece boundary gets the sums of both parts.
"""

from __future__ import annotations

import numpy as np

from rcdiag.metrics.grouped import Kind
from rcdiag.metrics.ragged import F64, I64, RaggedBatch, segment_count, segment_max, segment_sum

SAFETY_BOUND = 20.0
"""verl clamps log ratios to [−20, 20] before exponentiating them (docs/metrics.md)."""

_LN2 = float(np.log(2.0))
_CANCEL_FREE = 1.0
"""Up to this largest |ℓ| every weight lies in [1/e, e], so Σw read as n + Σ(w − 1) (and Σw² as
n + 2Σ(w − 1) + Σ(w − 1)²) is within a few units of rounding of the direct sum: nothing cancels.
That reading spares a pass over the tokens."""

_NEAR_BAND = 0.095
"""Below ln 1.1 ≈ 0.0953: no ρ = e^ℓ with |ℓ| under it lies outside [0.9, 1.1]."""


TOKEN_PIECE = 1 << 20
"""Tokens per piece of a long batch (one long response): the per-token temporaries of the row
statistics (and the profile's) are made a piece at a time and each row's sums added across the
pieces, so memory stays bounded whatever a row's length."""


CACHE_PIECE = 1 << 18
"""Tokens per piece of the per-row sums: their dozen temporaries (2 MiB each) then stay in the
processor's cache from one operation to the next instead of going through memory."""


def token_pieces(tokens: int, piece: int | None = None) -> list[tuple[int, int]]:
    """The pieces ``(start, end)`` a batch of ``tokens`` tokens is processed in: one up to twice
    ``piece`` (by default :data:`TOKEN_PIECE`: the reader's batches of about 2²⁰ tokens whole),
    else pieces of ``piece`` (a response longer than a batch).

    Example:
        >>> token_pieces(5), token_pieces(5 * TOKEN_PIECE // 2)[-1] == (2 * TOKEN_PIECE, 5 * TOKEN_PIECE // 2)
        ([(0, 5)], True)
    """
    piece = TOKEN_PIECE if piece is None else piece
    if tokens <= 2 * piece:
        return [(0, tokens)]
    return [(low, min(low + piece, tokens)) for low in range(0, tokens, piece)]


TOKEN_SUMS: dict[str, Kind] = {
    "n": "sum",
    "old_sum": "sum",
    "seq_sum": "sum",
    "abs_max": "max",
    "row_weight": "sum",
    "row_weight_sq": "sum",
    "row_weight_abs_dev": "sum",
    "outside_near": "sum",
    "outside_far": "sum",
    "row_abs": "sum",
    "k3": "sum",
    "catastrophic": "sum",
}
"""The per-row reductions over the valid tokens that every row statistic is a function of: n = Σ 1,
``old_sum`` = Σ log π_train, ``seq_sum`` = Σ ℓ, ``abs_max`` = max |ℓ|, ``row_weight`` = Σ w,
``row_weight_sq`` = Σ w², ``row_weight_abs_dev`` = Σ |w − 1|, ``outside_near`` = #{|ρ − 1| > 0.1},
``outside_far`` = #{|ℓ| > ln 2}, ``row_abs`` = Σ |ℓ|, ``k3`` = Σ (ρ − 1 − ℓ), ``catastrophic`` =
#{ℓ < log τ}."""


def token_sums(batch: RaggedBatch, log_ratio: F64, veto_threshold: float) -> dict[str, F64]:
    """Each row's :data:`TOKEN_SUMS`, over the batch's :func:`token_pieces` of
    :data:`CACHE_PIECE` tokens (a row cut by a piece boundary gets the sums of both parts)."""
    offsets = batch.offsets
    pieces = token_pieces(int(offsets[-1]), CACHE_PIECE)
    if len(pieces) == 1:
        return _piece_sums(batch, log_ratio, offsets, slice(None), veto_threshold)
    out = {name: np.zeros(batch.rows) for name in TOKEN_SUMS}
    for start, end in pieces:
        first = int(np.searchsorted(offsets, start, side="right")) - 1
        last = int(np.searchsorted(offsets, end, side="left"))  # rows first .. last - 1
        local = np.clip(offsets[first : last + 1], start, end) - start
        piece = _piece_sums(batch, log_ratio, local, slice(start, end), veto_threshold)
        for name, kind in TOKEN_SUMS.items():
            rows = out[name][first:last]
            if kind == "sum":
                rows += piece[name]
            else:
                np.maximum(rows, piece[name], out=rows)
    return out


def _piece_sums(
    batch: RaggedBatch, log_ratio: F64, offsets: I64, tokens: slice, veto_threshold: float
) -> dict[str, F64]:
    """:data:`TOKEN_SUMS` of the rows delimited by ``offsets`` within the ``tokens`` of the
    batch."""
    mask, ell = batch.mask[tokens], log_ratio[tokens]
    if batch.all_valid:  # the common dump without padding: no pass over the mask
        n = np.diff(offsets).astype(np.float64)
        old_sum = segment_sum(batch.old[tokens], offsets)
    else:
        n = segment_sum(mask, offsets)
        old_sum = segment_sum(np.where(mask, batch.old[tokens], 0.0), offsets)
    seq_sum = segment_sum(ell, offsets)
    expm1_ell = np.expm1(ell)  # ρ − 1, exactly 0 at invalid positions (ℓ = 0 there)
    abs_ell = np.abs(ell)
    abs_max = segment_max(abs_ell, offsets, empty=0.0)
    rows = offsets.size - 1
    # Clamping usually changes nothing; then the weights reuse ρ − 1 instead of exponentiating again.
    # Likewise a count whose band no |ℓ| of the piece reaches is 0 without a pass over the tokens.
    largest = abs_max.max(initial=0.0)  # NaN never skips a count: every comparison is False
    needs_clamp = largest > SAFETY_BOUND
    expm1_clamped = (
        np.expm1(np.clip(ell, -SAFETY_BOUND, SAFETY_BOUND)) if needs_clamp else expm1_ell
    )
    # w = exp(clamp ℓ) at valid tokens, 0 elsewhere
    if largest <= _CANCEL_FREE:  # Σw = n + Σ(w − 1), Σw² = n + 2Σ(w − 1) + Σ(w − 1)²
        deviation_sum = segment_sum(expm1_clamped, offsets)
        row_weight = n + deviation_sum
        squares = np.square(expm1_clamped)
        row_weight_sq = n + 2.0 * deviation_sum + segment_sum(squares, offsets)
        del squares
    else:  # summed directly, so that tiny weights do not cancel against the ones
        token_weight = expm1_clamped + (1.0 if batch.all_valid else mask)
        row_weight = segment_sum(token_weight, offsets)
        np.square(token_weight, out=token_weight)
        row_weight_sq = segment_sum(token_weight, offsets)
        del token_weight
    weight_deviation = np.abs(expm1_clamped)  # |w − 1| at valid tokens, 0 elsewhere
    row_weight_abs_dev = segment_sum(weight_deviation, offsets)
    rho_deviation = np.abs(expm1_ell) if needs_clamp else weight_deviation  # |ρ − 1|
    outside_near = np.zeros(rows)
    if not largest < _NEAR_BAND:
        outside_near = segment_count(rho_deviation > 0.1, offsets)
    del rho_deviation, weight_deviation, expm1_clamped
    outside_far = np.zeros(rows)
    if not largest <= _LN2:
        outside_far = segment_count(abs_ell > _LN2, offsets)
    row_abs = segment_sum(abs_ell, offsets)
    del abs_ell
    np.subtract(expm1_ell, ell, out=expm1_ell)  # k3 per token: ρ − 1 − ℓ (ρ − 1 is not read again)
    k3 = segment_sum(expm1_ell, offsets)
    del expm1_ell
    log_tau = float(np.log(veto_threshold))
    catastrophic = np.zeros(rows)
    if not (log_tau < 0 and largest <= -log_tau):  # else no ℓ < log τ
        catastrophic_flags = ell < log_tau
        if log_tau > 0 and not batch.all_valid:  # log τ > 0 = ℓ at invalid positions
            catastrophic_flags &= mask
        catastrophic = segment_count(catastrophic_flags, offsets)
    return {
        "n": n,
        "old_sum": old_sum,
        "seq_sum": seq_sum,
        "abs_max": abs_max,
        "row_weight": row_weight,
        "row_weight_sq": row_weight_sq,
        "row_weight_abs_dev": row_weight_abs_dev,
        "outside_near": outside_near,
        "outside_far": outside_far,
        "row_abs": row_abs,
        "k3": k3,
        "catastrophic": catastrophic,
    }
