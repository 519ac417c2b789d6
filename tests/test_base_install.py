"""The base install (`pip install rcdiag`, no extras) has no torch, polars, plotly.py or pandas:
every command and every module but rcdiag.torch works without them, exports included, and what
needs an extra says which one to install."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXTRAS = ("torch", "polars", "plotly", "pandas")
"""Not in the base install (pyproject's optional dependencies)."""
POISON = f"""
import importlib.abc, sys
class NotInstalled(importlib.abc.MetaPathFinder):  # as if the extras were not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {EXTRAS!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, NotInstalled())
"""


def test_every_base_dependency_is_imported_and_the_heavy_ones_are_extras() -> None:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = [re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0].lower() for d in project["dependencies"]]
    assert not set(EXTRAS) & set(base)
    assert [d.split(">")[0] for d in project["optional-dependencies"]["torch"]] == ["torch"]
    sources = "\n".join(p.read_text() for p in (ROOT / "rcdiag").rglob("*.py"))
    for dist in base:
        module = {"pyyaml": "yaml"}.get(dist, dist)
        found = re.search(rf"^\s*(import|from) {module}\b", sources, re.MULTILINE)
        assert found, f"{dist} is a dependency that no module of rcdiag imports"


def run_in_base_install(code: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", POISON + code, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def test_every_module_but_rcdiag_torch_imports_in_the_base_install() -> None:
    code = (
        "import importlib, pkgutil, rcdiag\n"
        "names = [m.name for m in pkgutil.walk_packages(rcdiag.__path__, 'rcdiag.')]\n"
        "names = [n for n in names if n != 'rcdiag.torch' and not n.startswith('rcdiag.torch.')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "print(len(names))\n"
    )
    done = run_in_base_install(code)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 50


@pytest.mark.parametrize(
    "command",
    [
        ["analyze", "sample_data/bf16.parquet", "--json", "{out}/a.json"],
        ["compare-presets", "sample_data/bf16.parquet", "-p", "decoupled_geo_rs"],
        ["report", "sample_data/bf16.parquet", "-o", "{out}/r.html"],
        ["check", "sample_data/bf16.parquet", "-r", "rollout_corr/kl.overall < 1"],
        ["analyze", "sample_data/drift", "--csv", "{out}/s.csv", "--parquet", "{out}/s.parquet"],
        ["compare-presets", "sample_data/bf16.parquet", "--csv", "{out}/p.csv"],
        ["recommend", "sample_data/bf16.parquet"],
    ],
)
def test_commands_run_in_the_base_install(tmp_path: Path, command: list[str]) -> None:
    args = [a.format(out=tmp_path) for a in command]
    done = run_in_base_install("from rcdiag.cli import main; main()", *args)
    assert done.returncode == 0, done.stderr
    assert "Error" not in done.stderr and "Traceback" not in done.stderr


def test_tables_come_from_pyarrow_and_steps_names_the_polars_extra() -> None:
    code = (
        "import rcdiag\n"
        "result = rcdiag.analyze('sample_data/drift')\n"
        "table = result.to_arrow()\n"
        "assert table.num_rows == len(result.step_results) and table.column_names[0] == 'step'\n"
        "result.steps\n"
    )
    done = run_in_base_install(code)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: steps is a polars DataFrame"), done.stderr
    assert "pip install 'rcdiag[polars]'" in last and "result.to_arrow()" in last


def test_dumps_are_written_without_torch(tmp_path: Path) -> None:
    code = (
        "import numpy as np, rcdiag\n"
        "from rcdiag.io.shards import DumpWriter\n"
        "with DumpWriter(sys.argv[1]) as w:\n"
        "    w.write(0, np.full((2, 3), -1.0), np.full((2, 3), -1.2), np.ones((2, 3), bool))\n"
        "zeros = np.zeros((1, 2))\n"
        "rcdiag.write_dump(sys.argv[1] + '/step=1/part.parquet', zeros, zeros, step=1)\n"
        "from rcdiag.cli import main; sys.argv[1:] = ['analyze', sys.argv[1], '-q']; main()\n"
    )
    done = run_in_base_install(code, str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "step=0" / "rank-0.parquet").is_file()


def test_rcdiag_torch_names_the_extra_to_install() -> None:
    done = run_in_base_install("import rcdiag.torch")
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: rcdiag.torch needs PyTorch"), done.stderr
    assert "pip install 'rcdiag[torch]'" in last
