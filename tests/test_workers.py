"""Two sets of consumers fed alternate batches (rcdiag/run/workers.py): the dealing is fixed, a
failure on either thread is raised without hanging, and a pass over two sets gives the numbers of
one set, the same on every run."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rcdiag import write_dump
from rcdiag.assess.recommendation.candidates import preset_configs
from rcdiag.metrics.ragged import RaggedBatch
from rcdiag.run import engine
from rcdiag.run.consumers import Request
from rcdiag.run.dump import DumpSpec
from rcdiag.run.results import analysis_result, comparison_result
from rcdiag.run.workers import feed
from tests.documents import assert_documents_close


def _batch(k: int) -> RaggedBatch:
    return RaggedBatch(
        rollout=np.zeros(1),
        old=np.zeros(1),
        mask=np.ones(1, dtype=bool),
        offsets=np.array([0, 1]),
        steps=np.array([k]),
    )


def test_batches_are_dealt_in_turn_the_second_set_on_another_thread() -> None:
    seen: list[list[tuple[int, str]]] = [[], []]

    def consumer(j: int) -> Any:
        return lambda b: seen[j].append((int(b.steps[0]), threading.current_thread().name))

    ticks: list[int] = []
    feed((_batch(k) for k in range(7)), [consumer(0), consumer(1)], lambda: ticks.append(1))
    assert [k for k, _ in seen[0]] == [0, 2, 4, 6]
    assert [k for k, _ in seen[1]] == [1, 3, 5]
    assert {name for _, name in seen[0]} == {threading.current_thread().name}
    assert {name for _, name in seen[1]} == {"rcdiag-consumers"}
    assert len(ticks) == 7


@pytest.mark.parametrize("failing", [0, 1])
def test_a_failure_on_either_thread_is_raised_once_both_stop(failing: int) -> None:
    handled: list[int] = []

    def consumer(j: int) -> Any:
        def update(batch: RaggedBatch) -> None:
            if j == failing and int(batch.steps[0]) >= 2:
                raise ValueError(f"consumer {j} failed")
            handled.append(int(batch.steps[0]))

        return update

    with pytest.raises(ValueError, match=f"consumer {failing} failed"):
        feed((_batch(k) for k in range(50)), [consumer(0), consumer(1)])
    assert len(handled) < 50
    assert not [t for t in threading.enumerate() if t.name == "rcdiag-consumers"]


def test_the_analysis_alone_runs_one_set() -> None:
    from rcdiag.run.workers import consumer_threads

    assert consumer_threads(analysis_only=True) == 1
    assert Request().analysis_only
    assert not Request(profile_top_k=3).analysis_only


def test_a_reader_failure_stops_the_worker() -> None:
    def batches() -> Any:
        yield _batch(0)
        yield _batch(1)
        raise OSError("the file went away")

    with pytest.raises(OSError, match="went away"):
        feed(batches(), [lambda b: None, lambda b: None])
    assert not [t for t in threading.enumerate() if t.name == "rcdiag-consumers"]


def _close(a: Any, b: Any) -> None:
    assert_documents_close(a, b, rel=1e-9, abs_tol=1e-300, nan_equal=True)


def _documents(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    configs = preset_configs("latest")[0]
    done = engine.run(DumpSpec([str(path)]), Request(configs=configs, profile_top_k=3))
    analysis = analysis_result(done).to_json()
    comparison = comparison_result(done, configs).to_json()
    for document in (analysis, comparison):
        document.pop("rcdiag_version", None)
    return analysis, comparison


def test_two_sets_give_the_numbers_of_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    for step in range(6):
        rollout = -rng.exponential(0.8, (40, 50))
        old = rollout + rng.normal(0, 0.05 * (1 + step), rollout.shape)
        write_dump(tmp_path / f"step={step}" / "part.parquet", rollout, old, step=step)
    monkeypatch.setattr(engine, "consumer_threads", lambda analysis_only: 2)
    two = _documents(tmp_path)
    assert _documents(tmp_path) == two  # the same numbers on every run
    monkeypatch.setattr(engine, "consumer_threads", lambda analysis_only: 1)
    one = _documents(tmp_path)
    for a, b in zip(one, two, strict=True):
        _close(a, b)


def test_passes_with_other_frameworks_read_half_batches() -> None:
    """Their consumers hold the most per token: two sets in half batches hold what one set does."""
    from rcdiag.io.reader import BATCH_TOKENS
    from rcdiag.run.plans import framework_modes, frameworks_of

    verl = Request(configs=preset_configs("latest")[0])
    modes = Request(configs=framework_modes("trl"))
    metrics = Request(frameworks=frameworks_of("slime", "frameworks"))
    assert not verl.other_frameworks and modes.other_frameworks and metrics.other_frameworks
    assert engine.batch_tokens(verl, 2) == BATCH_TOKENS
    assert engine.batch_tokens(modes, 2) == engine.batch_tokens(metrics, 2) == BATCH_TOKENS // 2
    assert engine.batch_tokens(modes, 1) == BATCH_TOKENS
