"""The type of the padded [B, T] arrays a trainer hands rcdiag (:class:`~rcdiag.torch.Monitor`,
:class:`~rcdiag.io.shards.DumpWriter`, :func:`rcdiag.write_dump`): a torch tensor on any device or
a numpy array.

torch is imported for the type checker only (``TYPE_CHECKING``), so that mypy checks a trainer's
calls while rcdiag itself imports torch nowhere but in :mod:`rcdiag.torch`. Import the names the
same way::

    if TYPE_CHECKING:
        from rcdiag.io.tensors import Padded
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import TypeAlias

    import numpy as np
    import torch  # noqa: TID251 (for the type checker only: never imported at run time)

    Padded: TypeAlias = torch.Tensor | np.ndarray
    """A padded [B, T] array: log-probs (any float dtype) or a mask (bool or integer)."""

__all__ = ["Padded"]
