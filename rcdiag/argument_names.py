"""An argument's name on the command line: the flag (``--veto-threshold``) of the Python argument
(``veto_threshold``) an :class:`~rcdiag.errors.ArgumentError` names (the reverse of
:func:`rcdiag.run.python_words.speaks_python`)."""

from __future__ import annotations

import functools
import warnings
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
    "translate": "--framework",
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


def renamed(**old_names: str) -> Callable[[F], F]:
    """Keep a keyword argument's former spelling working for a while: ``old=`` is passed on as
    its new name with a :class:`DeprecationWarning` (each concept has one spelling across the
    API; docs/python-api.md, "Keyword arguments").

    Example:
        >>> @renamed(framework="frameworks")
        ... def f(*, frameworks=None):
        ...     return frameworks
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     f(framework="trl"), str(caught[0].message)
        ('trl', 'f(framework=...) is now f(frameworks=...); the old name will be removed')
    """

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old, new in old_names.items():
                if old in kwargs:
                    name = function.__name__
                    if new in kwargs:
                        raise TypeError(f"{name}() got both {old}= and {new}=; {new}= is enough")
                    warnings.warn(
                        f"{name}({old}=...) is now {name}({new}=...); the old name will be removed",
                        DeprecationWarning,
                        stacklevel=2,
                    )
                    kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
