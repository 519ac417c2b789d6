"""A pass runs OpenBLAS on one thread, in the library as on the command line, and gives the
process's thread count back when the last pass ends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from rcdiag.run import blas
from rcdiag.run.held import WhilePassesRun


class FakeOpenBlas:
    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.sets: list[int] = []

    def get(self) -> int:
        return self.threads

    def set(self, threads: int) -> None:
        self.sets.append(threads)
        self.threads = threads


@pytest.fixture
def openblas(monkeypatch: pytest.MonkeyPatch) -> FakeOpenBlas:
    fake = FakeOpenBlas(threads=4)
    monkeypatch.setattr(blas, "_openblas", lambda: blas._ThreadCount(fake.get, fake.set))
    monkeypatch.setattr(blas, "PASSES", WhilePassesRun(blas._hold))
    return fake


def test_a_pass_runs_on_one_thread_and_restores_the_count(openblas: FakeOpenBlas) -> None:
    with blas.one_blas_thread():
        assert openblas.threads == 1
    assert openblas.threads == 4 and openblas.sets == [1, 4]


def test_nested_passes_and_an_error_set_and_restore_once(openblas: FakeOpenBlas) -> None:
    with pytest.raises(ValueError), blas.one_blas_thread(), blas.one_blas_thread():
        raise ValueError("bad input")
    assert openblas.sets == [1, 4]


def test_a_process_already_on_one_thread_is_not_touched(openblas: FakeOpenBlas) -> None:
    openblas.threads = 1  # the command line: OPENBLAS_NUM_THREADS=1 before numpy loaded
    with blas.one_blas_thread():
        pass
    assert openblas.sets == []


def test_without_openblas_nothing_is_called(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blas, "_openblas", lambda: None)
    with blas.one_blas_thread():
        pass


@pytest.mark.parametrize("engine", ["local", "local-cached"])
def test_the_bootstrap_runs_its_products_on_one_thread(
    openblas: FakeOpenBlas, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine: str
) -> None:
    from rcdiag import baseline, write_dump
    from rcdiag.metrics import bootstrap

    seen: list[int] = []
    weighted_sums = bootstrap.weighted_sums

    def watched(weights: np.ndarray, table: np.ndarray) -> np.ndarray:
        seen.append(openblas.threads)
        return weighted_sums(weights, table)

    monkeypatch.setattr(bootstrap, "weighted_sums", watched)
    rollout = np.linspace(-2, -0.1, 24).reshape(4, 6)
    path = write_dump(tmp_path / "d.parquet", rollout, rollout - 0.01, step=[0, 0, 1, 1])
    cache = {"cache": str(tmp_path / "cache")} if engine == "local-cached" else {}
    baseline(str(path), replicates=20, **cache)  # type: ignore[arg-type]
    assert seen and set(seen) == {1}
    assert openblas.threads == 4


@pytest.fixture
def real_openblas() -> Iterator[blas._ThreadCount]:
    """numpy's own OpenBLAS on two threads for the test, its count restored after."""
    found = blas._openblas()
    if found is None:
        pytest.skip("numpy is not linked with OpenBLAS here")
    before = found.get()
    found.set(2)
    yield found
    found.set(before)


def test_numpy_openblas_is_found_and_set(real_openblas: blas._ThreadCount) -> None:
    assert real_openblas.get() == 2
    with blas.one_blas_thread():
        assert real_openblas.get() == 1
        assert float(np.ones((64, 64)) @ np.ones(64) @ np.ones(64)) == 64.0 * 64
    assert real_openblas.get() == 2


def test_openblas_is_found_in_the_process_maps_too(
    real_openblas: blas._ThreadCount, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """numpy built against a system OpenBLAS ships none beside it: the library is then found
    among the ones mapped into the process."""
    shipped = [Path(p).name for p in blas._loaded_openblas()]
    monkeypatch.setattr(np, "__file__", str(tmp_path / "numpy" / "__init__.py"))
    mapped = [Path(p).name for p in blas._loaded_openblas()]
    assert set(shipped) <= set(mapped) and mapped
