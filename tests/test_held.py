"""A setting held while passes run: applied once by the first, undone once by the last, whether
passes nest, fail or run on several threads."""

from __future__ import annotations

import threading

import pytest

from rcdiag.run.held import WhilePassesRun


@pytest.fixture
def log() -> list[str]:
    return []


@pytest.fixture
def setting(log: list[str]) -> WhilePassesRun:
    def apply() -> object:
        log.append("set")
        return lambda: log.append("undone")

    return WhilePassesRun(apply)  # type: ignore[arg-type]


def test_nested_passes_apply_and_undo_once(setting: WhilePassesRun, log: list[str]) -> None:
    with setting.held():
        with setting.held():
            assert log == ["set"]
        assert log == ["set"]
    assert log == ["set", "undone"]


def test_an_error_in_the_pass_still_undoes(setting: WhilePassesRun, log: list[str]) -> None:
    with pytest.raises(ValueError), setting.held():
        raise ValueError("bad input")
    assert log == ["set", "undone"]


def test_passes_in_threads_undo_when_the_last_ends(setting: WhilePassesRun, log: list[str]) -> None:
    inside, release = threading.Barrier(3), threading.Event()

    def one_pass() -> None:
        with setting.held():
            inside.wait()
            release.wait()

    threads = [threading.Thread(target=one_pass) for _ in range(2)]
    for thread in threads:
        thread.start()
    inside.wait()
    assert log == ["set"]
    release.set()
    for thread in threads:
        thread.join()
    assert log == ["set", "undone"]


def test_nothing_to_undo_and_a_later_pass_applies_again() -> None:
    calls: list[str] = []
    nothing = WhilePassesRun(lambda: calls.append("looked") or None)
    with nothing.held():
        pass
    with nothing.held():
        pass
    assert calls == ["looked", "looked"]
