"""Tables of the typed results as polars DataFrames (docs/python-api.md, "Tables").

polars is imported when a table is first asked for, never when a result is built, so the CLI and
``import rcdiag`` stay fast. Every number is a ``Float64`` (integers: ``Int64``) and a value that is
not defined (a step without valid tokens) or not finite is a null, as in the JSON documents.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rcdiag.model.fields import Number

if TYPE_CHECKING:
    import pandas
    import polars as pl

    from rcdiag.model.analysis import StepResult
    from rcdiag.model.comparison import ConfigurationResult

STEP_KEYS = ("step", "rows", "valid_tokens")
"""The first columns of a per-step table, before one column per metric."""
PRESET_STEP_KEYS = ("step", "configuration")
"""The first columns of a per-step, per-configuration table, before the figures and metrics."""


def _number(value: Number) -> float | None:
    """A table cell: null for a value that is not defined or not finite (as JSON writes it)."""
    if value is None:
        return None
    number = float(value)
    return number + 0.0 if math.isfinite(number) else None


def _names(mappings: Iterable[Mapping[str, Any] | None]) -> list[str]:
    """Every key of ``mappings``, in the order first seen."""
    return list(dict.fromkeys(key for m in mappings if m is not None for key in m))


def _float_columns(
    names: Sequence[str], rows: Sequence[Mapping[str, Number] | None]
) -> dict[str, list[float | None]]:
    return {
        name: [None if row is None else _number(row.get(name)) for row in rows] for name in names
    }


def step_frame(steps: Sequence[StepResult]) -> pl.DataFrame:
    """One row per step: ``step``, ``rows``, ``valid_tokens`` (Int64), then one Float64 column per
    metric, in the order of the documents (docs/metrics.md).

    Example:
        >>> from rcdiag.model import StepResult
        >>> frame = step_frame([StepResult(3, 2, 10, {"m": 0.5}), StepResult(4, 1, 0, {"m": None})])
        >>> frame.columns, frame["m"].to_list(), frame.dtypes[3]
        (['step', 'rows', 'valid_tokens', 'm'], [0.5, None], Float64)
    """
    import polars as pl

    metrics = [s.metrics for s in steps]
    names = [n for n in _names(metrics) if n not in STEP_KEYS]
    schema: dict[str, Any] = {key: pl.Int64 for key in STEP_KEYS}
    schema |= dict.fromkeys(names, pl.Float64)
    data: dict[str, list[Any]] = {
        "step": [s.step for s in steps],
        "rows": [s.rows for s in steps],
        "valid_tokens": [s.valid_tokens for s in steps],
        **_float_columns(names, metrics),
    }
    return pl.DataFrame(data, schema=schema)


def preset_step_frame(presets: Sequence[ConfigurationResult]) -> pl.DataFrame:
    """One row per step and configuration, by step then in the order compared: ``step`` (Int64),
    ``configuration`` (String), rcdiag's comparison figures (``kept_token_share``, ``ess``, …),
    then every metric verl logs for a configuration (``rollout_corr/…``; null for a configuration
    that does not log it, and in documents that keep the figures only).

    Example:
        >>> from rcdiag.model import ConfigurationResult, PresetStep
        >>> entry = ConfigurationResult("a", {}, {}, {}, {}, (), (PresetStep(0, {"ess": 1.0}),))
        >>> preset_step_frame([entry]).rows()
        [(0, 'a', 1.0)]
    """
    import polars as pl

    pairs = sorted(
        ((s.step, i, p.name, s) for i, p in enumerate(presets) for s in p.steps),
        key=lambda item: (item[0], item[1]),
    )
    entries = [s for *_, s in pairs]
    figures = _names(s.summary for s in entries)
    metrics = [n for n in _names(s.metrics for s in entries) if n not in figures]
    schema: dict[str, Any] = {"step": pl.Int64, "configuration": pl.String}
    schema |= dict.fromkeys([*figures, *metrics], pl.Float64)
    data: dict[str, list[Any]] = {
        "step": [step for step, *_ in pairs],
        "configuration": [name for _, _, name, _ in pairs],
        **_float_columns(figures, [s.summary for s in entries]),
        **_float_columns(metrics, [s.metrics for s in entries]),
    }
    return pl.DataFrame(data, schema=schema)


def overall_frame(presets: Sequence[ConfigurationResult]) -> pl.DataFrame:
    """One row per configuration, in the order compared: ``configuration``, its figures over the
    whole dump, then its overall metrics (Float64, null where not logged)."""
    import polars as pl

    figures = _names(p.summary for p in presets)
    metrics = [n for n in _names(p.overall for p in presets) if n not in figures]
    schema: dict[str, Any] = {"configuration": pl.String}
    schema |= dict.fromkeys([*figures, *metrics], pl.Float64)
    data: dict[str, list[Any]] = {
        "configuration": [p.name for p in presets],
        **_float_columns(figures, [p.summary for p in presets]),
        **_float_columns(metrics, [p.overall for p in presets]),
    }
    return pl.DataFrame(data, schema=schema)


def to_pandas(frame: pl.DataFrame) -> pandas.DataFrame:
    """``frame`` as a pandas DataFrame (pandas is optional: a clear ImportError when missing).

    Raises:
        ImportError: pandas is not installed (``pip install pandas``).
    """
    try:
        import pandas  # noqa: F401
    except ImportError:
        raise ImportError(
            "to_pandas() needs pandas, which rcdiag does not install: pip install pandas "
            "(or use the polars DataFrame in .steps)"
        ) from None
    return frame.to_pandas()


def cached(result: object, key: str, build: Callable[[], pl.DataFrame]) -> pl.DataFrame:
    """The table ``key`` of ``result``, built once (results are frozen: it never changes); each
    call returns a new polars handle on the same data (a cheap clone), so changing what it returns
    cannot change the result."""
    cache = result.__dict__
    name = f"_table_{key}"
    if name not in cache:
        cache[name] = build()
    frame: pl.DataFrame = cache[name]
    return frame.clone()
