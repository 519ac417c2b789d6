"""Padded trainer batches, and the command line's JSON to compare rcdiag.torch's metrics with."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

import torch
from typer.testing import CliRunner

from rcdiag.cli import app


def batch(seed: int, rows: int = 12, width: int = 40, dtype: torch.dtype = torch.float32) -> tuple:
    """A padded batch with what a real one holds: ragged lengths, a masked hole, an empty row,
    mostly small mismatch, a catastrophic token and a log ratio beyond verl's ±20 clamp."""
    g = torch.Generator().manual_seed(seed)
    rollout = torch.log(torch.rand(rows, width, generator=g, dtype=torch.float64) * 0.98 + 0.01)
    noise = 0.05 * torch.randn(rows, width, generator=g, dtype=torch.float64)
    old = rollout + noise - noise.square() / 2
    lengths = torch.randint(1, width + 1, (rows,), generator=g)
    lengths[3] = 0
    mask = torch.arange(width)[None, :] < lengths[:, None]
    mask[5, 1] = False  # a hole inside a response
    old[1, 0] = rollout[1, 0] - 12.0  # ρ = e^-12 < 1e-4: catastrophic
    old[2, 0] = rollout[2, 0] + 25.0  # beyond the clamp
    rollout[~mask] = torch.nan  # garbage under the mask is never read
    return rollout.to(dtype), old.to(dtype), mask.to(torch.int64)


def cli_json(*args: object) -> dict:
    out = Path(str(args[-1]))
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())


def assert_same(ours: Mapping[str, float], cli: Mapping[str, float | None]) -> None:
    """Same names in the same order; equal values (1e-12 relative); JSON's null is not finite."""
    assert list(ours) == list(cli)
    for name, expected in cli.items():
        value = ours[name]
        if expected is None:
            assert not math.isfinite(value), name
        else:
            assert math.isclose(value, expected, rel_tol=1e-12, abs_tol=0.0), (
                name,
                value,
                expected,
            )
