"""Shared test set-up."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# pytest runs with --import-mode=importlib, which does not put tests/ on sys.path; the test modules
# import the independent reference implementation as a plain top-level module ``reference``.
_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)


# Where tools that the tests start keep their caches and settings (W&B's artifact cache and
# settings, IPython's profile of the notebook kernel): this session's temporary directory, so that
# a test run leaves nothing in the home directory.
_TOOL_DIRS = ("WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR", "IPYTHONDIR")


@pytest.fixture(scope="session", autouse=True)
def _tool_dirs_in_the_session_tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    root = tmp_path_factory.mktemp("tool-dirs")
    saved = {name: os.environ.get(name) for name in _TOOL_DIRS}
    for name in _TOOL_DIRS:
        os.environ[name] = str(root / name.lower())
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


_HYPOTHESIS_HOME: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    """Hypothesis keeps its cache in a temporary directory, removed at the end (by default it
    writes ``.hypothesis/`` into the working directory while the tests are collected)."""
    try:
        from hypothesis.configuration import set_hypothesis_home_dir
    except ImportError:  # pragma: no cover - hypothesis is a test dependency
        return
    _HYPOTHESIS_HOME.append(tempfile.mkdtemp(prefix="rcdiag-hypothesis-"))
    set_hypothesis_home_dir(_HYPOTHESIS_HOME[-1])


def pytest_unconfigure(config: pytest.Config) -> None:
    for directory in _HYPOTHESIS_HOME:
        shutil.rmtree(directory, ignore_errors=True)
