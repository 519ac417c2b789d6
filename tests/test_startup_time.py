"""Start-up stays small beside pyarrow's own: ``rcdiag --help`` and ``rcdiag analyze`` on a 20-row
dump, timed against ``python -c "import pyarrow"`` in the same test, as ratios.

Each command runs several times, interleaved with the baseline, and the fastest run of each is
compared, so that a loaded 2-core machine slows both alike. The bounds are generous; what they
catch is a start-up that imports every command again (``--help`` at ~3× pyarrow's import before
the commands were made lazy) or a large new import on analyze's path; the module tests below say
exactly what each path imports.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

RUNS = 5
ROUNDS = 3
HELP_LIMIT = 2.0
"""``rcdiag --help`` ≤ this × ``import pyarrow`` (measured 0.8–1.1×; 3× when it loaded every
command)."""
ANALYZE_LIMIT = 3.5
"""``rcdiag analyze`` of a 20-row dump ≤ this × ``import pyarrow`` (measured 1.9–2.3× on a loaded
2-core machine once typer's pydantic, pyarrow.compute, the frameworks, the comparison and the
trackers left its path; 2.5–3.7× before; 4–6× when pyarrow's conversion imported pandas)."""

RCDIAG = [sys.executable, "-c", "from rcdiag.cli import main; main()"]


def fastest(commands: dict[str, list[str]]) -> dict[str, float]:
    """The fastest of :data:`RUNS` wall times of each command, the commands interleaved."""
    best = dict.fromkeys(commands, float("inf"))
    for _ in range(RUNS):
        for name, command in commands.items():
            start = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            best[name] = min(best[name], time.perf_counter() - start)
    return best


@pytest.fixture(scope="module")
def tiny_dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import numpy as np

    from rcdiag import write_dump

    rng = np.random.default_rng(0)
    rollout = -rng.exponential(0.7, (20, 32))
    old = rollout + rng.normal(0, 0.01, rollout.shape)
    path = tmp_path_factory.mktemp("tiny") / "tiny.parquet"
    return write_dump(path, rollout, old, step=np.repeat([0, 1], 10))


@pytest.mark.slow
@pytest.mark.xdist_group("startup_time")
def test_start_up_is_a_small_multiple_of_importing_pyarrow(tiny_dump: Path) -> None:
    commands = {
        "import pyarrow": [sys.executable, "-c", "import pyarrow"],
        "help": [*RCDIAG, "--help"],
        "analyze": [*RCDIAG, "analyze", str(tiny_dump), "-q"],
    }
    best: dict[str, float] = {}
    for _ in range(ROUNDS):  # a burst of load elsewhere fails one round, a regression every one
        times = fastest(commands)
        ratios = {name: seconds / times["import pyarrow"] for name, seconds in times.items()}
        best = {name: min(best.get(name, ratio), ratio) for name, ratio in ratios.items()}
        if best["help"] <= HELP_LIMIT and best["analyze"] <= ANALYZE_LIMIT:
            return
    assert best["help"] <= HELP_LIMIT, best
    assert best["analyze"] <= ANALYZE_LIMIT, best


def modules_after(*args: str) -> set[str]:
    code = (
        "import sys\nfrom rcdiag.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
    )
    return set(done.stdout.splitlines()[-1].split())


def test_help_imports_no_command_nor_numpy_nor_pyarrow() -> None:
    loaded = modules_after("--help")
    commands = {
        m for m in loaded if m.startswith("rcdiag.commands.") and m != "rcdiag.commands._help"
    }
    assert commands <= {"rcdiag.commands._lazy"}
    assert not {"numpy", "pyarrow", "rcdiag.api"} & loaded


def test_analyze_imports_only_its_own_command(tiny_dump: Path) -> None:
    loaded = modules_after("analyze", str(tiny_dump), "-q")
    others = {"compare_presets", "presets", "report", "recommend", "check", "baseline", "synth"}
    assert not {f"rcdiag.commands.{name}" for name in others} & loaded
    assert "rcdiag.commands.analyze" in loaded
    assert "pandas" not in loaded
    # what analyze does not need: typer's validation (pydantic), pyarrow.compute (read through
    # the arrays' offsets), every framework's module, the preset comparison, the trackers and
    # asyncio (remote reads only)
    unneeded = {
        "pydantic",
        "pyarrow.compute",
        "rcdiag.frameworks.registry",
        "rcdiag.correction.compare",
        "rcdiag.trackers",
        "asyncio",
    }
    assert not unneeded & loaded
