"""The Python API's arguments checked at the door (docs/python-api.md, "Errors").

A wrong type is a :class:`TypeError`, a wrong value an :class:`~rcdiag.errors.ArgumentError` (both a
:class:`ValueError` and rcdiag's :class:`~rcdiag.errors.UsageError`); every message names the Python
argument, never a command-line flag. A bare string where a sequence of names is expected is one name,
never its characters.

:func:`check_arguments` checks a function's arguments by name (its ``locals()``) against
:data:`API_ARGUMENTS`, one row per argument name the functions of :mod:`rcdiag.api` share; the
functions that take other arguments (``write_dump``, ``rcdiag.torch``) call the checkers directly.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rcdiag.argument_names import command_line_message
from rcdiag.errors import ArgumentError

Checker = Callable[[str, Any], None]

__all__ = [
    "API_ARGUMENTS",
    "check_arguments",
    "check_dump_writing",
    "check_monitor",
    "check_report_output",
    "command_line_message",
    "configs_of",
    "names",
    "path_list",
]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _wrong_type(name: str, value: Any, expected: str) -> TypeError:
    return TypeError(f"{name} must be {expected}, got {type(value).__name__} {_shown(value)}")


def _is_integer(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_number(value: Any) -> bool:
    return _is_integer(value) or isinstance(value, (float, np.floating))


def _is_path(value: Any) -> bool:
    return isinstance(value, (str, os.PathLike))


def flag(name: str, value: Any) -> None:
    """``True`` or ``False`` (a number or a string is refused: ``"false"`` would be true)."""
    if not isinstance(value, (bool, np.bool_)):
        raise _wrong_type(name, value, "True or False")


def text(name: str, value: Any) -> None:
    """A non-empty string, or None."""
    if value is None:
        return
    if not isinstance(value, str):
        raise _wrong_type(name, value, "a string or None")
    if not value.strip():
        raise ArgumentError(f"{name}: empty string", name)


def column(name: str, value: Any) -> None:
    """A column name (a non-empty string), or None."""
    if isinstance(value, str) and not value.strip():
        raise ArgumentError(f"{name}: empty column name", name)
    text(name, value)


def number(name: str, value: Any, *, positive: bool = False, minimum: float | None = None) -> None:
    """A finite number (not a bool), or None; > 0 when ``positive``, ≥ ``minimum`` when given."""
    if value is None:
        return
    if not _is_number(value):
        raise _wrong_type(name, value, "a number or None")
    if not math.isfinite(float(value)):
        raise ArgumentError(f"{name} must be a finite number, got {value!r}", name)
    if positive and not value > 0:
        raise ArgumentError(f"{name} must be > 0, got {value!r}", name)
    if minimum is not None and value < minimum:
        raise ArgumentError(f"{name} must be ≥ {minimum:g}, got {value!r}", name)


def integer(name: str, value: Any, *, minimum: int | None = None) -> None:
    """An integer (not a bool), at least ``minimum`` when given."""
    if not _is_integer(value):
        raise _wrong_type(name, value, "an integer")
    if minimum is not None and value < minimum:
        raise ArgumentError(f"{name} must be ≥ {minimum}, got {value!r}", name)


def choice(name: str, value: Any, choices: Sequence[str], *, optional: bool = True) -> None:
    """One of ``choices`` (or None when ``optional``)."""
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise _wrong_type(name, value, "a string" + (" or None" if optional else ""))
    if value not in choices:
        raise ArgumentError(f"{name} {value!r}: expected one of {', '.join(choices)}", name)


def path(name: str, value: Any) -> None:
    """A path (``str`` or ``os.PathLike``), or None."""
    if value is not None and not _is_path(value):
        raise _wrong_type(name, value, "a path (str or os.PathLike)")
    if isinstance(value, str) and not value.strip():
        raise ArgumentError(f"{name}: empty path", name)


def paths(name: str, value: Any) -> None:
    """A path or a URL, or a sequence of them (None is left to the function)."""
    if value is None or _is_path(value):
        path(name, value)
        return
    if not isinstance(value, Sequence) or isinstance(value, (bytes, bytearray)):
        raise _wrong_type(name, value, "a path (str or os.PathLike) or a list of paths")
    for index, item in enumerate(value):
        if not _is_path(item):
            raise _wrong_type(f"{name}[{index}]", item, "a path (str or os.PathLike)")
        path(f"{name}[{index}]", item)


def names(name: str, value: Any) -> list[str] | None:
    """A sequence of names as a list; a bare string is one name; None stays None.

    Example:
        >>> names("presets", "decoupled_geo_rs"), names("presets", ("a", "b"))
        (['decoupled_geo_rs'], ['a', 'b'])
    """
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if not isinstance(value, Sequence) and not isinstance(value, (set, frozenset)):
        raise _wrong_type(name, value, "a string or a list of strings")
    out = list(value)
    for index, item in enumerate(out):
        if not isinstance(item, str):
            raise _wrong_type(f"{name}[{index}]", item, "a string")
    return out


def path_list(name: str, value: Any) -> list[Any]:
    """A sequence of paths as a list; a bare path is one path (never split into characters)."""
    if value is None:
        return []
    if _is_path(value):
        path(name, value)
        return [value]
    paths(name, value)
    return list(value)


def mapping(name: str, value: Any) -> None:
    """A mapping with string keys, or None."""
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise _wrong_type(name, value, "a mapping (dict) or None")
    for key in value:
        if not isinstance(key, str):
            raise _wrong_type(f"a key of {name}", key, "a string")


def callable_or_none(name: str, value: Any) -> None:
    if value is not None and not callable(value):
        raise _wrong_type(name, value, "a callable or None")


def step_argument(name: str, value: Any) -> None:
    """``step=``: an integer, a sequence of integers, or None."""
    if value is None or _is_integer(value):
        return
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, set, frozenset)):
        raise _wrong_type(name, value, "an integer, a list of integers or None")
    for item in value:
        if not _is_integer(item):
            raise _wrong_type(f"an entry of {name}", item, "an integer")


def steps_argument(name: str, value: Any) -> None:
    """``steps=``: ``"A:B"``, ``(A, B)`` (either may be None), or None."""
    if value is None or isinstance(value, str):
        return
    if not isinstance(value, tuple) or len(value) != 2:
        raise _wrong_type(name, value, 'a string "A:B", a pair (A, B) or None')
    for item in value:
        if item is not None and not _is_integer(item):
            raise _wrong_type(f"an end of {name}", item, "an integer or None")


def frameworks_argument(name: str, value: Any) -> None:
    """``frameworks=``: a comma list as one string, a sequence of names, or None."""
    names(name, value)


def configs_argument(name: str, value: Any) -> None:
    """``configs=``: paths of YAML files, or (compare_presets) a mapping name → keys, holding no
    non-finite number."""
    if isinstance(value, Mapping):
        mapping(name, value)
        for key, config in value.items():
            if not isinstance(config, Mapping):
                raise _wrong_type(f"{name}[{key!r}]", config, "a mapping of verl's keys")
        _finite_configs(name, value)
        return
    path_list(name, value)


def _finite_configs(name: str, configs: Mapping[str, Any]) -> None:
    from rcdiag.finite import nonfinite_field

    found = nonfinite_field(dict(configs))
    if found is not None:
        where, shown = found
        raise ArgumentError(
            f"{name}: {where} is {shown}; a configuration holds finite numbers", name
        )


def _engine(name: str, value: Any) -> None:
    choice(name, value, ("local", "ray"), optional=False)


def _dialect(name: str, value: Any) -> None:
    from rcdiag.dialects import DIALECTS

    choice(name, value, DIALECTS)


def _positive(name: str, value: Any) -> None:
    number(name, value, positive=True)


def _at_least_zero(name: str, value: Any) -> None:
    number(name, value, minimum=0)


def _count(name: str, value: Any) -> None:
    integer(name, value, minimum=0)


def _sweep_grid(name: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise _wrong_type(name, value, "a list of thresholds (numbers or strings) or None")
    for item in value:
        if not (isinstance(item, str) or _is_number(item)):
            raise _wrong_type(f"an entry of {name}", item, "a number or a string")
        try:
            finite = math.isfinite(float(item))
        except ValueError:  # not a number: the sweep says what it expects
            continue
        if not finite:
            raise ArgumentError(f"{name} value {item!r}: a threshold must be a finite number", name)


def _baseline(name: str, value: Any) -> None:
    from rcdiag.model import Baseline

    if value is not None and not isinstance(value, Baseline):
        path(name, value)


def _fraction(name: str, value: Any) -> None:
    """A number strictly between 0 and 1, or None."""
    number(name, value)
    if value is not None and not 0 < value < 1:
        raise ArgumentError(f"{name} must be strictly between 0 and 1, got {value!r}", name)


def _rules(name: str, value: Any) -> None:
    names(name, value)


API_ARGUMENTS: dict[str, Checker] = {
    "paths": paths,
    "dialect": _dialect,
    "veto_threshold": _positive,
    "step": step_argument,
    "steps": steps_argument,
    "rollout_col": column,
    "training_col": column,
    "mask_col": column,
    "step_col": column,
    "drop_nonfinite": flag,
    "storage_options": mapping,
    "engine": _engine,
    "ray_address": text,
    "frameworks": frameworks_argument,
    "translate": text,
    "progress": callable_or_none,
    "presets": _rules,
    "configs": configs_argument,
    "sweep": text,
    "grid": _sweep_grid,
    "from_json": path,
    "top": _count,
    "rules": _rules,
    "rules_file": path,
    "with_defaults": flag,
    "baseline": _baseline,
    "abs_tol": _at_least_zero,
    "rel_tol": _at_least_zero,
    "confidence": lambda name, value: _fraction(name, value),
    "trend_alpha": lambda name, value: _fraction(name, value),
    "seed": _count,
    "replicates": lambda name, value: integer(name, value),
}
"""Argument name → its check, for every argument the :mod:`rcdiag.api` functions share."""


def check_arguments(arguments: Mapping[str, Any]) -> None:
    """Check every argument of :data:`API_ARGUMENTS` among ``arguments`` (a function's
    ``locals()``); the others are left alone.

    Raises:
        TypeError: an argument of the wrong type.
        ArgumentError: an argument of the right type and a wrong value.
    """
    for name, checker in API_ARGUMENTS.items():
        if name in arguments:
            checker(name, arguments[name])


def check_report_output(result: Any, target: Any, plotlyjs: Any) -> None:
    """The arguments of :func:`rcdiag.write_report`.

    Raises:
        TypeError: ``result`` is no result of :mod:`rcdiag.api`, ``output`` no path, ``plotlyjs`` no
            string.
    """
    from rcdiag.model import AnalysisResult, ComparisonResult, ReportDocument

    if not isinstance(result, (ReportDocument, AnalysisResult, ComparisonResult)):
        raise _wrong_type(
            "result",
            result,
            "the result of rcdiag.report, rcdiag.analyze or rcdiag.compare_presets",
        )
    if target is None:
        raise _wrong_type("output", target, "a path (str or os.PathLike)")
    path("output", target)
    if not isinstance(plotlyjs, str):
        raise _wrong_type("plotlyjs", plotlyjs, 'a string ("embed", a path or an http(s) URL)')


def configs_of(value: Any) -> Any:
    """``configs=`` of :func:`rcdiag.compare_presets`: a mapping as given, else a list of paths
    (a bare path is one file)."""
    return value if isinstance(value, Mapping) else path_list("configs", value)


PARQUET_CODECS = ("snappy", "zstd", "gzip", "brotli", "lz4", "none")
"""The ``compression=`` values of :func:`rcdiag.write_dump` and ``DumpWriter``."""


def compression_argument(name: str, value: Any) -> None:
    """A parquet codec this pyarrow can write."""
    import pyarrow as pa

    choice(name, value, PARQUET_CODECS, optional=False)
    if value != "none" and not pa.Codec.is_available(value):
        raise ArgumentError(f"{name} {value!r}: this pyarrow build cannot write it", name)


def check_dump_writing(arguments: Mapping[str, Any]) -> None:
    """The arguments of :func:`rcdiag.write_dump` other than the arrays (its ``locals()``)."""
    path("path", arguments["path"])
    if arguments["path"] is None:
        raise _wrong_type("path", None, "a path (str or os.PathLike)")
    flag("trim_padding", arguments["trim_padding"])
    mapping("extra_columns", arguments["extra_columns"])
    compression_argument("compression", arguments["compression"])


def check_monitor(arguments: Mapping[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """The arguments of ``rcdiag.torch``'s functions and ``Monitor`` (their ``locals()``); returns
    the presets as a list (a bare name is one preset) and the configurations as a dict."""
    _dialect("dialect", arguments.get("dialect"))
    _positive("veto_threshold", arguments.get("veto_threshold"))
    flag("drop_nonfinite", arguments.get("drop_nonfinite", False))
    presets = names("presets", arguments.get("presets")) or []
    configs = arguments.get("configs")
    mapping("configs", configs)
    for key, config in (configs or {}).items():
        if not isinstance(config, Mapping):
            raise _wrong_type(f"configs[{key!r}]", config, "a mapping of verl's keys")
    _finite_configs("configs", configs or {})
    return presets, dict(configs or {})
