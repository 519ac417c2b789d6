"""Exceptions the library raises; the CLI turns each into a one-line ``Error: …`` and exit code 2."""

from __future__ import annotations


class RcdiagError(Exception):
    """Base of every error rcdiag reports to a user (bad input or bad usage)."""


class InputError(RcdiagError):
    """The dump itself is unusable: missing file, corrupt parquet, wrong column, bad value.

    The message always names the file and, where known, the row, step and column.
    """


class UsageError(RcdiagError):
    """The command line or a configuration asks for something impossible."""


class ArgumentError(UsageError, ValueError):
    """A Python argument of the right type with a wrong value; the message names the argument.

    Both a :class:`UsageError` (what rcdiag documents) and a :class:`ValueError` (what Python code
    expects of a wrong value). ``argument`` is the argument's name (the command line prints its
    flag instead).
    """

    def __init__(self, message: str, argument: str | None = None) -> None:
        super().__init__(message)
        self.argument = argument
