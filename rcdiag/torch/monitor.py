"""verl's off-policy metrics and any rollout-correction configuration's metrics of a trainer's
padded [B, T] batch, computed by the same code as ``rcdiag analyze`` and ``compare-presets``
(docs/trainer.md).

Contract: for a batch, :meth:`Monitor.metrics` equals the ``overall`` object of ``rcdiag analyze
--json`` on the dump :class:`~rcdiag.io.shards.DumpWriter` (or :func:`~rcdiag.write_dump`) writes of
the same tensors, name for name and value for value (up to float64 summation order, 1e-12
relative), and :meth:`Monitor.preset_metrics` equals that configuration's ``overall`` object of
``rcdiag compare-presets --json``. Formulas: docs/metrics.md and docs/correction.md; in short, with
ℓ = old − rollout on valid tokens (mask ≠ 0), ``rollout_corr/kl`` = −Σℓ / V, ``k3_kl`` =
Σ(eˡ − ℓ − 1) / V, ``chi2_token`` = Σe^{2·clamp(ℓ, ±20)} / V − 1 over the V valid tokens, and
``chi2_seq`` = mean over rows of e^{2·clamp(Σ_row ℓ, ±20)} − 1.

How: the tensors are copied to host memory (one device→host copy of each log-prob tensor in its
own dtype, and of the mask), widened to float64 and handed to the numpy core. That copy is the
cost on the training side; the metrics are then O(B·T) numpy work on the CPU.

A value verl cannot compute (a batch without a valid token, where verl raises) is ``nan``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rcdiag.argument_checks import check_monitor
from rcdiag.correction.compare import NamedConfig, PresetComparison
from rcdiag.correction.config import ConfigError, parse_config
from rcdiag.correction.loading import files_dialect
from rcdiag.correction.presets import PRESETS
from rcdiag.dialects import DEFAULT_DIALECT, Dialect
from rcdiag.io.writer import padded_arrays
from rcdiag.metrics.analysis import AnalyzeOptions, OffPolicyAnalysis
from rcdiag.metrics.ragged import from_padded

if TYPE_CHECKING:
    from rcdiag.io.tensors import Padded

__all__ = ["Monitor", "offpolicy_metrics", "preset_metrics"]


def _host(x: Any) -> np.ndarray:
    """A host numpy view of a torch tensor (any device; bfloat16/float16 widened to float32,
    exactly) or of anything numpy takes."""
    if hasattr(x, "detach"):  # a torch.Tensor
        t = x.detach().to("cpu")
        if str(t.dtype) in ("torch.bfloat16", "torch.float16"):
            t = t.float()
        return t.numpy()
    return np.asarray(x)


def _floats(values: Mapping[str, float | None]) -> dict[str, float]:
    return {k: float("nan") if v is None else float(v) for k, v in values.items()}


class Monitor:
    """Accumulates a step's batches (micro-batches, or one call for the whole batch); then gives
    verl's off-policy metrics and each chosen configuration's metrics of everything added since
    the last :meth:`reset`.

    Args:
        presets: verl preset names of the dialect (``rcdiag presets`` lists them).
        configs: custom configurations, name → verl's ``algorithm.rollout_correction`` keys.
        dialect: ``latest`` or ``legacy``; ``None``: the one the configs' keys imply, else latest
            (as ``compare-presets`` decides).
        veto_threshold: τ of the veto metrics (``analyze --veto-threshold``).
        drop_nonfinite: mask NaN/±inf log-probs at valid tokens (``analyze --drop-nonfinite``)
            instead of raising ``ValueError``.

    Raises:
        ConfigError: an unknown preset, or a configuration verl would reject.

    Example:
        >>> import numpy as np
        >>> m = Monitor(["decoupled_token_is"])
        >>> m.update(np.log([[0.5, 0.5]]), np.log([[0.5, 0.25]]), np.array([[1, 1]]))
        >>> round(m.metrics()["rollout_corr/kl"], 6)  # mean of rollout − old = log(2) / 2
        0.346574
        >>> m.preset_metrics("decoupled_token_is")["rollout_corr/rollout_is_mean"]  # (1 + 0.5) / 2
        0.75
    """

    def __init__(
        self,
        presets: Sequence[str] = (),
        configs: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        dialect: Dialect | None = None,
        veto_threshold: float | None = None,
        drop_nonfinite: bool = False,
    ) -> None:
        presets, configs = check_monitor(locals())
        given = f"dialect={{dialect!r}} was given to {type(self).__name__}"
        by_name = {Path(name): config for name, config in configs.items()}
        resolved: Dialect = files_dialect(by_name, dialect, given) or dialect or DEFAULT_DIALECT
        registry = PRESETS[resolved]
        named: list[NamedConfig] = []
        for name in presets:
            if name not in registry:
                raise ConfigError(f"unknown {resolved} preset {name!r}: {', '.join(registry)}")
            config = registry[name].config
            named.append(NamedConfig(name, config, parse_config(config, resolved)))
        for name, config in configs.items():
            try:
                named.append(NamedConfig(name, config, parse_config(config, resolved)))
            except ConfigError as exc:
                raise ConfigError(f"configuration {name!r}: {exc}") from None
        self.dialect: Dialect = resolved
        self.options = AnalyzeOptions(resolved, veto_threshold)
        self.drop_nonfinite = drop_nonfinite
        self._configs = named
        self.reset()

    @property
    def configurations(self) -> list[str]:
        """The names of the configurations, presets first."""
        return [c.name for c in self._configs]

    def reset(self) -> None:
        """Forget every batch (call once per step when one monitor serves every step)."""
        self._analysis = OffPolicyAnalysis(self.options)
        self._comparison = (
            PresetComparison(self._configs, base=self._analysis.stats) if self._configs else None
        )

    def update(
        self,
        rollout_log_probs: Padded,
        old_log_probs: Padded,
        response_mask: Padded | None = None,
    ) -> None:
        """Add a padded batch: [B, T] torch tensors (any device, any float dtype) or numpy arrays.

        Args:
            rollout_log_probs: log π_rollout of the sampled tokens, [B, T].
            old_log_probs: log π_train of the same tokens (verl's ``old_log_probs``), [B, T].
            response_mask: [B, T] bool or integer mask; ``None``: every position is valid.

        Raises:
            ValueError: arrays that are not [B, T] floats with a mask of the same shape, or a
                non-finite log-prob at a valid token (unless ``drop_nonfinite``).
        """
        rollout, old, mask = padded_arrays(
            _host(rollout_log_probs),
            _host(old_log_probs),
            None if response_mask is None else _host(response_mask),
        )
        rollout = np.asarray(rollout, dtype=np.float64)
        old = np.asarray(old, dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            finite = bool(np.isfinite(np.add.reduce(old - rollout, axis=None)))
            bad = None if finite else ~np.isfinite(old - rollout) & mask
        if bad is not None and bad.any():
            if not self.drop_nonfinite:
                row, position = (int(i[0]) for i in np.nonzero(bad))
                raise ValueError(
                    f"row {row}: a log-prob at position {position}, a valid token, is not finite "
                    f"(rollout {rollout[row, position]}, old {old[row, position]}); mask it, or "
                    "pass drop_nonfinite=True"
                )
            mask = mask & ~bad
        batch = from_padded(rollout, old, mask)
        self._analysis.update(batch)
        if self._comparison is not None:
            self._comparison.update(batch)

    def metrics(self) -> dict[str, float]:
        """Every metric ``rcdiag analyze`` reports overall, of the batches since :meth:`reset`:
        verl's ``rollout_corr/…`` (with the two veto metrics in the legacy dialect) and rcdiag's
        ``rcdiag/…`` (docs/metrics.md)."""
        return _floats(self._analysis.overall())

    def preset_metrics(self, name: str) -> dict[str, float]:
        """Every metric verl logs for configuration ``name`` (verl's off-policy metrics, then the
        configuration's IS and rejection metrics; docs/correction.md), of the batches since
        :meth:`reset`."""
        if self._comparison is None or name not in self._comparison.configs:
            raise KeyError(
                f"{name!r} is not a configuration of this monitor: {self.configurations}"
            )
        values = self._comparison.metrics(name)
        if not values:  # no valid token (verl raises): the names of one valid token, all nan
            probe = PresetComparison([self._comparison.configs[name]])
            one = np.zeros((1, 1))
            probe.update(from_padded(one, one, np.ones((1, 1), dtype=bool)))
            values = dict.fromkeys(probe.metrics(name))
        return _floats(values)


def offpolicy_metrics(
    rollout_log_probs: Padded,
    old_log_probs: Padded,
    response_mask: Padded | None = None,
    *,
    dialect: Dialect = DEFAULT_DIALECT,
    veto_threshold: float | None = None,
    drop_nonfinite: bool = False,
) -> dict[str, float]:
    """verl's off-policy metrics and rcdiag's diagnostics of one padded [B, T] batch, as
    ``rcdiag analyze --json`` reports them overall on a dump of that batch (see :class:`Monitor`).

    Example:
        >>> import numpy as np
        >>> m = offpolicy_metrics(np.log([[0.5, 0.5, 0.9]]), np.log([[0.5, 0.25, 0.1]]),
        ...                       np.array([[1, 1, 0]]))  # the third token is padding
        >>> round(m["rollout_corr/kl"], 6), m["rcdiag/response_length_mean"]
        (0.346574, 2.0)
    """
    monitor = Monitor(dialect=dialect, veto_threshold=veto_threshold, drop_nonfinite=drop_nonfinite)
    monitor.update(rollout_log_probs, old_log_probs, response_mask)
    return monitor.metrics()


def preset_metrics(
    preset_or_config: str | Mapping[str, Any],
    rollout_log_probs: Padded,
    old_log_probs: Padded,
    response_mask: Padded | None = None,
    *,
    dialect: Dialect | None = None,
    drop_nonfinite: bool = False,
) -> dict[str, float]:
    """Every metric verl logs for one configuration on one padded [B, T] batch, as ``rcdiag
    compare-presets --json`` reports it overall (see :class:`Monitor`).

    Args:
        preset_or_config: a preset name (``decoupled_geo_rs``) or a mapping of verl's
            ``algorithm.rollout_correction`` keys.
        dialect: as for :class:`Monitor`.

    Example:
        >>> import numpy as np
        >>> m = preset_metrics({"rollout_is": "token", "rollout_is_threshold": 2.0},
        ...                    np.log([[0.1, 0.5]]), np.log([[0.5, 0.5]]))
        >>> m["rollout_corr/rollout_is_mean"]  # (min(5, 2) + 1) / 2
        1.5
    """
    if not isinstance(preset_or_config, (str, Mapping)):
        raise TypeError(
            "preset_or_config must be a preset name (str) or a mapping of verl's keys, got "
            f"{type(preset_or_config).__name__}"
        )
    check_monitor({"dialect": dialect, "drop_nonfinite": drop_nonfinite})
    if not isinstance(preset_or_config, str):
        check_monitor({"configs": {"preset_or_config": preset_or_config}})
    if isinstance(preset_or_config, str):
        name, monitor = preset_or_config, Monitor([preset_or_config], dialect=dialect)
    else:
        name = "config"
        monitor = Monitor(configs={name: preset_or_config}, dialect=dialect)
    monitor.drop_nonfinite = drop_nonfinite
    monitor.update(rollout_log_probs, old_log_probs, response_mask)
    return monitor.preset_metrics(name)
