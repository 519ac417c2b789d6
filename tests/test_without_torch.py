"""The base install has no torch: every command and module but rcdiag.torch works without it, and
rcdiag.torch says how to get it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
POISON = "import sys; sys.modules['torch'] = None  # any `import torch` now raises ImportError\n"


def test_every_base_dependency_is_imported_and_torch_is_an_extra() -> None:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = [re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0].lower() for d in project["dependencies"]]
    assert "torch" not in base
    assert [d.split(">")[0] for d in project["optional-dependencies"]["torch"]] == ["torch"]
    sources = "\n".join(p.read_text() for p in (ROOT / "rcdiag").rglob("*.py"))
    for dist in base:
        module = {"pyyaml": "yaml"}.get(dist, dist)
        found = re.search(rf"^\s*(import|from) {module}\b", sources, re.MULTILINE)
        assert found, f"{dist} is a dependency that no module of rcdiag imports"


def run_without_torch(code: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", POISON + code, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def test_every_module_but_rcdiag_torch_imports_without_torch() -> None:
    code = (
        "import importlib, pkgutil, rcdiag\n"
        "names = [m.name for m in pkgutil.walk_packages(rcdiag.__path__, 'rcdiag.')]\n"
        "names = [n for n in names if n != 'rcdiag.torch' and not n.startswith('rcdiag.torch.')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "print(len(names))\n"
    )
    done = run_without_torch(code)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 50


@pytest.mark.parametrize(
    "command",
    [
        ["analyze", "sample_data/bf16.parquet", "--json", "{out}/a.json"],
        ["compare-presets", "sample_data/bf16.parquet", "-p", "decoupled_geo_rs"],
        ["report", "sample_data/bf16.parquet", "-o", "{out}/r.html"],
    ],
)
def test_commands_run_without_torch(tmp_path: Path, command: list[str]) -> None:
    args = [a.format(out=tmp_path) for a in command]
    done = run_without_torch("from rcdiag.cli import main; main()", *args)
    assert done.returncode == 0, done.stderr


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
    done = run_without_torch(code, str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "step=0" / "rank-0.parquet").is_file()


def test_rcdiag_torch_names_the_extra_to_install() -> None:
    done = run_without_torch("import rcdiag.torch")
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: rcdiag.torch needs PyTorch"), done.stderr
    assert "pip install 'rcdiag[torch]'" in last
