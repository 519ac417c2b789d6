"""The names errors give an argument: the Python argument in the API (``veto_threshold``), the flag
on the command line (``--veto-threshold``), whichever layer raised the error."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, TypeVar, cast

from rcdiag.errors import UsageError

F = TypeVar("F", bound=Callable[..., Any])

FLAGS = {
    "presets": "--preset",
    "rules": "--rule",
    "configs": "--config",
    "rules_file": "--rules",
    "from_json": "--from",
}
"""Python arguments whose command-line flag is not ``--`` + the name with ``-`` for ``_``."""


def command_line_message(error: BaseException) -> str:
    """The message of an error, with the Python argument it names (``veto_threshold``) spelled as
    the command line's flag (``--veto-threshold``): what the command line prints."""
    text = str(error)
    argument = getattr(error, "argument", None)
    if not argument or not text.startswith(argument):
        return text
    flag = FLAGS.get(argument, "--" + argument.replace("_", "-"))
    return flag + text[len(argument) :]


_PYTHON_NAMES = {flag: name for name, flag in FLAGS.items()}
_LEADING_FLAG = re.compile(r"--([a-z][a-z0-9-]*)")


def python_names(function: F) -> F:
    """Make ``function`` (of :mod:`rcdiag.api`) name its arguments, not the command line's flags,
    in the usage errors the code it shares with the commands raises (``--steps 'a:b': …`` becomes
    ``steps 'a:b': …``). The error keeps its class; its ``argument`` is set, so the command line,
    which calls the same function, prints the flag again (:func:`command_line_message`)."""

    @functools.wraps(function)
    def with_python_names(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except UsageError as exc:
            match = _LEADING_FLAG.match(str(exc))
            if match is None or getattr(exc, "argument", None):
                raise
            name = _PYTHON_NAMES.get(match[0], match[1].replace("-", "_"))
            exc.args = (name + str(exc)[match.end() :], *exc.args[1:])
            exc.argument = name  # type: ignore[attr-defined]
            raise

    return cast(F, with_python_names)
