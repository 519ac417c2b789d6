"""The judgement part of every result document: metric statuses (``checks``) and the diagnosis.

The vocabulary (``healthy`` / ``watch`` / ``act``) is the metric registry's
(:mod:`rcdiag.assess.judge`); the causes are those of :mod:`rcdiag.assess.diagnosis`
(docs/diagnosis.md). Both modules make these records; this one only holds and (de)serializes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, cast

from rcdiag.model.fields import Field, JsonRecord, json_safe, safe_number
from rcdiag.status import STATUSES, Status

Kind = Literal["dump_bug", "mismatch"]
"""``dump_bug``: the dump was made wrongly (fix the pipeline); ``mismatch``: a real mismatch."""
KINDS: tuple[Kind, ...] = ("dump_bug", "mismatch")


@dataclass(frozen=True)
class MetricStatus(JsonRecord):
    """A metric's value and status: one entry of a result document's ``checks``.

    Attributes:
        metric: the metric's name (``rollout_corr/k3_kl``).
        value: its overall value.
        status: the most severe band of the registry the value breaches (``healthy`` when none).
        band: that band as a condition (``k3_kl > 0.001``); None when healthy.
        source: who published the band's limit; None when healthy.
    """

    metric: str
    value: float
    status: Status
    band: str | None
    source: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "value": safe_number(self.value),
            "status": self.status,
            "band": self.band,
            "source": self.source,
        }

    @classmethod
    def read(cls, field: Field) -> MetricStatus:
        return cls(
            metric=field["metric"].string(),
            value=field["value"].number(),
            status=cast(Status, field["status"].choice(STATUSES)),
            band=field["band"].optional_string(),
            source=field["source"].optional_string(),
        )


@dataclass(frozen=True)
class Cause(JsonRecord):
    """One diagnosed cause: what it is, how bad, the numbers behind it, and what to do.

    Attributes:
        id: the detector's id (``growing_drift``, ``swapped_columns``, …; docs/diagnosis.md).
        kind: ``dump_bug`` or ``mismatch``.
        severity: ``watch`` or ``act`` (``healthy`` never names a cause).
        summary: one sentence with the numbers.
        evidence: the statistics the detector decided on, by name (JSON values).
        advice: what to do.
        title: the cause's name as a person reads it (``The mismatch grows during training``).
    """

    id: str
    kind: Kind
    severity: Status
    summary: str
    evidence: dict[str, Any]
    advice: str
    title: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "kind": self.kind,
            "severity": self.severity,
            "summary": self.summary,
            "evidence": json_safe(self.evidence),
            "advice": self.advice,
        }

    @classmethod
    def read(cls, field: Field) -> Cause:
        return cls(
            id=field["id"].string(),
            kind=cast(Kind, field["kind"].choice(KINDS)),
            severity=cast(Status, field["severity"].choice(STATUSES)),
            summary=field["summary"].string(),
            evidence=dict(field["evidence"].mapping()),
            advice=field["advice"].string(),
            title=title.string() if (title := field.get("title")) is not None else "",
        )


@dataclass(frozen=True)
class Spike(JsonRecord):
    """One step alone past a judged metric's band: reported as a spike, it does not set the
    verdict of a dump whose other steps are inside the band.

    Attributes:
        metric: the metric; step: the step; value: its value there.
        typical: the median of the other steps' values.
    """

    metric: str
    step: int
    value: float
    typical: float

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "step": self.step,
            "value": safe_number(self.value),
            "typical": safe_number(self.typical),
        }

    @classmethod
    def read(cls, field: Field) -> Spike:
        return cls(
            metric=field["metric"].string(),
            step=field["step"].integer(),
            value=field["value"].number(),
            typical=field["typical"].number(),
        )


@dataclass(frozen=True)
class Diagnosis(JsonRecord):
    """The verdict-bearing part of every result document (``diagnosis``).

    Attributes:
        verdict: the worst of the metric statuses and of the causes' severities.
        causes: the diagnosed causes; a dump bug, when found, is the only one.
        spikes: isolated spike steps, left out of the verdict (in the JSON only when some).
    """

    verdict: Status
    causes: tuple[Cause, ...] = field(default_factory=tuple)
    spikes: tuple[Spike, ...] = field(default_factory=tuple)

    @property
    def dump_bug(self) -> Cause | None:
        """The dump bug found, if any (the numbers then describe the bug, not the training)."""
        return next((c for c in self.causes if c.kind == "dump_bug"), None)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "verdict": self.verdict,
            "causes": [c.to_json() for c in self.causes],
        }
        if self.spikes:
            out["spikes"] = [s.to_json() for s in self.spikes]
        return out

    @classmethod
    def read(cls, field: Field) -> Diagnosis:
        spikes = field.get("spikes")
        return cls(
            verdict=cast(Status, field["verdict"].choice(STATUSES)),
            causes=tuple(Cause.read(c) for c in field["causes"].items()),
            spikes=() if spikes is None else tuple(Spike.read(s) for s in spikes.items()),
        )
