"""Terminal views shared by the commands: progress, input warnings, the diagnosis, status styles."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from rcdiag.commands._common import shown, stderr, stdout
from rcdiag.model import Diagnosis, SourceInfo
from rcdiag.pipeline import Progress as RowsRead

STATUS_STYLE: dict[str, str] = {"healthy": "green", "watch": "yellow", "act": "bold red"}
"""How each status of the registry's vocabulary is coloured."""

VERDICT_WORDS: dict[str, str] = {
    "healthy": "HEALTHY — rollout and training agree within every published range",
    "watch": "WATCH — a mismatch worth watching; no change needed yet",
    "act": "ACT — fix or correct the mismatch before it biases training",
}


def status_text(status: str | None) -> str:
    """A status in its colour (``–`` when unknown)."""
    if status is None:
        return "–"
    return f"[{STATUS_STYLE.get(status, 'dim')}]{status}[/]"


def show_diagnosis(diagnosis: Diagnosis) -> None:
    """The verdict, then each cause: what it is, the numbers, what to do."""
    verdict = diagnosis.verdict
    stdout.print(f"[{STATUS_STYLE[verdict]}]Verdict: {VERDICT_WORDS[verdict]}[/]")
    for cause in diagnosis.causes:
        kind = "dump bug" if cause.kind == "dump_bug" else "mismatch"
        stdout.print(
            f"  {status_text(cause.severity)} [bold]{cause.id}[/] ({kind}): {shown(cause.summary)}"
        )
        stdout.print(f"      [dim]→[/] {shown(cause.advice)}")


@contextlib.contextmanager
def progress_bar(quiet: bool) -> Iterator[RowsRead]:
    """A rows-read progress bar on a terminal's stderr (not with ``quiet``); yields its update."""
    with Progress(
        TextColumn("reading"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("rows"),
        TimeRemainingColumn(),
        console=stderr,
        transient=True,
        disable=quiet or not stderr.is_terminal,  # logs get no bar (and no stray blank line)
    ) as bar:
        task = bar.add_task("read", total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield advance


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
    if source.positive_log_probs:
        stderr.print(
            f"[yellow]Warning:[/] {source.positive_log_probs:,} valid log-probs are > 0 "
            f"(first: {shown(source.first_positive_log_prob)}); a log-probability "
            "cannot be positive: are these logits, or the wrong columns?"
        )
