"""Errors in the caller's own words: a Python caller of :mod:`rcdiag.api` reads the names of its
arguments (``steps 'a:b': …``), the command line its flags (``--steps 'a:b': …``).

The library words its :class:`~rcdiag.errors.UsageError` messages with the command-line flags;
:func:`speaks_python` rewrites each flag a message names into the argument of the API that takes
it (:data:`PYTHON_NAMES`), unless the call comes from a command (:func:`from_command_line`).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import re
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from rcdiag.argument_names import FLAGS
from rcdiag.errors import UsageError
from rcdiag.run.dump import DUMP_OPTIONS

REGULAR_NAMES = (
    "frameworks",
    "dialect",
    "veto_threshold",
    "sweep",
    "grid",
    "top",
    "with_defaults",
    "baseline",
    "abs_tol",
    "rel_tol",
    "confidence",
    "trend_alpha",
    "seed",
    "replicates",
)
"""Arguments of :mod:`rcdiag.api` whose flag is ``--`` + the name with ``-`` for ``_``."""

PYTHON_NAMES: dict[str, str] = {
    **{option.flag: option.name for option in DUMP_OPTIONS},
    **{"--" + name.replace("_", "-"): name for name in REGULAR_NAMES},
    **{flag: name for name, flag in FLAGS.items()},  # the irregular ones, written once
}
"""Each flag a library message may name → the keyword argument of :mod:`rcdiag.api` it is."""

_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
_COMMAND_LINE: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "rcdiag_command_line", default=False
)

F = TypeVar("F", bound=Callable[..., Any])


def in_python(message: str) -> str:
    """``message`` with every known flag replaced by its argument name, except inside a quoted
    command (between backticks), which stays as one types it.

    Example:
        >>> in_python("--steps 'a:b': expected A:B; see --frameworks, --unknown")
        "steps 'a:b': expected A:B; see frameworks, --unknown"
        >>> in_python("--dialect 'x': `rcdiag presets --dialect latest` lists them")
        "dialect 'x': `rcdiag presets --dialect latest` lists them"
    """
    parts = message.split("`")
    for i in range(0, len(parts), 2):  # the even parts lie outside backticks
        parts[i] = _FLAG.sub(lambda m: PYTHON_NAMES.get(m.group(0), m.group(0)), parts[i])
    return "`".join(parts)


@contextlib.contextmanager
def from_command_line() -> Iterator[None]:
    """The calls made inside are a command's: its errors keep their flags."""
    token = _COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _COMMAND_LINE.reset(token)


def speaks_python(function: F) -> F:
    """``function``'s :class:`~rcdiag.errors.UsageError` messages name Python arguments, unless
    it is called from a command."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except UsageError as exc:
            if _COMMAND_LINE.get():
                raise
            raise type(exc)(in_python(str(exc))) from None

    return wrapper  # type: ignore[return-value]
