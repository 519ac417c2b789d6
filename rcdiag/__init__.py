"""rcdiag: offline diagnostics for rollout/training log-prob mismatch, as verl's Rollout Correction
computes it."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

SCHEMA_VERSION = 2
"""Version of the JSON documents rcdiag writes (docs/report.md, "Results JSON")."""

__all__ = ["__version__", "write_dump"]


def write_dump(*args: Any, **kwargs: Any) -> Any:
    """Write a dump from padded [B, T] arrays; see :func:`rcdiag.io.writer.write_dump`."""
    from rcdiag.io.writer import write_dump as _write_dump

    return _write_dump(*args, **kwargs)
