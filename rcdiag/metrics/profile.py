"""Where the rollout/training mismatch lives: distributions, buckets and the worst sequences.

A streaming, bounded-memory companion of :class:`~rcdiag.metrics.analysis.OffPolicyAnalysis` for the HTML
report. Notation as in :mod:`rcdiag.metrics.offpolicy`: per valid token ℓ = log π_train − log π_rollout,
per row i with n_i ≥ 1 valid tokens S_i = Σ_valid ℓ and the geometric-mean log ratio m_i = S_i / n_i.

What is collected (every figure exact, not sampled):

* **Histograms** of ℓ over valid tokens and of S_i and m_i over rows with a valid token, on one fixed
  set of *signed log-spaced* bins (:func:`~rcdiag.metrics.bins.signed_log_bin`): magnitudes
  10⁻⁵ … 10⁴ with 8 bins per decade on each side of 0, a central bin |x| < 10⁻⁵ and one overflow
  bin at each end (|x| ≥ 10⁴), each edge on the ℓ sketch's grid. So tiny bf16 noise (|ℓ| ≈ 10⁻³)
  and catastrophic tokens (ℓ ≈ −15) are both resolved, and histograms of different batches add
  up. The histogram of token ℓ is read off the analysis's ℓ sketch
  (:class:`~rcdiag.metrics.sketch.QuantileSketch`), which counts every valid ℓ in buckets of a
  relative width 2⁻⁷ that each lie inside one bin: exact, with no pass of its own over the tokens.
* **Buckets** of valid tokens by rollout probability p = exp(log π_rollout) (fixed edges
  :data:`ROLLOUT_PROB_EDGES`), by position t in the response (t = 1, 2–3, 4–7, …: ⌊log₂ t⌋), and of
  rows by response length n_i (same log₂ buckets). Each bucket keeps Σ1, Σℓ, Σ|ℓ|, Σℓ², Σk3 with
  k3 = e^ℓ − 1 − ℓ (unclamped, as verl's ``k3_kl``) and max |ℓ|; length buckets also keep the row
  count, Σ|S_i| and max |S_i|: mean |S_i| grows like n for a systematic shift and like √n for noise,
  which is why sequence-level ratios explode on long responses.
* **Top sequences**: the ``top_k`` rows with the largest |S_i| and the ``top_k`` rows with the largest
  max_t |ℓ| (ties: the earlier row), with their step, position in the stream, and — when the batch
  carries them (a reader with ``row_details``) — file, row in the file and ``uid``.

Memory is O(bins + buckets + top_k) whatever the dump size; every update is vectorised numpy (the only
Python loops run over bucket tables and the ≤ ``top_k`` candidate rows of a batch).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rcdiag.metrics.bins import (
    HISTOGRAM_GRID_BITS,
    LOG2_BUCKETS,
    ROLLOUT_PROB_EDGES,
    SIGNED_LOG_EDGES,
    laned_rollout_prob_bucket,
    log2_bucket,
    log2_bucket_label,
    position_runs,
    prob_label,
    signed_log_bin,
)
from rcdiag.metrics.buckets import LANES, TOKEN_SUMS, TokenBuckets, TokenValues
from rcdiag.metrics.offpolicy import DEFAULT_VETO_THRESHOLD, row_statistics
from rcdiag.metrics.ragged import F64, I64, RaggedBatch
from rcdiag.metrics.sketch import QuantileSketch
from rcdiag.metrics.token_sums import token_pieces

DEFAULT_TOP_K = 20


class MismatchProfile:
    """Streams batches; then histograms, buckets and top sequences (module docstring).

    Args:
        top_k: how many offending sequences to keep per ranking.
        log_ratios: the analysis's ℓ sketch, fed the same batches (its owner adds them and merges
            it); None: the profile counts ℓ in a sketch of its own.

    Example:
        >>> batch = RaggedBatch(rollout=np.log([0.5, 0.5, 0.9]), old=np.log([0.5, 0.25, 0.9]),
        ...     mask=np.array([True, True, True]), offsets=np.array([0, 2, 3]),
        ...     steps=np.array([0, 1]))
        >>> p = MismatchProfile(top_k=1)
        >>> p.update(batch)
        >>> top = p.result()["top_sequences"]["by_abs_sum"][0]
        >>> top["step"], top["stream_row"], round(top["sum_log_ratio"], 4)  # S = log(0.25/0.5)
        (0, 0, -0.6931)
    """

    def __init__(
        self, top_k: int = DEFAULT_TOP_K, log_ratios: QuantileSketch | None = None
    ) -> None:
        if top_k < 0:
            raise ValueError("top_k must be ≥ 0")
        if log_ratios is not None and log_ratios.mantissa_bits < HISTOGRAM_GRID_BITS:
            raise ValueError(f"the ℓ sketch needs at least {HISTOGRAM_GRID_BITS} mantissa bits")
        self.top_k = top_k
        self._owns_sketch = log_ratios is None
        self.log_ratios = QuantileSketch() if log_ratios is None else log_ratios
        bins = SIGNED_LOG_EDGES.size + 1
        self.seq_sum_histogram = np.zeros(bins, dtype=np.int64)
        self.seq_mean_histogram = np.zeros(bins, dtype=np.int64)
        self.by_rollout_prob = TokenBuckets(len(ROLLOUT_PROB_EDGES) + 1)
        self.by_position = TokenBuckets(LOG2_BUCKETS)
        self.length_sums = {
            name: np.zeros(LOG2_BUCKETS)
            for name in (
                "rows",
                "tokens",
                "sum",
                "abs_sum",
                "k3_sum",
                "abs_seq_sum",
            )
        }
        self.length_abs_seq_max = np.zeros(LOG2_BUCKETS)
        self.rows_seen = 0
        self.empty_rows = 0
        self.valid_tokens = 0
        self._top: dict[str, list[dict[str, Any]]] = {"by_abs_sum": [], "by_max_token": []}

    def update(self, batch: RaggedBatch, row_sums: Mapping[str, F64] | None = None) -> None:
        """Fold one batch of rows into the histograms, buckets and top lists.

        ``row_sums``: the batch's per-row ``valid_tokens``, ``log_ratio``, ``abs_log_ratio``,
        ``k3`` and ``abs_log_ratio_max`` when already computed (the analysis's row statistics).
        """
        rows = batch.rows
        if rows == 0:
            return
        offsets = batch.offsets
        full = batch.log_ratio  # 0 at invalid positions: so are |ℓ|, ℓ² and k3
        # positions: a run of one bucket in one row is contiguous, so one reduction per run
        starts, bucket = position_runs(offsets)
        for low, high in token_pieces(int(offsets[-1])):  # bounded for a long response
            if high > low:
                self._add_tokens(batch, low, high, starts, bucket)

        if row_sums is None:  # the analysis's per-row statistics hold them
            row_sums = row_statistics(batch, full, DEFAULT_VETO_THRESHOLD)
        n, seq_sum, row_abs_sum, row_k3, row_abs_max = (
            row_sums[name]
            for name in ("valid_tokens", "log_ratio", "abs_log_ratio", "k3", "abs_log_ratio_max")
        )
        nonempty = n > 0
        self.empty_rows += int(rows - nonempty.sum())
        s, length = seq_sum[nonempty], n[nonempty]
        bins = self.seq_sum_histogram.size
        self.seq_sum_histogram += np.bincount(signed_log_bin(s), minlength=bins)
        self.seq_mean_histogram += np.bincount(signed_log_bin(s / length), minlength=bins)

        bucket = log2_bucket(length)
        sums = self.length_sums
        # sums past the float64 range (|ℓ| near 1e308) are ±inf, or NaN, as one tally would give
        with np.errstate(over="ignore", invalid="ignore"):
            for name, values in (
                ("rows", np.ones(s.size)),
                ("tokens", length),
                ("sum", s),
                ("abs_sum", row_abs_sum[nonempty]),
                ("k3_sum", row_k3[nonempty]),
                ("abs_seq_sum", np.abs(s)),
            ):
                sums[name] += np.bincount(bucket, weights=values, minlength=LOG2_BUCKETS)
            np.maximum.at(self.length_abs_seq_max, bucket, np.abs(s))

        if self.top_k:
            self._offer("by_abs_sum", batch, np.abs(seq_sum), nonempty, full)
            self._offer("by_max_token", batch, row_abs_max, nonempty, full)
        self.rows_seen += rows

    def _add_tokens(
        self, batch: RaggedBatch, low: int, high: int, starts: I64, bucket: I64
    ) -> None:
        """Fold the tokens ``low:high`` of the batch into the histograms and the buckets (the runs
        of positions :func:`position_runs` gives as ``starts``, ``bucket``: those cut by a piece
        boundary count in both pieces' sums and maxima)."""
        full, mask = batch.log_ratio[low:high], batch.mask[low:high]
        with np.errstate(over="ignore", invalid="ignore"):  # k3 of a huge ℓ is +inf, as in verl
            k3_full = np.expm1(full)
            k3_full -= full
            squares = full * full  # ℓ² beyond 1.8e308 (|ℓ| > 1.3e154) is +inf, its sum too
        abs_full = np.abs(full)
        per_token: TokenValues = (full, abs_full, squares, k3_full, abs_full)
        rollout = batch.rollout[low:high]  # as read: its buckets are exact in any float type
        if not batch.all_valid:
            valid = [v[mask] for v in per_token[:4]]
            per_token = (*valid, valid[1])  # type: ignore[assignment]
            rollout = rollout[mask]
        self.valid_tokens += int(per_token[0].size)
        if self._owns_sketch and per_token[0].size:
            self.log_ratios.add(None, per_token[0], [0])
        cells, tokens = laned_rollout_prob_bucket(rollout, LANES, per_token[0] < 0)
        self.by_rollout_prob.add_tokens(cells, LANES, tokens, per_token)
        ends = np.append(starts[1:], batch.offsets[-1])
        first = int(np.searchsorted(ends, low, side="right"))  # the runs inside low:high
        last = int(np.searchsorted(starts, high, side="left"))
        local = np.maximum(starts[first:last], low) - low
        if local.size:
            with np.errstate(over="ignore", invalid="ignore"):
                run_sums = [np.add.reduceat(v, local) for v in (full, abs_full, squares, k3_full)]
            run_max = np.maximum.reduceat(abs_full, local)
            run_tokens = (
                np.diff(np.append(local, high - low)).astype(np.float64)
                if batch.all_valid
                else np.add.reduceat(mask, local, dtype=np.float64)
            )
            self.by_position.add_runs(bucket[first:last], run_tokens, (*run_sums, run_max))  # type: ignore[arg-type]

    def _offer(
        self,
        ranking: str,
        batch: RaggedBatch,
        row_score: F64,
        nonempty: np.ndarray,
        full: F64,
    ) -> None:
        """Merge this batch's best rows (by ``row_score``) into the ``ranking`` top list."""
        top = self._top[ranking]
        score = np.where(nonempty, row_score, -np.inf)
        floor = top[-1]["score"] if len(top) == self.top_k else -np.inf
        eligible = np.flatnonzero(score > floor)
        if eligible.size > self.top_k:
            # stable: among equal scores the earlier row wins, whatever the batching
            best = np.argsort(-score[eligible], kind="stable")[: self.top_k]
            eligible = eligible[best]
        if eligible.size == 0:
            return
        merged = top + [self._record(batch, int(i), float(score[i]), full) for i in eligible]
        merged.sort(key=lambda r: (-r["score"], r["stream_row"]))
        self._top[ranking] = merged[: self.top_k]

    def _record(self, batch: RaggedBatch, i: int, score: float, full: F64) -> dict[str, Any]:
        start, stop = int(batch.offsets[i]), int(batch.offsets[i + 1])
        values = full[start:stop]
        valid = batch.mask[start:stop]
        n = int(valid.sum())
        worst = int(np.argmax(np.where(valid, np.abs(values), -1.0)))
        with np.errstate(over="ignore"):  # beyond the float64 range: ±inf, as in seq_sum
            total = float(values.sum())
        uid = None if batch.uids is None else batch.uids[i]
        return {
            "score": score,
            "step": int(batch.steps[i]),
            "stream_row": self.rows_seen + i
            if batch.stream_rows is None
            else int(batch.stream_rows[i]),
            "file": batch.source or None,
            "row": None if batch.row_index is None else int(batch.row_index[i]),
            "uid": None if uid is None else str(uid),
            "valid_tokens": n,
            "sum_log_ratio": total,
            "mean_log_ratio": total / n,
            "max_abs_log_ratio": float(abs(values[worst])),
            "worst_token_position": worst + 1,
            "worst_token_log_ratio": float(values[worst]),
        }

    def _length_rows(self) -> list[dict[str, Any]]:
        sums = self.length_sums
        out = []
        for b in range(LOG2_BUCKETS):
            rows = sums["rows"][b]
            if rows == 0:
                continue
            tokens = sums["tokens"][b]
            out.append(
                {
                    "bucket": b,
                    "label": log2_bucket_label(b),
                    "rows": int(rows),
                    "tokens": int(tokens),
                    "mean_log_ratio": float(sums["sum"][b] / tokens),
                    "mean_abs_log_ratio": float(sums["abs_sum"][b] / tokens),
                    "k3": float(sums["k3_sum"][b] / tokens),
                    "mean_abs_seq_log_ratio": float(sums["abs_seq_sum"][b] / rows),
                    "max_abs_seq_log_ratio": float(self.length_abs_seq_max[b]),
                }
            )
        return out

    def merge(self, other: MismatchProfile) -> None:
        """Fold in the profile of other rows of the same dump: counts and sums add, maxima
        compare, and the top lists keep the ``top_k`` best of both (ties: the earlier row in the
        dump), as one profile fed both would."""
        if other.top_k != self.top_k:
            raise ValueError("cannot merge profiles with different top_k")
        for name in ("seq_sum_histogram", "seq_mean_histogram"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        if self._owns_sketch:  # a shared sketch is merged by its owner (the analysis)
            self.log_ratios.merge(other.log_ratios)
        for mine, theirs in (
            (self.by_rollout_prob, other.by_rollout_prob),
            (self.by_position, other.by_position),
        ):
            for name in TOKEN_SUMS:
                mine.sums[name] += theirs.sums[name]
            np.maximum(mine.abs_max, theirs.abs_max, out=mine.abs_max)
        for name, values in other.length_sums.items():
            self.length_sums[name] += values
        np.maximum(self.length_abs_seq_max, other.length_abs_seq_max, out=self.length_abs_seq_max)
        self.rows_seen += other.rows_seen
        self.empty_rows += other.empty_rows
        self.valid_tokens += other.valid_tokens
        for ranking, records in other._top.items():
            merged = self._top[ranking] + records
            merged.sort(key=lambda r: (-r["score"], r["stream_row"]))
            self._top[ranking] = merged[: self.top_k]

    def token_histogram(self) -> I64:
        """Valid tokens per :data:`SIGNED_LOG_EDGES` bin, from the sketch's counts: all the values
        of a bucket lie in the bin of its least magnitude (:data:`HISTOGRAM_GRID_BITS`)."""
        buckets, counts = self.log_ratios.pooled_buckets()
        bins = signed_log_bin(self.log_ratios.least_magnitudes(buckets))
        size = SIGNED_LOG_EDGES.size + 1
        return np.bincount(bins, weights=counts, minlength=size).astype(np.int64)  # exact < 2⁵³

    def result(self) -> dict[str, Any]:
        """The JSON-ready ``profile`` object of the report document (module docstring)."""

        def histogram(counts: I64) -> dict[str, Any]:
            return {"counts": counts.tolist(), "total": int(counts.sum())}

        def strip(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [{k: v for k, v in r.items() if k != "score"} for r in records]

        return {
            "histogram_edges": SIGNED_LOG_EDGES.tolist(),
            "token_log_ratio": histogram(self.token_histogram()),
            "seq_sum_log_ratio": histogram(self.seq_sum_histogram),
            "seq_mean_log_ratio": histogram(self.seq_mean_histogram),
            "by_rollout_prob": self.by_rollout_prob.rows(prob_label),
            "by_position": self.by_position.rows(log2_bucket_label),
            "by_length": self._length_rows(),
            "top_sequences": {name: strip(records) for name, records in self._top.items()},
            "rows": self.rows_seen,
            "empty_rows": self.empty_rows,
            "valid_tokens": self.valid_tokens,
            "top_k": self.top_k,
        }
