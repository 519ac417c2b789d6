"""Terminal views shared by the commands: the diagnosis block and the status styles."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rcdiag.commands._common import shown, stdout

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


def show_diagnosis(diagnosis: Mapping[str, Any]) -> None:
    """The verdict, then each cause: what it is, the numbers, what to do."""
    verdict = diagnosis["verdict"]
    stdout.print(f"[{STATUS_STYLE[verdict]}]Verdict: {VERDICT_WORDS[verdict]}[/]")
    for cause in diagnosis["causes"]:
        kind = "dump bug" if cause["kind"] == "dump_bug" else "mismatch"
        stdout.print(
            f"  {status_text(cause['severity'])} [bold]{cause['id']}[/] ({kind}): "
            f"{shown(cause['summary'])}"
        )
        stdout.print(f"      [dim]→[/] {shown(cause['advice'])}")
