"""The configurations a document measured (presets and sweep points) and how the recommendation
picks thresholds among them: the sweep knee for rejection, C for token-level truncated IS."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rcdiag.assess.findings import ADVICE_LIMITS
from rcdiag.assess.recommendation.candidates import candidate_sweeps
from rcdiag.assess.recommendation.steps import kept_by_step, recent_words, step_table
from rcdiag.correction.presets import PRESETS
from rcdiag.dialects import Dialect
from rcdiag.formatting import pct
from rcdiag.model.advice import KeptByStep

DEFAULT_IS_THRESHOLD = 2.0


@dataclass(frozen=True)
class Entry:
    """A configuration the recommendation may pick, and what the report measured for it."""

    kind: str  # "preset" or "sweep"
    ref: str  # preset name, or "<sweep key>@<threshold>"
    config: Mapping[str, Any]
    summary: Mapping[str, Any] | None
    kept: Callable[[], KeptByStep | None] | None = field(default=None, compare=False, repr=False)
    """Computes :attr:`per_step` when first asked (most entries never are)."""
    recent_removed: Callable[[], tuple[float, str] | None] | None = field(
        default=None, compare=False, repr=False
    )
    """The most IS weight mass it truncates at one of the recent steps, and that step in words
    (None: not measured, or no truncation)."""

    @functools.cached_property
    def per_step(self) -> KeptByStep | None:
        """What it keeps at each step (:mod:`rcdiag.assess.recommendation.steps`), when
        measured."""
        return None if self.kept is None else self.kept()


class Entries:
    """Presets and sweep points of a document; configurations rebuilt when the document lacks them."""

    def __init__(self, document: Mapping[str, Any], dialect: Dialect) -> None:
        self.dialect = dialect
        self.presets = {p["name"]: p for p in document.get("presets") or []}
        self.sweeps = {s.get("key", s.get("target")): s for s in document.get("sweeps") or []}
        self.measured = bool(self.presets) or bool(self.sweeps)
        self.table = step_table(document)

    def _kept(
        self, summary: Mapping[str, Any] | None, shares: Mapping[str, Any] | None = None
    ) -> Callable[[], KeptByStep | None]:
        """What a configuration keeps per step, computed when asked: from its per-step shares;
        or, for one that keeps every token and sequence of the dump, every one of each step."""
        table = self.table

        def kept() -> KeptByStep | None:
            if table is None or summary is None:
                return None
            everything = (
                summary.get("kept_token_share") == 1.0 and summary.get("kept_sequence_share") == 1.0
            )
            if everything:
                return kept_by_step(table)
            tokens = None if not shares else shares.get("kept_token_share")
            if tokens is None or len(tokens) != len(table.steps):
                return None
            return kept_by_step(table, tokens, (shares or {}).get("kept_sequence_share"))

        return kept

    def preset(self, name: str) -> Entry:
        found = self.presets.get(name)
        if found is not None:
            summary = found.get("summary")
            return Entry("preset", name, found["config"], summary, self._kept(summary))
        return Entry("preset", name, PRESETS[self.dialect][name].config, None)

    def _point(self, key: str, point: Mapping[str, Any]) -> Entry:
        summary = point.get("summary")
        kept = self._kept(summary, point.get("per_step"))
        removed = (point.get("per_step") or {}).get("weight_mass_removed")
        table = self.table

        def recent_removed() -> tuple[float, str] | None:
            if removed is None or table is None or len(removed) != len(table.steps):
                return None
            usable = [
                i for i, v in enumerate(removed) if v is not None and table.valid_tokens[i] > 0
            ]
            recent = usable[table.recent] if usable else []
            if not recent:
                return None
            at = max(recent, key=lambda i: removed[i])
            return float(removed[at]), f"step {table.steps[at]}"

        ref = f"{key}@{point['threshold']}"
        return Entry("sweep", ref, point["config"], summary, kept, recent_removed)

    def points(self, key: str) -> list[Entry]:
        """The points of sweep ``key``, loosest last (thresholds sorted as numbers)."""
        found = self.sweeps.get(key)
        if found is not None:
            points = [self._point(key, p) for p in found["points"]]
        else:
            sweep = next((s for s in candidate_sweeps(self.dialect) if s.key == key), None)
            if sweep is None:
                return []
            points = [
                Entry("sweep", c.name, c.config, None)
                for c in sweep.configs  # rebuilt: no measured summary
            ]
        return sorted(points, key=lambda e: float(e.ref.split("@", 1)[1]))

    def point(self, key: str, threshold: str) -> Entry | None:
        return next((e for e in self.points(key) if e.ref == f"{key}@{threshold}"), None)


def _share(entry: Entry | None, figure: str = "kept_token_share") -> float | None:
    if entry is None or entry.summary is None:
        return None
    value = entry.summary.get(figure)
    return None if value is None else float(value)


def _threshold(entry: Entry) -> str:
    return entry.ref.split("@", 1)[1]


def _judged(point: Entry, recent: bool) -> list[tuple[str, float, float]]:
    """What a rejection threshold is judged on: (where, kept token share, least share allowed).

    Always the whole dump (≥ ``keep_target``); with ``recent`` (a growing run) and per-step
    figures, also the recent steps (≥ ``keep_target``) and the worst step (≥ ``worst_step_keep``).
    """
    target = ADVICE_LIMITS["keep_target"]
    kept = _share(point)
    assert kept is not None
    judged = [("over the whole dump", kept, target)]
    steps = point.per_step
    if recent and steps is not None:
        if steps.recent_kept_token_share is not None:
            judged.append((f"over {recent_words(steps)}", steps.recent_kept_token_share, target))
        if steps.worst_kept_token_share is not None:
            judged.append(
                (
                    f"at step {steps.worst_step} (its worst)",
                    steps.worst_kept_token_share,
                    ADVICE_LIMITS["worst_step_keep"],
                )
            )
    return judged


def _falls_short(judged: list[tuple[str, float, float]]) -> tuple[str, float, float] | None:
    return next((j for j in judged if j[1] < j[2]), None)


def knee(points: list[Entry], recent: bool = False) -> tuple[Entry | None, str]:
    """The tightest point keeping ≥ ``keep_target`` of the tokens that still rejects something.

    With ``recent`` (the mismatch grows) a point must also keep ≥ ``keep_target`` of the tokens
    of the recent steps and ≥ ``worst_step_keep`` of its worst step's (:func:`_judged`), so the
    threshold still fits where the run is going.

    Returns:
        The point (None when rejection is not worth it or was not measured) and why, in words.
    """
    target = ADVICE_LIMITS["keep_target"]
    measured = [p for p in points if _share(p) is not None]
    if not measured:
        return None, "no sweep in the results: rejection thresholds cannot be tuned"
    per_step = recent and any(p.per_step is not None for p in measured)
    rule = (
        f"≥ {pct(target, 0)} of the tokens over the whole dump and over the recent steps, and "
        f"≥ {pct(ADVICE_LIMITS['worst_step_keep'], 0)} at every step"
        if per_step
        else f"≥ {pct(target, 0)} of the tokens"
    )
    for i, point in enumerate(measured):
        judged = _judged(point, recent)
        if _falls_short(judged) is not None:
            continue
        kept = judged[0][1]
        if kept >= 1.0:
            return None, (
                f"at {_threshold(point)}, the tightest threshold keeping {rule}, rejection "
                "removes nothing"
            )
        tighter = measured[i - 1] if i > 0 else None
        beyond = ""
        if tighter is not None:
            short_of = _falls_short(_judged(tighter, recent))
            if short_of is not None:
                beyond = f"; {_threshold(tighter)} would keep only {pct(short_of[1])} {short_of[0]}"
        shown = ", ".join(f"{pct(share)} {where}" for where, share, _ in judged)
        return point, (
            f"threshold {_threshold(point)} is the tightest that keeps {rule} (kept: {shown}"
            f"{beyond})"
        )
    loosest = measured[-1]
    short_of = _falls_short(_judged(loosest, recent))
    assert short_of is not None
    where, share, _ = short_of
    where = "" if where == "over the whole dump" else f" {where}"
    return None, (
        f"even the loosest threshold ({_threshold(loosest)}) keeps only {pct(share)} of the "
        f"tokens{where}: the mismatch is too broad to reject"
    )


def choose_is_threshold(
    entries: Entries, shown: float | None = None, recent: bool = False
) -> tuple[float, str]:
    """C = 2 (verl's default) unless truncation there removes > ``is_mass_removed`` of the weight
    mass; then the smallest larger grid C that does not. With ``recent`` (the mismatch grows), C
    must also keep within the limit at every one of the recent steps.

    ``shown``: the IS mass the recommended configuration truncates (measured), quoted instead of the
    token-TIS-alone sweep point so the reason and the expected figures give one number.
    """
    limit = ADVICE_LIMITS["is_mass_removed"]
    points = [p for p in entries.points("is") if _share(p, "weight_mass_removed") is not None]
    if not points:
        return DEFAULT_IS_THRESHOLD, "C = 2 is verl's default (no sweep of C in the results)"
    larger = [p for p in points if float(_threshold(p)) >= DEFAULT_IS_THRESHOLD]

    def worst_recent(point: Entry) -> tuple[float, str] | None:
        if not recent or point.recent_removed is None:
            return None
        return point.recent_removed()

    for point in larger:
        removed = _share(point, "weight_mass_removed")
        assert removed is not None
        late = worst_recent(point)
        if removed > limit or (late is not None and late[0] > limit):
            continue
        c = float(_threshold(point))
        here = (
            f"truncation removes {pct(removed)}"
            if shown is None
            else f"the recommended configuration truncates {pct(shown)}"
        )
        recently = (
            ""
            if late is None or late[0] == 0
            else f"; token TIS at this C truncates at most {pct(late[0])} at a recent step "
            f"({late[1]})"
        )
        if c == DEFAULT_IS_THRESHOLD:
            return c, (
                f"C = 2 (verl's default): {here} of the IS weight mass (limit {pct(limit, 0)})"
                f"{recently}"
            )
        at_two = next((p for p in larger if float(_threshold(p)) == DEFAULT_IS_THRESHOLD), None)
        where = ""
        if at_two is not None and (_share(at_two, "weight_mass_removed") or 0.0) <= limit:
            where = " at a recent step"
        return c, (
            f"C = {_threshold(point)}: at C = 2 truncation would remove more than "
            f"{pct(limit, 0)} of the IS weight mass{where}; with C = {_threshold(point)} {here}"
            f"{recently}"
        )
    last = larger[-1] if larger else points[-1]
    return float(_threshold(last)), (
        f"C = {_threshold(last)}, the largest tried: truncation still removes "
        f"{pct(_share(last, 'weight_mass_removed'))} of the IS weight mass"
    )
