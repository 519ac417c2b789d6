"""The configurations a document measured (presets and sweep points) and how the recommendation
picks thresholds among them: the sweep knee for rejection, C for token-level truncated IS."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rcdiag.assess.findings import ADVICE_LIMITS
from rcdiag.assess.recommendation.candidates import candidate_sweeps
from rcdiag.correction.presets import PRESETS
from rcdiag.dialects import Dialect
from rcdiag.formatting import pct

DEFAULT_IS_THRESHOLD = 2.0


@dataclass(frozen=True)
class Entry:
    """A configuration the recommendation may pick, and what the report measured for it."""

    kind: str  # "preset" or "sweep"
    ref: str  # preset name, or "<sweep key>@<threshold>"
    config: Mapping[str, Any]
    summary: Mapping[str, Any] | None


class Entries:
    """Presets and sweep points of a document; configurations rebuilt when the document lacks them."""

    def __init__(self, document: Mapping[str, Any], dialect: Dialect) -> None:
        self.dialect = dialect
        self.presets = {p["name"]: p for p in document.get("presets") or []}
        self.sweeps = {s.get("key", s.get("target")): s for s in document.get("sweeps") or []}
        self.measured = bool(self.presets) or bool(self.sweeps)

    def preset(self, name: str) -> Entry:
        found = self.presets.get(name)
        if found is not None:
            return Entry("preset", name, found["config"], found.get("summary"))
        return Entry("preset", name, PRESETS[self.dialect][name].config, None)

    def points(self, key: str) -> list[Entry]:
        """The points of sweep ``key``, loosest last (thresholds sorted as numbers)."""
        found = self.sweeps.get(key)
        if found is not None:
            points = [
                Entry("sweep", f"{key}@{p['threshold']}", p["config"], p.get("summary"))
                for p in found["points"]
            ]
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


def knee(points: list[Entry]) -> tuple[Entry | None, str]:
    """The tightest point keeping ≥ ``keep_target`` of the tokens that still rejects something.

    Returns:
        The point (None when rejection is not worth it or was not measured) and why, in words.
    """
    target = ADVICE_LIMITS["keep_target"]
    measured = [p for p in points if _share(p) is not None]
    if not measured:
        return None, "no sweep in the results: rejection thresholds cannot be tuned"
    for i, point in enumerate(measured):
        kept = _share(point)
        assert kept is not None
        if kept < target:
            continue
        if kept >= 1.0:
            return None, (
                f"at {_threshold(point)}, the tightest threshold keeping ≥ {pct(target, 0)} of the "
                "tokens, rejection removes nothing"
            )
        tighter = measured[i - 1] if i > 0 else None
        beyond = (
            f"; {_threshold(tighter)} would keep only {pct(_share(tighter))}" if tighter else ""
        )
        return point, (
            f"threshold {_threshold(point)} is the tightest that keeps ≥ {pct(target, 0)} of the "
            f"tokens ({pct(kept)} kept{beyond})"
        )
    loosest = measured[-1]
    return None, (
        f"even the loosest threshold ({_threshold(loosest)}) keeps only {pct(_share(loosest))} "
        "of the tokens: the mismatch is too broad to reject"
    )


def choose_is_threshold(entries: Entries, shown: float | None = None) -> tuple[float, str]:
    """C = 2 (verl's default) unless truncation there removes > ``is_mass_removed`` of the weight
    mass; then the smallest larger grid C that does not.

    ``shown``: the IS mass the recommended configuration truncates (measured), quoted instead of the
    token-TIS-alone sweep point so the reason and the expected figures give one number.
    """
    limit = ADVICE_LIMITS["is_mass_removed"]
    points = [p for p in entries.points("is") if _share(p, "weight_mass_removed") is not None]
    if not points:
        return DEFAULT_IS_THRESHOLD, "C = 2 is verl's default (no sweep of C in the results)"
    larger = [p for p in points if float(_threshold(p)) >= DEFAULT_IS_THRESHOLD]
    for point in larger:
        removed = _share(point, "weight_mass_removed")
        assert removed is not None
        if removed <= limit:
            c = float(_threshold(point))
            here = (
                f"truncation removes {pct(removed)}"
                if shown is None
                else f"the recommended configuration truncates {pct(shown)}"
            )
            if c == DEFAULT_IS_THRESHOLD:
                return c, (
                    f"C = 2 (verl's default): {here} of the IS weight mass (limit {pct(limit, 0)})"
                )
            return c, (
                f"C = {_threshold(point)}: at C = 2 truncation would remove more than "
                f"{pct(limit, 0)} of the IS weight mass; with C = {_threshold(point)} {here}"
            )
    last = larger[-1] if larger else points[-1]
    return float(_threshold(last)), (
        f"C = {_threshold(last)}, the largest tried: truncation still removes "
        f"{pct(_share(last, 'weight_mass_removed'))} of the IS weight mass"
    )
