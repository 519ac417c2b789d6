"""MismatchProfile against a plain-Python reference that shares no code with it."""

from __future__ import annotations

import bisect
import math

import numpy as np
import pytest

from rcdiag.metrics.analysis import OffPolicyAnalysis
from rcdiag.metrics.bins import (
    LOG2_BUCKETS,
    MAGNITUDE_EDGES,
    ROLLOUT_PROB_EDGES,
    SIGNED_LOG_EDGES,
    laned_rollout_prob_bucket,
    log2_bucket_label,
    position_runs,
    rollout_prob_bucket,
    signed_log_bin,
)
from rcdiag.metrics.offpolicy import row_statistics
from rcdiag.metrics.profile import MismatchProfile
from rcdiag.metrics.ragged import RaggedBatch
from rcdiag.metrics.sketch import QuantileSketch

MAGNITUDES = [10.0 ** (k / 8) for k in range(-40, 33)]
"""The nominal bin magnitudes, before the code puts them on the sketch's grid."""


def reference_bin(x: float) -> int:
    """The bin by its definition: 73 ± (how many edge magnitudes are ≤ |x|); NaN in the last."""
    edges = MAGNITUDE_EDGES.tolist()
    if math.isnan(x):
        return 2 * len(edges)
    below = sum(1 for m in edges if m <= abs(x))
    return len(edges) - below if x < 0 else len(edges) + below


def make_rows(seed: int, rows: int = 60) -> list[dict]:
    """Ragged rows with masked NaN holes, empty rows, heavy tails and one catastrophic token."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(rows):
        n = int(rng.integers(0, 300)) if i % 11 else 0
        rollout = -rng.exponential(1.0, n)
        ell = rng.standard_t(3, n) * 0.05
        if n and i % 7 == 3:
            ell[rng.integers(0, n)] = -12.0
        mask = rng.random(n) > 0.05
        old = rollout + ell
        old[~mask] = np.nan  # garbage under the mask must be ignored
        out.append({"rollout": rollout, "old": old, "mask": mask, "step": i % 4, "uid": f"u{i}"})
    return out


def to_batch(rows: list[dict], start: int = 0, ids: bool = False) -> RaggedBatch:
    lengths = [r["rollout"].size for r in rows]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    arrays = {
        "rollout": np.concatenate([r["rollout"] for r in rows]),
        "old": np.concatenate([r["old"] for r in rows]),
        "mask": np.concatenate([r["mask"] for r in rows]).astype(bool),
        "offsets": offsets,
        "steps": np.array([r["step"] for r in rows], dtype=np.int64),
    }
    if not ids:
        return RaggedBatch(**arrays)
    return RaggedBatch(
        **arrays,
        source="dump.parquet",
        row_index=np.arange(start, start + len(rows), dtype=np.int64),
        uids=np.array([r["uid"] for r in rows], dtype=object),
    )


def reference(rows: list[dict], top_k: int) -> dict:
    """Loops over rows and tokens, one value at a time."""
    bins = SIGNED_LOG_EDGES.size + 1
    token_hist, seq_hist, mean_hist = [0] * bins, [0] * bins, [0] * bins
    prob: dict[int, list[float]] = {}
    position: dict[int, list[float]] = {}
    length: dict[int, list[tuple[int, float]]] = {}
    records = []
    for index, r in enumerate(rows):
        total, n, worst, worst_at = 0.0, 0, -1.0, 0
        for t, valid in enumerate(r["mask"]):
            if not valid:
                continue
            ell = float(r["old"][t] - r["rollout"][t])
            token_hist[reference_bin(ell)] += 1
            p = math.exp(r["rollout"][t])
            prob.setdefault(bisect.bisect_right(ROLLOUT_PROB_EDGES, p), []).append(ell)
            position.setdefault(min(int(math.log2(t + 1)), LOG2_BUCKETS - 1), []).append(ell)
            total += ell
            n += 1
            if abs(ell) > worst:
                worst, worst_at = abs(ell), t
        if n == 0:
            continue
        seq_hist[reference_bin(total)] += 1
        mean_hist[reference_bin(total / n)] += 1
        length.setdefault(min(int(math.log2(n)), LOG2_BUCKETS - 1), []).append((n, total))
        records.append((index, r["step"], abs(total), worst, worst_at + 1, n, total))
    by_sum = sorted(records, key=lambda x: (-x[2], x[0]))[:top_k]
    by_max = sorted(records, key=lambda x: (-x[3], x[0]))[:top_k]
    return {
        "token_hist": token_hist,
        "seq_hist": seq_hist,
        "mean_hist": mean_hist,
        "prob": prob,
        "position": position,
        "length": length,
        "by_sum": by_sum,
        "by_max": by_max,
    }


def all_valid(rows: list[dict]) -> list[dict]:
    """The same rows with every position valid (the dump without padding takes other paths)."""
    out = []
    for r in rows:
        old = np.where(r["mask"], r["old"], r["rollout"] - 0.01)
        out.append({**r, "old": old, "mask": np.ones(r["mask"].size, dtype=bool)})
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("batch_rows", [7, 60])
@pytest.mark.parametrize("padding", [True, False])
@pytest.mark.parametrize("shared_row_sums", [False, True])
def test_profile_matches_reference(
    seed: int, batch_rows: int, padding: bool, shared_row_sums: bool
) -> None:
    rows = make_rows(seed) if padding else all_valid(make_rows(seed))
    profile = MismatchProfile(top_k=5)
    for start in range(0, len(rows), batch_rows):
        batch = to_batch(rows[start : start + batch_rows])
        # the pipeline hands the analysis's row statistics over instead of summing again
        sums = row_statistics(batch, batch.log_ratio, 1e-4) if shared_row_sums else None
        profile.update(batch, sums)
    got = profile.result()
    want = reference(rows, 5)

    assert got["token_log_ratio"]["counts"] == want["token_hist"]
    assert got["seq_sum_log_ratio"]["counts"] == want["seq_hist"]
    assert got["seq_mean_log_ratio"]["counts"] == want["mean_hist"]
    assert got["rows"] == len(rows)
    assert got["empty_rows"] == sum(1 for r in rows if not r["mask"].any())

    for key, buckets in (("by_rollout_prob", want["prob"]), ("by_position", want["position"])):
        assert [b["bucket"] for b in got[key]] == sorted(buckets)
        for b in got[key]:
            values = np.array(buckets[b["bucket"]])
            assert b["tokens"] == values.size
            assert b["mean_log_ratio"] == pytest.approx(values.mean(), rel=1e-9, abs=1e-12)
            assert b["mean_abs_log_ratio"] == pytest.approx(np.abs(values).mean(), rel=1e-9)
            assert b["std_log_ratio"] == pytest.approx(values.std(), rel=1e-6, abs=1e-12)
            assert b["k3"] == pytest.approx(np.mean(np.expm1(values) - values), rel=1e-9)
            assert b["max_abs_log_ratio"] == pytest.approx(np.abs(values).max())
    for b in got["by_length"]:
        members = want["length"][b["bucket"]]
        assert b["rows"] == len(members)
        assert b["tokens"] == sum(n for n, _ in members)
        assert b["mean_abs_seq_log_ratio"] == pytest.approx(
            np.mean([abs(s) for _, s in members]), rel=1e-9
        )
        assert b["label"] == log2_bucket_label(b["bucket"])

    top = got["top_sequences"]
    assert [r["stream_row"] for r in top["by_abs_sum"]] == [x[0] for x in want["by_sum"]]
    assert [r["stream_row"] for r in top["by_max_token"]] == [x[0] for x in want["by_max"]]
    for record, expected in zip(top["by_max_token"], want["by_max"], strict=True):
        assert record["step"] == expected[1]
        assert record["max_abs_log_ratio"] == pytest.approx(expected[3])
        assert record["worst_token_position"] == expected[4]
        assert record["valid_tokens"] == expected[5]
        assert record["sum_log_ratio"] == pytest.approx(expected[6])
        assert record["uid"] is None and record["file"] is None and record["row"] is None


def test_batching_does_not_change_the_result() -> None:
    rows = make_rows(5)
    whole, pieces = MismatchProfile(top_k=8), MismatchProfile(top_k=8)
    whole.update(to_batch(rows))
    for start in range(0, len(rows), 3):
        pieces.update(to_batch(rows[start : start + 3]))
    a, b = whole.result(), pieces.result()
    assert a["token_log_ratio"] == b["token_log_ratio"]
    assert a["top_sequences"] == b["top_sequences"]
    for key in ("by_rollout_prob", "by_position", "by_length"):
        for x, y in zip(a[key], b[key], strict=True):
            assert x.keys() == y.keys()
            assert x["label"] == y["label"]
            for k in x.keys() - {"label"}:
                assert x[k] == pytest.approx(y[k], rel=1e-12, abs=1e-15)


def test_ids_are_used_when_the_batch_carries_them() -> None:
    rows = make_rows(3, rows=20)
    profile = MismatchProfile(top_k=3)
    profile.update(to_batch(rows[:10], start=0, ids=True))
    profile.update(to_batch(rows[10:], start=10, ids=True))
    for record in profile.result()["top_sequences"]["by_abs_sum"]:
        assert record["uid"] == f"u{record['stream_row']}"
        assert record["row"] == record["stream_row"]
        assert record["file"] == "dump.parquet"


def test_memory_is_bounded_by_top_k() -> None:
    profile = MismatchProfile(top_k=4)
    for seed in range(5):
        profile.update(to_batch(make_rows(seed)))
    top = profile.result()["top_sequences"]
    assert len(top["by_abs_sum"]) == 4 and len(top["by_max_token"]) == 4
    scores = [abs(r["sum_log_ratio"]) for r in top["by_abs_sum"]]
    assert scores == sorted(scores, reverse=True)


def test_identical_policies_fill_only_the_zero_bin() -> None:
    rollout = np.log(np.array([0.5, 0.25, 0.9, 0.1]))
    batch = RaggedBatch(
        rollout=rollout,
        old=rollout.copy(),
        mask=np.ones(4, dtype=bool),
        offsets=np.array([0, 3, 4]),
        steps=np.array([0, 0]),
    )
    profile = MismatchProfile()
    profile.update(batch)
    result = profile.result()
    zero_bin = SIGNED_LOG_EDGES.size // 2
    counts = result["token_log_ratio"]["counts"]
    assert counts[zero_bin] == 4 and sum(counts) == 4
    assert all(b["mean_abs_log_ratio"] == 0.0 for b in result["by_rollout_prob"])


def test_empty_and_all_masked_batches() -> None:
    profile = MismatchProfile()
    empty = RaggedBatch(
        rollout=np.zeros(0),
        old=np.zeros(0),
        mask=np.zeros(0, dtype=bool),
        offsets=np.array([0]),
        steps=np.zeros(0, dtype=np.int64),
    )
    profile.update(empty)
    masked = RaggedBatch(
        rollout=np.array([np.nan, -1.0]),
        old=np.array([0.0, np.nan]),
        mask=np.zeros(2, dtype=bool),
        offsets=np.array([0, 2]),
        steps=np.array([3]),
    )
    profile.update(masked)
    result = profile.result()
    assert result["valid_tokens"] == 0 and result["empty_rows"] == 1
    assert result["top_sequences"] == {"by_abs_sum": [], "by_max_token": []}
    assert result["by_length"] == [] and result["by_position"] == []


def test_negative_top_k_is_rejected() -> None:
    with pytest.raises(ValueError, match="top_k"):
        MismatchProfile(top_k=-1)


def test_docstring_examples() -> None:
    import doctest

    import rcdiag.metrics.profile

    result = doctest.testmod(rcdiag.metrics.profile)
    assert result.attempted > 0 and result.failed == 0


def test_edges_are_the_nominal_magnitudes_on_the_sketch_grid() -> None:
    grid = QuantileSketch()
    assert grid.mantissa_bits == 7
    for edge, nominal in zip(MAGNITUDE_EDGES.tolist(), MAGNITUDES, strict=True):
        assert abs(edge / nominal - 1) <= 2.0**-8  # the nearest grid point
        # an edge is where a sketch bucket begins: the float just below it is in another bucket
        keys = grid._bucket_keys(np.array([edge, np.nextafter(edge, 0.0), -edge]))
        assert keys[0] != keys[1]
        assert grid.least_magnitudes(keys[[0, 2]]).tolist() == [edge, -edge]
    assert (
        SIGNED_LOG_EDGES.tolist() == [-m for m in MAGNITUDE_EDGES[::-1]] + MAGNITUDE_EDGES.tolist()
    )
    assert MAGNITUDE_EDGES[[0, 40, 48, 56, 64]].tolist()[1:] == [1.0, 10.0, 100.0, 1000.0]


def edge_values(rng: np.random.Generator) -> np.ndarray:
    """Every edge of either sign, the floats next to each, zeros, subnormals and the extremes,
    and values of every magnitude."""
    edges = np.concatenate([MAGNITUDE_EDGES, -MAGNITUDE_EDGES])
    return np.concatenate(
        [
            edges,
            np.nextafter(edges, np.inf),
            np.nextafter(edges, -np.inf),
            [0.0, -0.0, 1e300, -1e300, 5e-324, -5e-324, 1.7976931348623157e308],
            rng.standard_normal(20_000) * 10 ** rng.uniform(-9, 7, 20_000),
        ]
    )


def test_bins_follow_their_definition_on_and_next_to_every_edge() -> None:
    rng = np.random.default_rng(3)
    values = edge_values(rng)
    special = np.array([np.inf, -np.inf, np.nan])
    for sample in (values, special):
        want = [reference_bin(v) for v in sample.tolist()]
        assert signed_log_bin(sample).tolist() == want
    # any float64 at all: random bit patterns (subnormals, huge values, ±inf, NaNs of every payload)
    bits = rng.integers(0, 2**64, 200_000, dtype=np.uint64, endpoint=False)
    anything = bits.view(np.float64)
    with np.errstate(invalid="ignore"):
        below = (MAGNITUDE_EDGES[None, :] <= np.abs(anything)[:, None]).sum(axis=1)
        want_any = np.where(np.isnan(anything), 146, np.where(anything < 0, 73 - below, 73 + below))
    assert (signed_log_bin(anything) == want_any).all()


@pytest.mark.parametrize("shared", [False, True])
def test_token_histogram_read_off_the_sketch_is_exact(shared: bool) -> None:
    """ℓ exactly on, just above and just below every edge, of either sign (rollout 0, so
    ℓ = old), in batches: the histogram equals binning every value."""
    rng = np.random.default_rng(11)
    bits = rng.integers(0, 2**64, 50_000, dtype=np.uint64, endpoint=False).view(np.float64)
    values = np.concatenate([edge_values(rng), bits[np.isfinite(bits)]])
    rng.shuffle(values)
    analysis = OffPolicyAnalysis()
    profile = MismatchProfile(top_k=0, log_ratios=analysis.sketch if shared else None)
    for part in np.array_split(values, 7):
        batch = RaggedBatch(
            rollout=np.zeros(part.size),
            old=part,
            mask=np.ones(part.size, dtype=bool),
            offsets=np.array([0, part.size // 2, part.size]),
            steps=np.array([0, 1]),
        )
        if shared:
            analysis.update(batch)
        profile.update(batch)
    want = np.bincount([reference_bin(v) for v in values.tolist()], minlength=147)
    assert profile.result()["token_log_ratio"]["counts"] == want.tolist()


def test_a_coarser_sketch_is_refused() -> None:
    with pytest.raises(ValueError, match="mantissa bits"):
        MismatchProfile(log_ratios=QuantileSketch(mantissa_bits=5))


def test_rollout_prob_buckets_follow_their_edges() -> None:
    rng = np.random.default_rng(3)
    bits = rng.integers(0, 2**64, 200_000, dtype=np.uint64, endpoint=False)
    anything = bits.view(np.float64)
    log_edges = np.log(np.array(ROLLOUT_PROB_EDGES)).tolist()
    probs = np.concatenate([log_edges, np.nextafter(log_edges, -np.inf), -rng.exponential(3, 5000)])
    want = [bisect.bisect_right(log_edges, v) for v in probs.tolist()]
    assert rollout_prob_bucket(probs).tolist() == want
    # every float64: the count of edges ≤ x, NaN counting none
    with np.errstate(invalid="ignore"):
        counted = (anything[:, None] >= np.array(log_edges)[None, :]).sum(axis=1)
    assert (rollout_prob_bucket(anything) == counted).all()
    # float32 and float16 log-probs as read: the buckets of their float64 values, on and next to
    # every edge as each type rounds it
    for dtype in (np.float32, np.float16):
        near = np.array(log_edges).astype(dtype)
        with np.errstate(over="ignore", invalid="ignore"):  # huge values become ±inf
            wide = anything[:50_000].astype(dtype)
        narrow = np.concatenate(
            [
                near,
                np.nextafter(near, dtype(-np.inf)),
                np.nextafter(near, dtype(np.inf)),
                wide,
                -rng.exponential(3, 5000).astype(dtype),
            ]
        )
        assert (rollout_prob_bucket(narrow) == rollout_prob_bucket(narrow.astype(np.float64))).all()


@pytest.mark.parametrize("size", [0, 1, 3, 4, 5, 8, 11, 1000, 4099])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_laned_buckets_and_their_token_counts(size: int, dtype: type) -> None:
    rng = np.random.default_rng(size)
    log_edges = np.log(np.array(ROLLOUT_PROB_EDGES))
    pool = np.concatenate([log_edges, np.nextafter(log_edges, -np.inf), -rng.exponential(3, size)])
    values = rng.choice(pool, size).astype(dtype)
    want = [bisect.bisect_right(log_edges.tolist(), float(v)) for v in values.tolist()]
    for lanes in (1, 4):
        cells, tokens = laned_rollout_prob_bucket(values, lanes)
        assert (cells // lanes).tolist() == want
        lane = cells % lanes
        # a run of four consecutive tokens takes four lanes, the same lanes in every run
        assert all(
            len(set(lane[i : i + lanes].tolist())) == min(lanes, size - i)
            for i in range(0, size, lanes)
        )
        assert (lane[lanes:] == lane[:-lanes]).all() if size > lanes else True
        assert tokens.tolist() == np.bincount(want, minlength=11).tolist()
        flags = rng.random(size) < 0.5
        split, split_tokens = laned_rollout_prob_bucket(values, lanes, flags)
        assert (split // lanes).tolist() == [
            2 * b + f for b, f in zip(want, flags.tolist(), strict=True)
        ]
        assert (split % lanes == lane).all() and (split_tokens == tokens).all()
    with pytest.raises(ValueError, match="lanes"):
        laned_rollout_prob_bucket(values, 2)


@pytest.mark.parametrize("lengths", [[5, 0, 2], [0, 0], [1], [1 << 21, 3], [0, 17, 0, 64, 1]])
def test_position_runs_cover_each_row_in_log2_buckets(lengths: list[int]) -> None:
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    starts, buckets = position_runs(offsets)
    want_starts, want_buckets = [], []
    for row, n in enumerate(lengths):
        for position in range(1, n + 1):
            bucket = min(position.bit_length() - 1, LOG2_BUCKETS - 1)
            if not want_buckets or position == 1 or bucket != want_buckets[-1]:
                want_starts.append(int(offsets[row]) + position - 1)
                want_buckets.append(bucket)
    assert starts.tolist() == want_starts
    assert buckets.tolist() == want_buckets
