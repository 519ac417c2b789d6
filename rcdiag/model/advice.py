"""The two decisions every report carries, typed: the :class:`Verdict` (what is wrong, how bad, the
deciding gauges) and the :class:`Recommendation` (which rollout-correction configuration to use, and
why). Both are made once, when a document is built (:mod:`rcdiag.run.documents`); every output reads
them from the document (docs/report.md, "Results JSON": ``verdict`` and ``recommendation``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rcdiag.model.display import Displayed
from rcdiag.model.fields import Field, JsonRecord, Number, Scalar, json_safe, safe_number


@dataclass(frozen=True)
class Gauge(JsonRecord):
    """Where a deciding figure sits on its metric's published ranges.

    Attributes:
        metric: the metric (``rollout_corr/k3_kl``); label: its display label.
        caption: which part of the dump the value is of (``last steps``, ``whole dump``).
        value: the value placed on the scale; display: the value as shown.
        status: the band's colour class (``ok``, ``warn``, ``fail``), None without a value.
        band: the band in words (``watch: past the healthy range …``), None when healthy.
        source: who published the ranges.
        scale: how the gauge is drawn (``log``, ``lo``, ``hi``, ``bands``, ``markers``).
    """

    metric: str
    label: str
    caption: str
    value: float | None
    display: str
    status: str | None
    band: str | None
    source: str
    scale: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "label": self.label,
            "caption": self.caption,
            "value": safe_number(self.value),
            "display": self.display,
            "status": self.status,
            "band": self.band,
            "source": self.source,
            "scale": json_safe(self.scale),
        }

    @classmethod
    def read(cls, field: Field) -> Gauge:
        return cls(
            metric=field["metric"].string(),
            label=field["label"].string(),
            caption=field["caption"].string(),
            value=field["value"].optional_number(),
            display=field["display"].string(),
            status=field["status"].optional_string(),
            band=field["band"].optional_string(),
            source=field["source"].string(),
            scale=dict(field["scale"].mapping()),
        )


@dataclass(frozen=True)
class FiredSignal(JsonRecord):
    """Another firing signal, no more severe than the verdict: its id, status and sentence."""

    id: str
    status: str
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "status": self.status, "text": self.text}

    @classmethod
    def read(cls, field: Field) -> FiredSignal:
        return cls(field["id"].string(), field["status"].string(), field["text"].string())


@dataclass(frozen=True)
class Verdict(JsonRecord):
    """The verdict of a document (docs/report.md).

    Attributes:
        status: ``healthy``, ``watch`` or ``act`` (None: the document holds too little to judge).
        headline: one sentence: what is wrong, with the numbers; blurb: what the status means.
        lead: the id of the signal or cause that decides (``drift``, a dump bug's id, …).
        deciding: the gauges of the deciding figures; signals: every other firing signal.
    """

    status: str | None
    headline: str
    blurb: str
    lead: str | None
    deciding: tuple[Gauge, ...] = ()
    signals: tuple[FiredSignal, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "headline": self.headline,
            "blurb": self.blurb,
            "lead": self.lead,
            "deciding": [g.to_json() for g in self.deciding],
            "signals": [s.to_json() for s in self.signals],
        }

    @classmethod
    def read(cls, field: Field) -> Verdict:
        return cls(
            status=field["status"].optional_string(),
            headline=field["headline"].string(),
            blurb=field["blurb"].string(),
            lead=field["lead"].optional_string(),
            deciding=tuple(Gauge.read(g) for g in field["deciding"].items()),
            signals=tuple(FiredSignal.read(s) for s in field["signals"].items()),
        )


@dataclass(frozen=True)
class Statement(JsonRecord):
    """A fired rule of the recommendation: its id and why it fired, in words."""

    id: str
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text}

    @classmethod
    def read(cls, field: Field) -> Statement:
        return cls(field["id"].string(), field["text"].string())


@dataclass(frozen=True)
class KeptByStep(JsonRecord):
    """What a configuration keeps at each step, and on the steps a growing run is judged on
    (docs/recommendation.md, "Where the run is going").

    Attributes:
        steps: the training steps; kept_token_share, kept_sequence_share: its kept shares at each
            (None at a step without a valid token).
        recent_steps: the recent steps (the last quarter of the steps with a valid token), first
            and last; recent_count: how many.
        recent_kept_token_share, recent_kept_sequence_share: its kept shares over them, pooled.
        worst_step: the step where it keeps the smallest share of the tokens (None: no step has
            a valid token); worst_kept_token_share, worst_kept_sequence_share: its shares there.
        story: the per-step kept shares in one sentence, when they differ from the whole dump's
            (else None: every step keeps about as much).
    """

    steps: tuple[int, ...]
    kept_token_share: tuple[Number, ...]
    kept_sequence_share: tuple[Number, ...]
    recent_steps: tuple[int, int]
    recent_count: int
    recent_kept_token_share: Number
    recent_kept_sequence_share: Number
    worst_step: int | None
    worst_kept_token_share: Number
    worst_kept_sequence_share: Number
    story: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "step": list(self.steps),
            "kept_token_share": [safe_number(v) for v in self.kept_token_share],
            "kept_sequence_share": [safe_number(v) for v in self.kept_sequence_share],
            "recent": {
                "first_step": self.recent_steps[0],
                "last_step": self.recent_steps[1],
                "steps": self.recent_count,
                "kept_token_share": safe_number(self.recent_kept_token_share),
                "kept_sequence_share": safe_number(self.recent_kept_sequence_share),
            },
            "worst": None
            if self.worst_step is None
            else {
                "step": self.worst_step,
                "kept_token_share": safe_number(self.worst_kept_token_share),
                "kept_sequence_share": safe_number(self.worst_kept_sequence_share),
            },
            "story": self.story,
        }

    @classmethod
    def read(cls, field: Field) -> KeptByStep:
        steps = field["step"].integers()
        tokens = tuple(field["kept_token_share"].number_list())
        sequences = tuple(field["kept_sequence_share"].number_list())
        for name, values in (("kept_token_share", tokens), ("kept_sequence_share", sequences)):
            if len(values) != len(steps):
                raise field[name].problem(f"has {len(values)} values for {len(steps)} steps")
        recent, worst = field["recent"], field["worst"]
        return cls(
            steps=steps,
            kept_token_share=tokens,
            kept_sequence_share=sequences,
            recent_steps=(recent["first_step"].integer(), recent["last_step"].integer()),
            recent_count=recent["steps"].count(),
            recent_kept_token_share=recent["kept_token_share"].optional_number(),
            recent_kept_sequence_share=recent["kept_sequence_share"].optional_number(),
            worst_step=None if worst.is_null() else worst["step"].integer(),
            worst_kept_token_share=None
            if worst.is_null()
            else worst["kept_token_share"].optional_number(),
            worst_kept_sequence_share=None
            if worst.is_null()
            else worst["kept_sequence_share"].optional_number(),
            story=field["story"].optional_string(),
        )


@dataclass(frozen=True)
class Choice(JsonRecord):
    """One ranked configuration (``choices[0]`` of a recommendation is the recommended one).

    Attributes:
        role: ``recommended`` or ``alternative``; preset: the verl preset it equals, if any;
            name: the preset or a ``custom: …`` name; title: the configuration in words.
        config: verl's rollout-correction keys; yaml, overrides, python: the same as verl YAML,
            command-line overrides and a Python call.
        evaluated: where its figures were measured (``{"kind", "ref"}``), None when not measured.
        expected: its measured figures on the dump (``kept_token_share``, ``ess``, …).
        reasons: why it was chosen, one sentence each.
        per_step: what it keeps at each step (:class:`KeptByStep`), None when not measured.
    """

    role: str
    preset: str | None
    name: str
    title: str
    config: Mapping[str, Scalar]
    yaml: str
    overrides: str
    python: str
    evaluated: Mapping[str, Any] | None
    expected: Mapping[str, Number] | None
    reasons: tuple[str, ...]
    per_step: KeptByStep | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "preset": self.preset,
            "name": self.name,
            "title": self.title,
            "config": dict(self.config),
            "yaml": self.yaml,
            "overrides": self.overrides,
            "python": self.python,
            "evaluated": None if self.evaluated is None else dict(self.evaluated),
            "expected": None if self.expected is None else json_safe(dict(self.expected)),
            "reasons": list(self.reasons),
            "per_step": None if self.per_step is None else self.per_step.to_json(),
        }

    @classmethod
    def read(cls, field: Field) -> Choice:
        evaluated, expected = field["evaluated"], field["expected"]
        per_step = field.get("per_step")
        return cls(
            role=field["role"].string(),
            preset=field["preset"].optional_string(),
            name=field["name"].string(),
            title=field["title"].string(),
            config=field["config"].scalars(),
            yaml=field["yaml"].string(),
            overrides=field["overrides"].string(),
            python=field["python"].string(),
            evaluated=None if evaluated.is_null() else dict(evaluated.mapping()),
            expected=None if expected.is_null() else expected.numbers(),
            reasons=field["reasons"].strings(),
            per_step=None if per_step is None or per_step.is_null() else KeptByStep.read(per_step),
        )


@dataclass(frozen=True)
class Avoided(JsonRecord):
    """Presets not recommended at their default thresholds, and why."""

    reason: str
    presets: tuple[Mapping[str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        return {"reason": self.reason, "presets": [json_safe(dict(p)) for p in self.presets]}

    @classmethod
    def read(cls, field: Field) -> Avoided:
        return cls(
            field["reason"].string(), tuple(dict(p.mapping()) for p in field["presets"].items())
        )


@dataclass(frozen=True, repr=False)
class Recommendation(Displayed, JsonRecord):
    """Which rollout-correction configuration to use for a dump, and why
    (docs/recommendation.md).

    Attributes:
        dialect: the verl dialect of the configurations.
        rules: the fired rules; choices: the ranked configurations (none for a dump bug).
        avoid: presets not to use, grouped by reason; notes: what else to know.
        measured: whether the choices' figures were measured on the dump.
        dump_bug: the id of the dump bug that rules out any correction, if one was found.
        framework: the recommended configuration in another framework's keys (``recommend
            --framework``; ``{"id", "title", "exact", "snippet", "notes", …}``), when asked for.
    """

    dialect: str
    rules: tuple[Statement, ...] = ()
    choices: tuple[Choice, ...] = ()
    avoid: tuple[Avoided, ...] = ()
    notes: tuple[str, ...] = ()
    measured: bool = False
    dump_bug: str | None = None
    framework: Mapping[str, Any] | None = None

    @property
    def recommended(self) -> Choice | None:
        """The recommended configuration (None: nothing is recommended)."""
        return self.choices[0] if self.choices else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "dialect": self.dialect,
            "rules": [r.to_json() for r in self.rules],
            "choices": [c.to_json() for c in self.choices],
            "avoid": [a.to_json() for a in self.avoid],
            "notes": list(self.notes),
            "measured": self.measured,
        }
        if self.dump_bug is not None:
            out["dump_bug"] = self.dump_bug
        if self.framework is not None:
            out["framework"] = json_safe(dict(self.framework))
        return out

    @classmethod
    def read(cls, field: Field) -> Recommendation:
        bug, framework = field.get("dump_bug"), field.get("framework")
        measured = field["measured"]
        if not isinstance(measured.value, bool):
            raise measured.wrong("true or false")
        return cls(
            dialect=field["dialect"].string(),
            rules=tuple(Statement.read(r) for r in field["rules"].items()),
            choices=tuple(Choice.read(c) for c in field["choices"].items()),
            avoid=tuple(Avoided.read(a) for a in field["avoid"].items()),
            notes=field["notes"].strings(),
            measured=measured.value,
            dump_bug=None if bug is None else bug.optional_string(),
            framework=None if framework is None or framework.is_null() else framework.mapping(),
        )
