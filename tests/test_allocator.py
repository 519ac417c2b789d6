"""The pass itself keeps freed memory for the next batch (the API and Ray tasks as the CLI), and
gives it back afterwards in a process that is not the command line."""

from __future__ import annotations

import pytest

from rcdiag.run import allocator
from rcdiag.run.held import WhilePassesRun


class FakeLibc:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []

    def mallopt(self, parameter: int, value: int) -> int:
        self.calls.append(("mallopt", parameter, value))
        return 1

    def malloc_trim(self, pad: int) -> int:
        self.calls.append(("malloc_trim", pad, 0))
        return 1


@pytest.fixture
def libc(monkeypatch: pytest.MonkeyPatch) -> FakeLibc:
    fake = FakeLibc()
    monkeypatch.setattr(allocator, "_libc", fake)
    monkeypatch.setattr(allocator, "PASSES", WhilePassesRun(allocator._hold))
    monkeypatch.setattr(allocator, "_for_process", False)
    return fake


def during() -> list[tuple[str, int, int]]:
    return [("mallopt", k, v) for k, v in allocator.DURING_PASS.items()]


def after() -> list[tuple[str, int, int]]:
    return [*(("mallopt", k, v) for k, v in allocator.AFTER_PASS.items()), ("malloc_trim", 0, 0)]


def test_a_pass_raises_the_thresholds_and_gives_memory_back_after(libc: FakeLibc) -> None:
    with allocator.reused_memory():
        assert libc.calls == during()
    assert libc.calls == during() + after()


def test_nested_passes_set_and_restore_once(libc: FakeLibc) -> None:
    with allocator.reused_memory(), allocator.reused_memory():
        pass
    assert libc.calls == during() + after()


def test_an_error_in_the_pass_still_restores(libc: FakeLibc) -> None:
    with pytest.raises(ValueError), allocator.reused_memory():
        raise ValueError("bad input")
    assert libc.calls == during() + after()


def test_the_command_line_keeps_the_setting(libc: FakeLibc) -> None:
    allocator.keep_freed_memory()
    with allocator.reused_memory():
        pass
    assert libc.calls == during()


def test_without_glibc_nothing_is_called(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allocator, "_libc", False)
    with allocator.reused_memory():
        pass


def test_the_local_engine_runs_inside_it(libc: FakeLibc, tmp_path: object) -> None:
    import numpy as np

    from rcdiag import analyze, write_dump

    rollout = np.linspace(-2, -0.1, 24).reshape(4, 6)
    path = write_dump(f"{tmp_path}/d.parquet", rollout, rollout - 0.01, step=[0, 0, 1, 1])
    analyze(str(path))
    assert libc.calls == during() + after()
