"""The optional libraries of the trackers, imported when asked for."""

from __future__ import annotations

import importlib
from types import ModuleType

from rcdiag.errors import UsageError

EXTRAS = {
    "tensorboardX": ("--tensorboard", "tensorboard"),
    "mlflow": ("--mlflow", "mlflow"),
    "wandb": ("--wandb", "wandb"),
}
"""Each tracker's library → its flag and the extra that installs it."""


def needed(module: str) -> ModuleType:
    """``module``, imported.

    Raises:
        UsageError: it is not installed: one line naming the flag and the extra.
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        flag, extra = EXTRAS[module]
        raise UsageError(
            f"{flag} needs {module}, which is not installed: pip install 'rcdiag[{extra}]'"
        ) from None
