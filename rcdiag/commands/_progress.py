"""What a command says while it reads: its progress bar and its warnings about the input.

A ``--quiet`` run gets no bar, and its start-up no rich (about 30 ms); a run whose stderr is no
terminal (a pipe, a file, a log) gets no bar either.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from rcdiag.commands._common import made, shown, stderr
from rcdiag.model import SourceInfo
from rcdiag.run.dump import Progress as RowsRead


@contextlib.contextmanager
def progress_bar(quiet: bool, what: str = "reading", unit: str = "rows") -> Iterator[RowsRead]:
    """A progress bar on a terminal's stderr (``reading 1,024/4,096 rows``; not with ``quiet``,
    nor in a pipe, a file or a test's captured output); yields its update, ``advance(done,
    total)``, for the pass's ``progress`` hook."""
    if quiet:
        yield _unseen
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    console = made(stderr)
    with Progress(
        TextColumn(what),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,  # logs get no bar (and no stray blank line)
    ) as bar:
        task = bar.add_task("read", total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield advance


def _unseen(done: int, total: int) -> None:
    """The progress of a run that shows none."""


def warn_about_input(source: SourceInfo, quiet: bool) -> None:
    """Warnings about steps without valid tokens, tokens --drop-nonfinite masked, and log-probs
    that cannot be log-probs."""
    if quiet:
        return
    for s in source.empty_steps:
        stderr.print(
            f"[yellow]Warning:[/] step {s} has no valid token: its metrics are null "
            "(verl would raise on this batch); the other steps are analysed."
        )
    if source.dropped_nonfinite:
        stderr.print(
            f"[yellow]Note:[/] masked {source.dropped_nonfinite} non-finite "
            "log-probs at valid positions (--drop-nonfinite)."
        )
    if source.left_out:
        counts = ", ".join(f"{count:,} {reason}" for reason, count in source.left_out)
        stderr.print(f"[yellow]Note:[/] samples not read: {counts} (docs/formats.md).")
    if source.positive_log_probs:
        stderr.print(
            f"[yellow]Warning:[/] {source.positive_log_probs:,} valid log-probs are > 0 "
            f"(first: {shown(source.first_positive_log_prob)}); a log-probability "
            "cannot be positive: are these logits, or the wrong columns?"
        )
