"""The statistics behind `rcdiag check`: slope, trend, bootstrap, baseline decision, evaluation."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from typing import Any

import numpy as np
import pytest

from rcdiag.checks.baseline import compare
from rcdiag.checks.evaluate import CheckInputs, check_document, evaluate_rules, passed
from rcdiag.checks.outputs import junit_xml, markdown
from rcdiag.checks.rules import CheckSettings, parse_rule
from rcdiag.metrics.analysis import OffPolicyAnalysis
from rcdiag.metrics.bootstrap import PoissonBootstrap, poisson_weights, stream_key
from rcdiag.metrics.growth import least_squares_slope
from rcdiag.metrics.ragged import RaggedBatch
from rcdiag.model import AnalysisResult, Diagnosis, RunOptions, SourceInfo, StepResult

# ---------------------------------------------------------------- slope and trend


def test_slope_matches_numpy_polyfit_and_skips_nan() -> None:
    rng = np.random.default_rng(0)
    steps = np.array([0, 1, 2, 5, 9, 10], dtype=float)
    values = 0.3 * steps + rng.normal(0, 0.1, steps.size)
    expected = np.polyfit(steps, values, 1)[0]
    assert least_squares_slope(steps, values) == pytest.approx(expected, rel=1e-12)
    with_gap = np.append(values, np.nan)
    assert least_squares_slope(np.append(steps, 11), with_gap) == pytest.approx(expected)
    assert least_squares_slope([3], [1.0]) is None
    assert least_squares_slope([3, 3], [1.0, 2.0]) is None


# ---------------------------------------------------------------- bootstrap


def _batch(rng: np.random.Generator, rows: int, noise: float = 0.05, step: int = 0) -> RaggedBatch:
    lengths = rng.integers(0, 30, rows)  # some empty rows
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    rollout = -rng.exponential(1.0, offsets[-1])
    old = rollout + noise * rng.standard_normal(offsets[-1])
    mask = rng.random(offsets[-1]) > 0.1
    return RaggedBatch(rollout, old, mask, offsets, np.full(rows, step))


def _split(batch: RaggedBatch, at: int) -> list[RaggedBatch]:
    keep = np.arange(batch.rows) < at
    return [batch.select_rows(keep), batch.select_rows(~keep)]


def test_poisson_weights_have_the_poisson_1_distribution() -> None:
    w = poisson_weights(np.arange(50_000), 20, stream_key(5, 0))
    counts = np.bincount(w.astype(int).ravel(), minlength=4)[:4] / w.size
    expected = [math.exp(-1) / math.factorial(k) for k in range(4)]
    np.testing.assert_allclose(counts, expected, atol=2e-3)
    assert not np.array_equal(w, poisson_weights(np.arange(50_000), 20, stream_key(5, 1)))


def test_bootstrap_is_reproducible_and_independent_of_batching() -> None:
    batch = _batch(np.random.default_rng(0), 300)
    one = PoissonBootstrap(replicates=50, seed=3)
    one.update(batch)
    again = PoissonBootstrap(replicates=50, seed=3)
    again.update(batch)
    split = PoissonBootstrap(replicates=50, seed=3)
    for part in _split(batch, 117):
        split.update(part)
    other = PoissonBootstrap(replicates=50, seed=4)
    other.update(batch)
    a, b, c, d = (x.replicate_metrics() for x in (one, again, split, other))
    k3 = "rollout_corr/k3_kl"
    assert np.array_equal(a[k3], b[k3]), "same seed, same batches: identical"
    np.testing.assert_allclose(a[k3], c[k3], rtol=1e-12)
    assert not np.allclose(a[k3], d[k3])
    assert np.isnan(a["rcdiag/abs_log_ratio_max"]).all(), "maxima are not bootstrapped"
    assert np.isnan(a["rcdiag/log_ratio_p50"]).all(), "quantiles are not bootstrapped"


def test_bootstrap_spread_matches_a_classical_row_bootstrap() -> None:
    """Reference: resample rows with replacement (numpy only) and recompute k3_kl and ess_seq."""
    rng = np.random.default_rng(1)
    batch = _batch(rng, 400)
    boot = PoissonBootstrap(replicates=400, seed=0)
    boot.update(batch)
    reps = boot.replicate_metrics()
    point = OffPolicyAnalysis().consume([batch]).overall()

    ell = np.where(batch.mask, batch.old - batch.rollout, 0.0)
    row = np.repeat(np.arange(batch.rows), batch.lengths)
    k3_sum = np.bincount(row, np.expm1(ell) - ell, batch.rows)
    valid = np.bincount(row, batch.mask, batch.rows)
    seq_w = np.exp(np.bincount(row, ell, batch.rows))
    classical_k3, classical_ess = [], []
    for _ in range(1000):
        pick = rng.integers(0, batch.rows, batch.rows)
        classical_k3.append(k3_sum[pick].sum() / (valid[pick].sum() + 1e-8))
        w = seq_w[pick][valid[pick] > 0]
        classical_ess.append(w.sum() ** 2 / (w.size * (w**2).sum()))
    for name, classical in (
        ("rollout_corr/k3_kl", classical_k3),
        ("rcdiag/ess_seq", classical_ess),
    ):
        assert np.mean(reps[name]) == pytest.approx(point[name], rel=0.05)
        assert np.std(reps[name]) == pytest.approx(np.std(classical), rel=0.2), name


# ---------------------------------------------------------------- baseline decision


def _reps(center: float, spread: float, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(center, spread, 200)


@pytest.mark.parametrize(
    ("current", "direction", "regressed"),
    [
        (1.0, "higher", False),
        (1.05, "higher", False),  # within the 10 % tolerance
        (1.3, "higher", True),
        (0.7, "higher", False),  # better is never a regression
        (0.7, "lower", True),
        (1.3, "lower", False),
        (1.3, "either", True),
        (0.7, "either", True),
    ],
)
def test_decision_rule_directions(current: float, direction: Any, regressed: bool) -> None:
    drift = compare(
        current,
        1.0,
        direction,
        abs_tol=0.0,
        rel_tol=0.1,
        confidence=0.95,
        current_replicates=_reps(current, 0.02, 1),
        baseline_replicates=_reps(1.0, 0.02, 2),
    )
    assert drift.regressed is regressed
    assert drift.tolerance == pytest.approx(0.1)
    assert drift.interval is not None and drift.interval[0] < current - 1.0 < drift.interval[1]


def test_decision_needs_the_interval_to_clear_the_tolerance() -> None:
    noisy = compare(
        1.3,
        1.0,
        "higher",
        abs_tol=0.0,
        rel_tol=0.1,
        confidence=0.95,
        current_replicates=_reps(1.3, 0.3, 1),
        baseline_replicates=_reps(1.0, 0.3, 2),
    )
    assert not noisy.regressed, "a 30 % rise inside the noise is not drift"
    bare = compare(1.3, 1.0, "higher", abs_tol=0.0, rel_tol=0.1, confidence=0.95)
    assert bare.interval is None and bare.regressed, "no replicates: tolerance only"
    flipped = compare(-1.3, 1.0, "higher", abs_tol=0.5, rel_tol=0.0, confidence=0.95, absolute=True)
    assert (flipped.current, flipped.tolerance, flipped.regressed) == (1.3, 0.5, False)


# ---------------------------------------------------------------- evaluation and outputs


def _document(values: list[float | None], overall: float = 0.5) -> AnalysisResult:
    return AnalysisResult(
        rcdiag_version="test",
        dialect="latest",
        source=SourceInfo(("d.parquet",), 10, 100, 100, len(values), (), 0, 0, None),
        options=RunOptions(veto_threshold=None, effective_veto_threshold=1e-4),
        overall={"m": overall, "n": None},
        step_results=tuple(StepResult(10 + 2 * i, 1, 10, {"m": v}) for i, v in enumerate(values)),
        checks=(),
        diagnosis=Diagnosis("healthy"),
    )


@pytest.mark.parametrize(
    ("text", "value", "step", "status"),
    [
        ("m.overall < 1", 0.5, None, "pass"),
        ("m.mean_step < 1", 1.2, None, "fail"),
        ("m.max_step <= 3", 4.0, 14, "fail"),
        ("m.min_step >= -1", -2.0, 16, "fail"),
        ("m.last_step < 1", 1.0, 18, "fail"),
        ("warn: m.last_step < 1", 1.0, 18, "warn"),
        ("m.slope > 0", -0.3, None, "fail"),
        ("abs(m.min_step) <= 2", 2.0, 16, "pass"),
        ("n.overall < 1", None, None, "skipped"),
        ("m.rise < 0.5", 0.0, None, "pass"),  # 5 steps of noise: tested, no rise
    ],
)
def test_aggregations_on_hand_made_steps(
    text: str, value: float | None, step: int | None, status: str
) -> None:
    document = _document([3.0, 0.0, 4.0, -2.0, 1.0, None])
    (result,) = evaluate_rules([parse_rule(text)], CheckInputs(document), CheckSettings())
    assert result.status == status
    assert result.step == step
    if value is None:
        assert result.value is None
    else:
        assert result.value == pytest.approx(value)


def _junit_check(root: ET.Element) -> None:
    """Structure of the Jenkins junit-10.xsd (elements, required and allowed attributes)."""
    allowed = {
        "testsuites": ({"name", "time", "tests", "failures", "errors"}, set()),
        "testsuite": (
            {"name", "tests", "failures", "errors", "group", "time", "skipped", "timestamp"}
            | {"hostname", "id", "package", "file", "log", "url"},
            {"name", "tests", "failures", "errors"},
        ),
        "testcase": ({"name", "time", "classname", "group"}, {"name"}),
        "failure": ({"type", "message"}, set()),
        "skipped": ({"type", "message"}, set()),
        "properties": (set(), set()),
        "property": ({"name", "value"}, {"name", "value"}),
        "system-out": (set(), set()),
    }
    assert root.tag == "testsuites"
    for element in root.iter():
        names, required = allowed[element.tag]
        assert set(element.attrib) <= names, element.tag
        assert required <= set(element.attrib), element.tag


def test_check_document_junit_and_markdown() -> None:
    document = _document([1.0] * 8 + [3.0] * 8)
    rules = [
        parse_rule(t)
        for t in ("m.overall < 1", "m.rise <= 0.5", "warn: m.max_step < 1", "n.overall < 1")
    ]
    results = evaluate_rules(rules, CheckInputs(document), CheckSettings())
    assert [r.status for r in results] == ["pass", "fail", "warn", "skipped"]
    assert results[1].step == 26 and results[1].value == pytest.approx(2.0)
    assert not passed(results) and passed(results[:1] + results[2:])
    report = check_document(CheckInputs(document), results, CheckSettings())
    assert report["counts"] == {"pass": 1, "fail": 1, "warn": 1, "skipped": 1}
    assert (report["passed"], report["exit_code"]) == (False, 1)

    root = ET.fromstring(junit_xml(report, "2026-01-01T00:00:00"))
    _junit_check(root)
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "rcdiag check"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [r.name for r in rules]
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("4", "1", "1")
    assert [c.find("failure") is not None for c in cases] == [False, True, False, False]
    assert [c.find("skipped") is not None for c in cases] == [False, False, False, True]
    assert "m.rise <= 0.5: value 2 violates <= 0.5" in cases[1].find("failure").get("message")

    text = markdown(report)
    assert text.startswith("### rcdiag check: FAILED: 4 rules")
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(table) == 2 + 4
    assert table[3].startswith("| FAIL | `m.rise <= 0.5` | 2 | <= 0.5 | a step change at step 26")
