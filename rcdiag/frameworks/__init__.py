"""The metric Rosetta: other RL frameworks' mismatch metrics, corrections and configuration keys.

One module per framework (its sources, the metrics it logs as components, its correction modes) and
the registry (:mod:`rcdiag.frameworks.registry`); docs/frameworks.md documents each formula with the
file it was read from. The registry is imported when first named here, so that a command that
compares no other framework does not import them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rcdiag.frameworks.base import Framework, Preset, Source, Translation
    from rcdiag.frameworks.registry import FRAMEWORKS, parse_frameworks

__all__ = ["FRAMEWORKS", "Framework", "Preset", "Source", "Translation", "parse_frameworks"]


def __getattr__(name: str) -> Any:
    if name in ("FRAMEWORKS", "parse_frameworks"):
        from rcdiag.frameworks import registry

        return getattr(registry, name)
    if name in ("Framework", "Preset", "Source", "Translation"):
        from rcdiag.frameworks import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
