"""Tables of the typed results (docs/python-api.md, "Tables").

Each table is built once, as a pyarrow Table (pyarrow reads the dumps, so it is always installed):
``to_arrow()`` returns it, the ``--csv``/``--parquet`` exports write it, and ``to_pandas()`` converts
it. ``steps`` shows the same table as a polars DataFrame (zero-copy): polars is the ``polars`` extra,
imported when a DataFrame is first asked for, never when a result is built, so the base install stays
small and the CLI and ``import rcdiag`` stay fast.

Every number is a ``float64`` (integers: ``int64``) and a value that is not defined (a step without
valid tokens) or not finite is a null, as in the JSON documents.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from rcdiag.model.configuration import ConfigurationResult
from rcdiag.model.fields import Number
from rcdiag.model.parts import StepResult

if TYPE_CHECKING:
    import pandas
    import polars as pl
    import pyarrow as pa


STEP_KEYS = ("step", "rows", "valid_tokens")
"""The first columns of a per-step table, before one column per metric."""
POLARS_MISSING = (
    "{what} is a polars DataFrame, and polars is not installed: pip install 'rcdiag[polars]' "
    "(or use {result}.to_arrow(), the same table as a pyarrow Table)"
)


def _number(value: Number) -> float | None:
    """A table cell: null for a value that is not defined or not finite (as JSON writes it)."""
    if value is None:
        return None
    number = float(value)
    return number + 0.0 if math.isfinite(number) else None


def _names(mappings: Iterable[Mapping[str, Any] | None]) -> list[str]:
    """Every key of ``mappings``, in the order first seen."""
    return list(dict.fromkeys(key for m in mappings if m is not None for key in m))


def _floats(
    names: Sequence[str], rows: Sequence[Mapping[str, Number] | None]
) -> dict[str, tuple[list[float | None], str]]:
    return {
        name: ([None if row is None else _number(row.get(name)) for row in rows], "float64")
        for name in names
    }


def _table(columns: Mapping[str, tuple[Sequence[Any], str]]) -> pa.Table:
    """A table of ``name → (values, type)`` (types: ``int64``, ``float64``, ``string``)."""
    import pyarrow as pa

    kinds = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string()}
    return pa.table(
        {name: pa.array(values, kinds[kind]) for name, (values, kind) in columns.items()}
    )


def step_table(steps: Sequence[StepResult]) -> pa.Table:
    """One row per step: ``step``, ``rows``, ``valid_tokens`` (int64), then one float64 column per
    metric, in the order of the documents (docs/metrics.md).

    Example:
        >>> from rcdiag.model import StepResult
        >>> table = step_table([StepResult(3, 2, 10, {"m": 0.5}), StepResult(4, 1, 0, {"m": None})])
        >>> table.column_names, table["m"].to_pylist(), str(table.schema.field(3).type)
        (['step', 'rows', 'valid_tokens', 'm'], [0.5, None], 'double')
    """
    metrics = [s.metrics for s in steps]
    names = [n for n in _names(metrics) if n not in STEP_KEYS]
    return _table(
        {
            "step": ([s.step for s in steps], "int64"),
            "rows": ([s.rows for s in steps], "int64"),
            "valid_tokens": ([s.valid_tokens for s in steps], "int64"),
            **_floats(names, metrics),
        }
    )


def preset_step_table(presets: Sequence[ConfigurationResult]) -> pa.Table:
    """One row per step and configuration, by step then in the order compared: ``step`` (int64),
    ``configuration`` (string), rcdiag's comparison figures (``kept_token_share``, ``ess``, …),
    then every metric verl logs for a configuration (``rollout_corr/…``; null for a configuration
    that does not log it, and in documents that keep the figures only).

    Example:
        >>> from rcdiag.model import ConfigurationResult, PresetStep
        >>> entry = ConfigurationResult("a", {}, {}, {}, {}, (), (PresetStep(0, {"ess": 1.0}),))
        >>> preset_step_table([entry]).to_pylist()
        [{'step': 0, 'configuration': 'a', 'ess': 1.0}]
    """
    pairs = sorted(
        ((s.step, i, p.name, s) for i, p in enumerate(presets) for s in p.steps),
        key=lambda item: (item[0], item[1]),
    )
    entries = [s for *_, s in pairs]
    figures = _names(s.summary for s in entries)
    metrics = [n for n in _names(s.metrics for s in entries) if n not in figures]
    return _table(
        {
            "step": ([step for step, *_ in pairs], "int64"),
            "configuration": ([name for _, _, name, _ in pairs], "string"),
            **_floats(figures, [s.summary for s in entries]),
            **_floats(metrics, [s.metrics for s in entries]),
        }
    )


def overall_table(presets: Sequence[ConfigurationResult]) -> pa.Table:
    """One row per configuration, in the order compared: ``configuration``, its figures over the
    whole dump, then its overall metrics (float64, null where not logged)."""
    figures = _names(p.summary for p in presets)
    metrics = [n for n in _names(p.overall for p in presets) if n not in figures]
    return _table(
        {
            "configuration": ([p.name for p in presets], "string"),
            **_floats(figures, [p.summary for p in presets]),
            **_floats(metrics, [p.overall for p in presets]),
        }
    )


def record_table(
    records: Sequence[Mapping[str, Any]], columns: Sequence[str], kinds: Mapping[str, str]
) -> pa.Table:
    """One row per record, one column per name of ``columns`` (type ``kinds[name]``, else string)."""
    return _table(
        {c: ([r.get(c) for r in records], kinds.get(c, "string")) for c in columns},
    )


def cached(result: object, key: str, build: Callable[[], pa.Table]) -> pa.Table:
    """The table ``key`` of ``result``, built once (results are frozen and pyarrow Tables are
    immutable: it never changes)."""
    cache = result.__dict__
    name = f"_table_{key}"
    if name not in cache:
        cache[name] = build()
    table: pa.Table = cache[name]
    return table


def polars_frame(table: pa.Table, what: str, result: str) -> pl.DataFrame:
    """``table`` as a polars DataFrame (zero-copy; each call a new handle, so changing it never
    changes the result).

    Raises:
        ImportError: polars is not installed; names ``what`` and the extra to install.
    """
    try:
        import polars as pl
    except ImportError:
        raise ImportError(POLARS_MISSING.format(what=what, result=result)) from None
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


def to_pandas(table: pa.Table) -> pandas.DataFrame:
    """``table`` as a pandas DataFrame (pandas is optional: a clear ImportError when missing).

    Raises:
        ImportError: pandas is not installed (``pip install pandas``).
    """
    try:
        import pandas  # noqa: F401
    except ImportError:
        raise ImportError(
            "to_pandas() needs pandas, which rcdiag does not install: pip install pandas "
            "(or use .to_arrow(), a pyarrow Table)"
        ) from None
    return table.to_pandas()


def encode_table(table: pa.Table, handle: IO[bytes], kind: str) -> None:
    """Write ``table`` to ``handle`` as ``csv`` (a header row; strings quoted; a null is an empty
    field; floats in their shortest form that reads back the same number) or ``parquet``."""
    if kind == "csv":
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, handle)
    else:
        import pyarrow.parquet as pq

        pq.write_table(table, handle)
