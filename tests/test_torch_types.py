"""A trainer's type checker checks the tensors it hands rcdiag: the log-prob and mask arguments of
:mod:`rcdiag.torch` and :func:`rcdiag.write_dump` are ``torch.Tensor | numpy.ndarray``, not ``Any``
(torch imported for the type checker only)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CALLER = """
import numpy as np
import torch

import rcdiag
from rcdiag.torch import DumpWriter, Monitor, offpolicy_metrics, preset_metrics

rollout = torch.zeros(2, 3)
old = np.zeros((2, 3))
mask = torch.ones(2, 3, dtype=torch.bool)
offpolicy_metrics(rollout, old, mask)
preset_metrics("decoupled_token_is", rollout, old, mask)
Monitor().update(rollout, old)
DumpWriter("dump").write(0, rollout, old, mask)
rcdiag.write_dump("dump.parquet", rollout, old, mask)
offpolicy_metrics("rollout", old)  # wrong: line 16
Monitor().update(rollout, [[0.0, 0.0, 0.0]])  # wrong: line 17
preset_metrics("decoupled_token_is", rollout, old, response_mask=3)  # wrong: line 18
DumpWriter("dump").write(0, rollout, {"old": 1.0})  # wrong: line 19
rcdiag.write_dump("dump.parquet", 1.5, old)  # wrong: line 20
"""


@pytest.mark.slow
def test_mypy_checks_the_tensors_a_caller_passes(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    api = pytest.importorskip("mypy.api")
    caller = tmp_path / "caller.py"
    caller.write_text(CALLER)
    old_path = os.environ.get("MYPYPATH")
    os.environ["MYPYPATH"] = str(ROOT)  # rcdiag's own source, as an installed copy reads
    try:
        out, err, _ = api.run(
            ["--cache-dir", str(tmp_path / "cache"), "--no-error-summary", str(caller)]
        )
    finally:
        if old_path is None:
            del os.environ["MYPYPATH"]
        else:
            os.environ["MYPYPATH"] = old_path
    errors = [line for line in out.splitlines() if ": error: " in line]
    lines = sorted({int(re.split(r":", line)[1]) for line in errors})
    assert lines == [16, 17, 18, 19, 20], out + err
    assert all("arg-type" in line for line in errors), out
