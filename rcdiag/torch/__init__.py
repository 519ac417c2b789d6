"""rcdiag inside a training loop (``pip install 'rcdiag[torch]'``; docs/trainer.md).

* :func:`offpolicy_metrics`, :func:`preset_metrics` and :class:`Monitor`: the metrics ``rcdiag
  analyze`` and ``rcdiag compare-presets`` give, with the same names and values, from the padded
  [B, T] tensors a trainer holds (any device).
* :class:`DumpWriter`: one dump shard per step and rank (``step=N/rank-R.parquet``), written on a
  background thread, for the command-line tools to read later.
"""

from __future__ import annotations

try:
    import torch  # noqa: F401  (rcdiag.torch is for trainers, which have torch)
except ImportError as exc:
    raise ImportError(
        "rcdiag.torch needs PyTorch, which the base install of rcdiag leaves out: "
        "pip install 'rcdiag[torch]' (or install torch yourself)"
    ) from exc

from rcdiag.io.shards import DumpWriter
from rcdiag.torch.monitor import Monitor, offpolicy_metrics, preset_metrics

__all__ = ["DumpWriter", "Monitor", "offpolicy_metrics", "preset_metrics"]
