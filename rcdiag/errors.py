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
