"""Terminal views shared by the commands: the diagnosis, statuses and their bands, the χ² note
(the progress bar and the input warnings: :mod:`rcdiag.commands._progress`)."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text

from rcdiag.commands._common import shown, stdout
from rcdiag.commands._layout import hanging
from rcdiag.formatting import fmt
from rcdiag.metrics.records import CHI2_SEQ, CHI2_TOKEN, REGISTRY, label
from rcdiag.model import Diagnosis
from rcdiag.status import rank


def source_counts(rows: int, valid_tokens: int, steps: int) -> list[str]:
    """A dump's rows, valid tokens and steps, as the header lines of analyze, baseline and check
    give them."""
    return [f"{rows:,} rows", f"{valid_tokens:,} valid tokens", f"{steps} steps"]


STATUS_STYLE: dict[str, str] = {"healthy": "green", "watch": "yellow", "act": "bold red"}
"""How each status of the registry's vocabulary is coloured."""

VERDICT_WORDS: dict[str, str] = {
    "healthy": "HEALTHY — rollout and training agree within every published range",
    "watch": "WATCH — a mismatch worth watching: keep an eye on it",
    "act": "ACT — fix or correct the mismatch before it biases training",
}
DUMP_BUG_WORDS = (
    "{status} — fix the dump: {title}; its numbers describe the bug, not training, and no "
    "correction applies"
)
"""The verdict line when the diagnosis found a bug in how the dump was made."""


CHI2_METRICS = (CHI2_TOKEN.name, CHI2_SEQ.name)
CHI2_NOTE = (
    "χ² (chi2_token, chi2_seq) is E[ρ²] − 1 of the IS weights ρ = π_train/π_rollout: about their "
    "variance when they average 1, and negative when the sampled weights average below 1 "
    "(docs/metrics.md)."
)


def status_text(status: str | None) -> str:
    """A status in its colour (``–`` when unknown)."""
    if status is None:
        return "–"
    return f"[{STATUS_STYLE.get(status, 'dim')}]{status}[/]"


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``1 file``, ``2 files``, ``1,000 rules``.

    Example:
        >>> plural(1, "rule"), plural(0, "rule"), plural(12345, "step")
        ('1 rule', '0 rules', '12,345 steps')
    """
    return f"{n:,} {noun if n == 1 else (nouns or noun + 's')}"


def band_words(metric: str) -> str:
    """The registry's bands of ``metric`` as a reader checks them, mildest first: ``watch if |kl|
    > 0.1``, ``watch if > 0.001, act if > 0.1`` (empty for a metric without bands)."""
    record = REGISTRY.get(metric)
    if record is None:
        return ""
    short = record.name.rsplit("/", 1)[-1]
    words = []
    for band in sorted(record.bands, key=lambda b: rank(b.status)):
        condition = record.limit_text(band)
        if condition.startswith(short + " "):  # the row names the metric; |kl| stays as it is
            condition = condition[len(short) + 1 :]
        words.append(f"{band.status} if {condition}")
    if record.negative_judged_by is not None:
        words.append(f"below 0 as {label(record.negative_judged_by)}")
    return ", ".join(words)


def chi2_note(values: Iterable[float | None]) -> None:
    """Say why χ² may be negative, when one of the χ² ``values`` shown is."""
    if any(v is not None and v < 0 for v in values):
        stdout.print(Text.assemble(("Note: ", "bold"), (CHI2_NOTE, "dim")))


def show_diagnosis(diagnosis: Diagnosis) -> None:
    """The verdict, then each cause: what it is, the numbers, what to do (wrapped at the width)."""
    verdict, bug = diagnosis.verdict, diagnosis.dump_bug
    words = VERDICT_WORDS[verdict]
    if bug is not None:
        title = bug.title or bug.id
        words = DUMP_BUG_WORDS.format(status=verdict.upper(), title=title[0].lower() + title[1:])
    stdout.print(f"[{STATUS_STYLE[verdict]}]Verdict: {shown(words)}[/]")
    rows = []
    for cause in diagnosis.causes:
        kind = "dump bug" if cause.kind == "dump_bug" else "mismatch"
        text = Text.from_markup(
            f"[bold]{shown(cause.id)}[/] ({kind}): {shown(cause.summary)}\n"
            f"[dim]→[/] {shown(cause.advice)}"
        )
        rows.append((Text.from_markup(status_text(cause.severity)), text))
    for spike in diagnosis.spikes:
        text = Text(
            f"{label(spike.metric)} = {fmt(spike.value)} at step {spike.step} alone (the other "
            f"steps' median {fmt(spike.typical)}): one step, not the run; it does not set the "
            "verdict"
        )
        rows.append((Text("spike", style="yellow"), text))
    if rows:
        stdout.print(hanging(rows))
