"""An argument's name on the command line: the flag (``--veto-threshold``) of the Python argument
(``veto_threshold``) an :class:`~rcdiag.errors.ArgumentError` names (the reverse of
:func:`rcdiag.run.python_words.speaks_python`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

FLAGS = {
    "presets": "--preset",
    "rules": "--rule",
    "configs": "--config",
    "rules_file": "--rules",
    "from_json": "--from",
    "storage_options": "--storage-option",
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
