"""Per-step work grows linearly with the number of steps, measured without a clock.

A work meter counts every Python and builtin call and every byte allocated (numpy reports its
buffers to tracemalloc) while a stage runs. Each stage runs on a run of N and of 4N steps: linear work
quadruples, work quadratic in steps (a per-step lookup that rebuilds every step, a prefix median
recomputed per split, a batch that touches every step seen so far) grows sixteenfold.
"""

from __future__ import annotations

import functools
import sys
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, NamedTuple

import numpy as np
import pytest

from rcdiag import write_dump
from rcdiag.assess.recommendation.candidates import preset_configs
from rcdiag.assess.recommendation.ranking import recommend
from rcdiag.assess.verdict.signals import verdict
from rcdiag.checks.defaults import default_rules
from rcdiag.checks.evaluate import CheckInputs, evaluate_rules
from rcdiag.checks.rules import CheckSettings, parse_rule
from rcdiag.commands._analyze_terminal import step_table
from rcdiag.correction.compare import NamedConfig
from rcdiag.metrics.analysis import OffPolicyAnalysis
from rcdiag.metrics.ragged import RaggedBatch
from rcdiag.model import AnalysisResult, ReportDocument
from rcdiag.report.trends import trend_charts
from rcdiag.run.consumers import Pass, Request
from rcdiag.run.dump import DumpSpec
from rcdiag.run.engine import run
from rcdiag.run.results import analysis_result, comparison_result

STEPS = 300
"""The shorter run of most stages; the longer has :data:`GROWTH` times as many steps."""
TREND_STEPS = 1100
"""The shorter run of the rise rules: above Pettitt's permutation test, so both runs take one path."""
GROWTH = 4
MAX_RATIO = 6.0
"""Linear work grows ×4 (n log n ×4.7 at these sizes); work quadratic in steps ×16."""


class Work(NamedTuple):
    calls: int
    allocated: int


def work(stage: Callable[[], Any]) -> Work:
    """Calls made and bytes allocated while ``stage`` runs (allocations between two calls are
    counted by the peak they reach); a first, unmetered run leaves out one-off imports and caches."""
    stage()
    calls = allocated = 0

    def meter(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal calls, allocated
        calls += 1
        current, peak = tracemalloc.get_traced_memory()
        allocated += peak - current
        tracemalloc.reset_peak()

    tracemalloc.start()
    sys.setprofile(meter)
    try:
        stage()
    finally:
        sys.setprofile(None)
        tracemalloc.stop()
    return Work(calls, allocated)


def long_run(steps: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rollout and training log-probs of one 32-token response per step, [steps, 32]: the mismatch
    grows over the steps, with rare catastrophic tokens."""
    rng = np.random.default_rng(seed)
    rollout = -rng.exponential(0.7, (steps, 32))
    noise = np.linspace(0.01, 0.1, steps)[:, None] * rng.standard_normal((steps, 32))
    return rollout, rollout + noise - 10.0 * (rng.random((steps, 32)) < 1e-3)


@dataclass(frozen=True)
class Run:
    """A long run read once (the analysis and one preset) and what the stages consume."""

    done: Pass
    configs: list[NamedConfig]
    result: AnalysisResult
    document: dict[str, Any]
    """``result.to_json()``."""
    whole: RaggedBatch
    """Every step in one batch."""
    batches: list[RaggedBatch]
    """One batch per step, for the first quarter of the steps."""


def _run(directory: Path, steps: int) -> Run:
    rollout, old = long_run(steps)
    path = write_dump(directory / f"run{steps}.parquet", rollout, old, step=np.arange(steps))
    spec = DumpSpec([str(path)])
    configs = preset_configs("latest")[0][:1]
    done = run(spec, Request(configs=configs))
    mask = np.ones(32, dtype=bool)
    whole = RaggedBatch(
        rollout.ravel(),
        old.ravel(),
        np.tile(mask, steps),
        np.arange(steps + 1) * 32,
        np.arange(steps),
    )
    one_per_step = [
        RaggedBatch(rollout[s], old[s], mask, np.array([0, 32]), np.array([s]))
        for s in range(steps // GROWTH)
    ]
    result = analysis_result(done)
    return Run(done, configs, result, result.to_json(), whole, one_per_step)


@pytest.fixture(scope="module")
def run_of(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], Run]:
    """The run of a given number of steps (built once)."""
    directory = tmp_path_factory.mktemp("long_runs")
    return functools.cache(lambda steps: _run(directory, steps))


def _one_batch_per_step(run: Run) -> None:
    """Batches of one step each, into an analysis holding every step: a batch's cost must not
    depend on the steps seen before."""
    analysis = OffPolicyAnalysis()
    analysis.update(run.whole)
    for batch in run.batches:
        analysis.update(batch)


def _rise_rules(run: Run) -> Any:
    rules = [
        *default_rules(set(run.document["overall"]), with_baseline=False),
        parse_rule("rollout_corr/k3_kl.rise <= 0.5"),
        parse_rule("rcdiag/abs_log_ratio_mean.rise <= 0.5"),
    ]
    return evaluate_rules(rules, CheckInputs(run.result), CheckSettings())


STAGES: dict[str, tuple[int, Callable[[Run], Any]]] = {
    "analyze result": (STEPS, lambda r: analysis_result(r.done)),
    "analyze document": (STEPS, lambda r: r.result.to_json()),
    "analyze document read back": (
        STEPS,
        lambda r: ReportDocument.from_json(r.document, source="run.json"),
    ),
    "compare-presets result": (
        STEPS,
        lambda r: comparison_result(r.done, r.configs).to_json(),
    ),
    "check rules (rise: Pettitt and median split)": (TREND_STEPS, _rise_rules),
    "terminal step table": (STEPS, lambda r: step_table(r.result.step_results)),
    "report trends, verdict and advice": (
        STEPS,
        lambda r: (trend_charts(r.document), verdict(r.document), recommend(r.document)),
    ),
    "batches of one step each": (STEPS, _one_batch_per_step),
}


@pytest.mark.parametrize("stage", list(STAGES))
def test_work_grows_linearly_with_steps(run_of: Callable[[int], Run], stage: str) -> None:
    steps, run_stage = STAGES[stage]
    short, long = (run_of(n) for n in (steps, GROWTH * steps))
    less, more = work(lambda: run_stage(short)), work(lambda: run_stage(long))
    assert more.calls < MAX_RATIO * less.calls, (less, more)
    assert more.allocated < MAX_RATIO * less.allocated, (less, more)


def test_the_meter_sees_quadratic_work() -> None:
    def quadratic(n: int) -> None:
        values = np.arange(float(n))
        for t in range(1, n):
            np.sort(values[:t])

    def linear(n: int) -> None:
        np.cumsum(np.arange(float(n)))

    small, large = work(lambda: quadratic(1000)), work(lambda: quadratic(4000))
    assert large.allocated > 10 * small.allocated
    small, large = work(lambda: linear(100_000)), work(lambda: linear(400_000))
    assert large.allocated < MAX_RATIO * small.allocated


@pytest.fixture(scope="module")
def compared_of(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], Pass]:
    """A pass over a long run comparing every preset of the latest dialect (built once)."""
    directory = tmp_path_factory.mktemp("compared_runs")

    def compared(steps: int) -> Pass:
        rollout, old = long_run(steps)
        path = write_dump(directory / f"c{steps}.parquet", rollout, old, step=np.arange(steps))
        return run(DumpSpec([str(path)]), Request(configs=preset_configs("latest")[0]))

    return functools.cache(compared)


def test_per_step_comparison_is_built_for_all_steps_at_once(
    compared_of: Callable[[int], Pass],
) -> None:
    """The figures and metrics of every configuration at every step are computed in a few
    calls per configuration (not per step) and held as columns: memory near 8 bytes a value,
    not a dictionary per step and configuration."""
    short, long = compared_of(STEPS), compared_of(GROWTH * STEPS)
    configs = preset_configs("latest")[0]

    def build(done: Pass) -> Any:
        return comparison_result(done, configs)

    less, more = work(lambda: build(short)), work(lambda: build(long))
    assert more.calls < 1.3 * less.calls, (less, more)  # per-step work would quadruple them
    result = build(long)
    values = sum(len(p.steps[0].summary) + len(p.steps[0].metrics or {}) for p in result.presets)
    tracemalloc.start()
    try:
        kept = build(long)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert kept.presets
    # columns: 9 bytes a value (float64 and a flag); a dictionary per step would need over 60
    assert held < 20 * values * GROWTH * STEPS, (held, values)
