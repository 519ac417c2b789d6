"""Where the run is going: what a candidate configuration keeps at each step, over the recent
steps and at its worst step (docs/recommendation.md, "Where the run is going").

* **recent steps**: the last quarter of the steps with a valid token (at least one), the window
  the trend's "recent" k3_kl is taken over; a candidate's recent kept share is pooled over them:
  Σ kept / Σ valid over those steps (Σ share_s · n_s / Σ n_s, n_s the step's valid tokens, or its
  sequences holding one);
* **worst step**: the step where the candidate keeps the smallest share of the tokens.

Read from a document's sweeps (``steps`` and each point's ``per_step``); a configuration that keeps
every token of the dump keeps every token of each step, so its figures need no per-step data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rcdiag.formatting import pct
from rcdiag.metrics.ragged import F64
from rcdiag.model.advice import KeptByStep

STORY_GAP = 0.01
"""The per-step story is told when the worst step or the recent steps keep at least this much
less (a share, 1 point) than the whole dump."""


@dataclass(frozen=True)
class StepTable:
    """The steps of a document's per-step figures, with what each holds."""

    steps: tuple[int, ...]
    valid_tokens: F64
    sequences: F64

    @property
    def recent(self) -> slice:
        """The recent steps (module docstring) as a slice of :attr:`steps`' positions among
        the steps with a valid token."""
        usable = int((self.valid_tokens > 0).sum())
        return slice(-max(1, usable // 4), None)


def step_table(document: Mapping[str, Any]) -> StepTable | None:
    """The steps of the document's per-step sweep figures; else of its analysis (its rows then
    stand for the sequences); None without steps."""
    for sweep in document.get("sweeps") or []:
        counts = sweep.get("steps")
        if counts:
            return StepTable(
                tuple(counts["step"]),
                np.asarray(counts["valid_tokens"], dtype=np.float64),
                np.asarray(counts["sequences"], dtype=np.float64),
            )
    steps = document.get("steps") or []
    if not steps:
        return None
    return StepTable(
        tuple(int(s["step"]) for s in steps),
        np.asarray([s["valid_tokens"] for s in steps], dtype=np.float64),
        np.asarray([s["rows"] for s in steps], dtype=np.float64),
    )


def _values(values: Sequence[float | None]) -> F64:
    return np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)


def _pooled(shares: F64, weights: F64) -> float | None:
    present = np.isfinite(shares) & (weights > 0)
    total = float(weights[present].sum())
    return None if total == 0 else float((shares[present] * weights[present]).sum() / total)


def kept_by_step(
    table: StepTable,
    tokens: Sequence[float | None] | None = None,
    sequences: Sequence[float | None] | None = None,
) -> KeptByStep:
    """A configuration's :class:`~rcdiag.model.advice.KeptByStep` from its per-step shares
    (None: it keeps everything, 1 at every step with a valid token)."""
    has = table.valid_tokens > 0
    everything = np.where(has, 1.0, np.nan)
    token = everything if tokens is None else _values(tokens)
    sequence = everything if sequences is None else _values(sequences)
    usable = np.flatnonzero(has & np.isfinite(token))
    recent = usable[table.recent] if usable.size else usable
    steps = np.asarray(table.steps, dtype=np.int64)
    worst = None if usable.size == 0 else int(usable[np.argmin(token[usable])])
    result = KeptByStep(
        steps=table.steps,
        kept_token_share=tuple(None if np.isnan(v) else float(v) for v in token.tolist()),
        kept_sequence_share=tuple(None if np.isnan(v) else float(v) for v in sequence.tolist()),
        recent_steps=(int(steps[recent[0]]), int(steps[recent[-1]]))
        if recent.size
        else (table.steps[-1], table.steps[-1]),
        recent_count=int(recent.size),
        recent_kept_token_share=_pooled(token[recent], table.valid_tokens[recent]),
        recent_kept_sequence_share=_pooled(sequence[recent], table.sequences[recent]),
        worst_step=None if worst is None else int(steps[worst]),
        worst_kept_token_share=None if worst is None else float(token[worst]),
        worst_kept_sequence_share=None if worst is None else _number(sequence[worst]),
    )
    overall = _pooled(token, table.valid_tokens)
    return _with_story(result, overall)


def _number(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def recent_words(kept: KeptByStep) -> str:
    """``the last 3 steps (12–14)``, ``the last step (14)``."""
    first, last = kept.recent_steps
    if kept.recent_count == 1:
        return f"the last step ({last})"
    return f"the last {kept.recent_count} steps ({first}–{last})"


def _with_story(kept: KeptByStep, overall: float | None) -> KeptByStep:
    """The per-step sentence, when the worst or the recent steps keep ≥ :data:`STORY_GAP` less
    than the whole dump (``overall``)."""
    worst, recent = kept.worst_kept_token_share, kept.recent_kept_token_share
    if overall is None or worst is None or recent is None:
        return kept
    if overall - worst < STORY_GAP and overall - recent < STORY_GAP:
        return kept
    first = next((i for i, v in enumerate(kept.kept_token_share) if v is not None), 0)
    first_step, last_step = kept.steps[first], kept.recent_steps[1]
    worst_is_last = kept.recent_count == 1 and kept.worst_step == last_step
    roles = {first_step: ["the first"]}
    if kept.worst_step is not None:
        roles.setdefault(kept.worst_step, []).append("the worst")
    if worst_is_last:
        roles[last_step].insert(0, "the last")
    parts = [
        f"{pct(kept.kept_token_share[kept.steps.index(step)])}"
        f"{' of the tokens' if i == 0 else ''} at step {step} ({' and '.join(names)})"
        for i, (step, names) in enumerate(sorted(roles.items()))
    ]
    if not worst_is_last:
        parts.append(f"{pct(recent)} over {recent_words(kept)}")
    sequences = kept.worst_kept_sequence_share
    tail = (
        ""
        if sequences is None
        else f"; {pct(sequences)} of the sequences at step {kept.worst_step}"
    )
    listed = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
    story = f"Step by step it keeps {listed}, against {pct(overall)} over the whole dump{tail}."
    return dataclasses.replace(kept, story=story)
