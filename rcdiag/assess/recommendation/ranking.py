"""The recommendation: measured figures → a ranked choice of configuration, with reasons.

A pure function of a result document (:func:`recommend`), documented rule by rule in
``docs/recommendation.md``. Three steps:

1. **Rules** (:data:`RULES`, data): each is a condition on the
   :class:`~rcdiag.assess.findings.Findings` (limits in :data:`~rcdiag.assess.findings.ADVICE_LIMITS`) and
   what it does to the recommendation; the ones that fire are reported with their reason in plain words.
2. **Composition** (:func:`recommend`): ``tiny`` alone → metrics only. Otherwise token-level truncated
   IS (C from the ``is`` sweep), plus a max criterion when ``catastrophic`` fires, plus geometric-mean
   rejection at the sweep *knee* when ``drift`` fires and ``bias`` does not. The knee is the tightest
   grid threshold that keeps ≥ ``keep_target`` (95%) of the valid tokens and rejects something.
3. **Evidence**: every choice is a configuration the report evaluated (a preset or a sweep point), so
   its expected figures (kept tokens, ESS, IS mass truncated) are measured on the dump. Presets the
   figures argue against are listed with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rcdiag.assess.diagnosis.causes import CAUSE_TITLES
from rcdiag.assess.findings import Findings, findings
from rcdiag.assess.recommendation.candidates import max_threshold
from rcdiag.assess.recommendation.entries import (
    DEFAULT_IS_THRESHOLD,
    Entries,
    Entry,
    _share,
    choose_is_threshold,
    knee,
)
from rcdiag.assess.recommendation.rules import RULES, AdviceRule, drift_fact
from rcdiag.assess.recommendation.snippets import (
    cli_overrides,
    describe,
    matching_preset,
    python_call,
    short_name,
    verl_yaml,
)
from rcdiag.correction.presets import PRESETS
from rcdiag.dialects import DEFAULT_DIALECT, Dialect
from rcdiag.formatting import pct, short
from rcdiag.model.advice import Avoided, Choice, KeptByStep, Recommendation, Statement

MAX_CHOICES = 3
UNMEASURED_NOTE = (
    "These results hold no preset comparison or sweep: thresholds are verl's defaults, the expected "
    "figures are missing and no threshold was tuned (so the choice may differ from the full "
    "report's). Recompute from the dump (rcdiag report or recommend on it) for a measured choice."
)
UNMEASURED_LINE = (
    "these results hold no preset comparison or sweep: "
    "recompute from the dump for a measured choice"
)
SUMMARY_SHOWN = (
    "kept_token_share",
    "kept_sequence_share",
    "ess",
    "weight_mass_removed",
    "max_weight",
)


def _choice(entry: Entry, dialect: Dialect, reasons: list[str], role: str) -> dict[str, Any]:
    config = dict(entry.config)
    preset = matching_preset(config, dialect)
    title = describe(config, dialect)
    expected = (
        {k: entry.summary.get(k) for k in SUMMARY_SHOWN} if entry.summary is not None else None
    )
    return {
        "role": role,
        "preset": preset[0] if preset else None,
        "name": _choice_name(config, preset[0] if preset else None, dialect),
        "title": title,
        "config": config,
        "yaml": verl_yaml(config, f"rcdiag {role}: {title}"),
        "overrides": cli_overrides(config),
        "python": python_call(config, dialect),
        "evaluated": {"kind": entry.kind, "ref": entry.ref} if entry.summary is not None else None,
        "expected": expected,
        "reasons": reasons,
        "per_step": entry.per_step,
    }


def _choice_name(config: Mapping[str, Any], preset: str | None, dialect: Dialect) -> str:
    """The preset's name; a preset re-tuned to other thresholds is named by them too
    (``decoupled_geo_rs@1.05``), so it is never both recommended and, at its defaults, avoided."""
    if preset is None:
        return f"custom: {short_name(config, dialect)}"
    defaults = PRESETS[dialect][preset].config
    changed = [
        str(config[key])
        for key in sorted(config)
        if key.endswith("threshold") and config[key] != defaults.get(key)
    ]
    return preset if not changed else f"{preset}@{','.join(changed)}"


def expected_text(expected: Mapping[str, Any] | None, per_step: KeptByStep | None = None) -> str:
    """A choice's measured figures in words (empty when it was not measured), followed by what it
    keeps step by step when that differs from the whole dump (:attr:`KeptByStep.story`)."""
    if not expected:
        return ""
    story = None if per_step is None else per_step.story
    parts = [f"keeps {pct(expected.get('kept_token_share'))} of the tokens"]
    kept_rows = expected.get("kept_sequence_share")
    if kept_rows is not None and kept_rows < 1.0:
        parts[0] += f" (rejects {pct(1.0 - kept_rows)} of the sequences)"
    if expected.get("weight_mass_removed") is not None:
        parts.append(f"truncates {pct(expected.get('weight_mass_removed'))} of the IS weight mass")
    if expected.get("ess") is not None:
        parts.append(f"ESS {short(expected.get('ess'), 3)}")
    if story is None:
        return "On this dump it " + ", ".join(parts) + "."
    return "Over the whole dump it " + ", ".join(parts) + ". " + story


def _is_sequence_level(config: Mapping[str, Any]) -> bool:
    rs = str(config.get("rollout_rs") or "")
    return config.get("rollout_is") == "sequence" or "seq_sum" in rs or rs == "sequence"


def _avoid(entries: Entries, f: Findings, chosen: set[str]) -> list[dict[str, Any]]:
    """The presets not to use, grouped by reason (each preset under the first that applies);
    never one of the ``chosen`` names (a choice equal to a preset at its own thresholds carries
    the preset's name, a re-tuned one ``preset@threshold``)."""
    groups: list[dict[str, Any]] = []
    listed: set[str] = set(chosen)
    summary = {n: p.get("summary") or {} for n, p in entries.presets.items()}

    def group(reason: str, names: Iterable[str]) -> None:
        fresh = [n for n in names if n not in listed]
        if fresh:
            groups.append({"reason": reason, "presets": [_kept(entries, n) for n in fresh]})
            listed.update(fresh)

    if f.sequence_ratios_explode:
        group(
            "sequence-level ratios explode on this dump: "
            f"ESS_seq = {short(f.ess_seq)}, χ²_seq = {short(f.chi2_seq)}",
            (n for n, p in entries.presets.items() if _is_sequence_level(p["config"])),
        )
    group(
        "reject more than half of the tokens at their default thresholds",
        (n for n, s in summary.items() if (k := s.get("kept_token_share")) is not None and k < 0.5),
    )
    if f.growing:  # a run getting worse: judged on its worst step as well as the whole dump
        worst = {
            n: w
            for n, s in summary.items()
            if n not in listed
            and (w := (s.get("worst_steps") or {}).get("kept_token_share"))
            and w["value"] < 0.5
        }
        if worst:
            group(
                "as the mismatch grows, reject more than half of the tokens of a step at their "
                f"default thresholds ({_steps_text(worst.values())})",
                worst,
            )
    group(
        "reject every token of some steps at their default thresholds (verl's loss would have "
        "nothing to train on there)",
        (n for n, s in summary.items() if s.get("fully_rejected_steps")),
    )
    return groups


def _steps_text(worst: Iterable[Mapping[str, Any]], most: int = 4) -> str:
    """``step 12`` or ``steps 12, 13, 15, …`` (the steps where the presets keep least)."""
    steps = sorted({int(w["step"]) for w in worst})
    shown = ", ".join(str(s) for s in steps[:most]) + (", …" if len(steps) > most else "")
    return ("step " if len(steps) == 1 else "steps ") + shown


def _kept(entries: Entries, name: str) -> dict[str, Any]:
    summary = entries.presets[name].get("summary") or {}
    return {"name": name, "kept_token_share": summary.get("kept_token_share")}


def _tiny_choices(entries: Entries, f: Findings, dialect: Dialect) -> list[dict[str, Any]]:
    disabled = entries.preset("disabled")
    insurance = entries.preset("decoupled_token_is")
    bypass = entries.preset("bypass_ppo_clip" if dialect == "latest" else "ppo_is_bypass")
    because = RULES[0].because(f, dialect)
    return [
        _choice(
            disabled,
            dialect,
            [
                because,
                "verl still logs every rollout_corr/ metric with this configuration: keep watching "
                "k3_kl and mean |Δ log p| (rcdiag analyze on later dumps).",
            ],
            "recommended",
        ),
        _choice(
            insurance,
            dialect,
            [
                "Cheap insurance: at this mismatch token TIS changes almost nothing, and it starts "
                "correcting by itself if the mismatch grows."
            ],
            "alternative",
        ),
        _choice(
            bypass,
            dialect,
            [
                "With one PPO epoch per batch, bypass mode uses the rollout log-probs as π_old and "
                "skips the trainer's extra forward pass; safe while the mismatch stays this small."
            ],
            "alternative",
        ),
    ]


def _corrected_choices(
    entries: Entries, f: Findings, dialect: Dialect, fired: list[AdviceRule]
) -> tuple[list[dict[str, Any]], list[str]]:
    ids = {r.id for r in fired}
    notes: list[str] = []
    c, c_reason = choose_is_threshold(entries, recent=f.growing)
    use_max = "catastrophic" in ids
    geo_point: Entry | None = None
    geo_reason = ""
    if "drift" in ids and "bias" not in ids:
        geo_point, geo_reason = knee(entries.points("geo+max" if use_max else "geo"), f.growing)
        if geo_point is None and entries.measured:
            notes.append(f"Geometric-mean rejection left out: {geo_reason}.")
    if geo_point is not None:
        primary = geo_point
    elif use_max:
        primary = entries.point("max", max_threshold(dialect)) or entries.preset("disabled")
    elif c == DEFAULT_IS_THRESHOLD:
        primary = entries.preset("decoupled_token_is")
    else:
        primary = entries.point("is", f"{c:g}") or entries.preset("decoupled_token_is")

    # reasons for the parts of the chosen configuration only (no geometric-mean valve left out)
    reasons = [
        drift_fact(f) if r.id == "drift" and geo_point is None else r.because(f, dialect)
        for r in fired
        if r.id in ("large", "moderate", "seq_explodes", "bias", "catastrophic", "drift")
    ]
    shown = _share(primary, "weight_mass_removed")
    if shown is not None and primary.config.get("rollout_is_threshold") == c:
        c, c_reason = choose_is_threshold(entries, shown, f.growing)
    reasons.append(
        f"Token-level truncated IS reweights each token by min(π_train/π_rollout, C); {c_reason}."
    )
    if geo_point is not None:
        reasons.append(f"Geometric-mean rejection: {geo_reason}.")
    choices = [_choice(primary, dialect, [r for r in reasons if r], "recommended")]

    alternatives: list[tuple[Entry, str]] = []
    if dialect == "latest":
        icepop = entries.preset("decoupled_token_icepop")
        extra = (
            " Catastrophic tokens get weight 0 without rejecting their sequences."
            if use_max
            else ""
        )
        alternatives.append(
            (
                icepop,
                "Token IcePop keeps every sequence and zeroes the weight of single extreme tokens "
                f"(ratio outside [0.5, 5]) instead of truncating it.{extra}",
            )
        )
    if primary.config.get("rollout_rs") or primary.config.get("rollout_token_veto_threshold"):
        plain = entries.preset("decoupled_token_is")
        alternatives.append(
            (
                plain,
                "Token TIS alone keeps every sequence and relies on truncation; choose it if "
                "rejecting sequences costs you too much data.",
            )
        )
    elif "bias" not in ids:
        point, why = knee(entries.points("geo"), f.growing)
        if point is not None:
            alternatives.append(
                (
                    point,
                    f"Adds geometric-mean rejection of the most off-policy sequences: {why}.",
                )
            )
    seen = {repr(sorted(primary.config.items()))}
    for entry, why in alternatives:
        key = repr(sorted(entry.config.items()))
        if key in seen or len(choices) >= MAX_CHOICES:
            continue
        seen.add(key)
        choices.append(_choice(entry, dialect, [why], "alternative"))
    return choices, notes


def recommend(document: Mapping[str, Any]) -> Recommendation:
    """The ranked configurations for a result document (module docstring, docs/recommendation.md);
    ``choices[0]`` is the recommendation."""
    out = _recommendation(document)
    return Recommendation(
        dialect=out["dialect"],
        rules=tuple(Statement(**r) for r in out["rules"]),
        choices=tuple(Choice(**{**c, "reasons": tuple(c["reasons"])}) for c in out["choices"]),
        avoid=tuple(Avoided(a["reason"], tuple(a["presets"])) for a in out["avoid"]),
        notes=tuple(out["notes"]),
        measured=out["measured"],
        dump_bug=out.get("dump_bug"),
    )


def _recommendation(document: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`recommend` as JSON-ready values: ``{"dialect", "rules": [{id, text}], "choices":
    [{role, preset, name, title, config, yaml, overrides, python, evaluated, expected,
    reasons}], "avoid": [{reason, presets}], "notes": [...], "measured": bool}``."""
    raw_dialect = document.get("dialect") or DEFAULT_DIALECT
    dialect: Dialect = "legacy" if raw_dialect == "legacy" else "latest"
    f = findings(document)
    entries = Entries(document, dialect)
    if not f.complete:
        return {
            "dialect": dialect,
            "rules": [],
            "choices": [],
            "avoid": [],
            "notes": [
                "No recommendation: the results hold no overall k3_kl, kl or mean |Δ log p|."
            ],
            "measured": entries.measured,
        }
    bug = next(
        (c for c in (document.get("diagnosis") or {}).get("causes", []) if c["kind"] == "dump_bug"),
        None,
    )
    if bug is not None:  # no correction for a dump bug: the pipeline needs the fix
        return {
            "dialect": dialect,
            "rules": [
                {"id": bug["id"], "text": f"{bug['summary'][0].upper()}{bug['summary'][1:]}."}
            ],
            "choices": [],
            "avoid": [],
            "notes": [
                f"No rollout-correction configuration is recommended: the dump shows a bug in "
                f"how it was made ({CAUSE_TITLES.get(bug['id'], bug['id']).lower()}), and "
                f"importance sampling or rejection would hide it rather than fix it. {bug['advice']}"
            ],
            "measured": entries.measured,
            "dump_bug": bug["id"],
        }
    fired = [r for r in RULES if r.applies(f)]
    notes: list[str] = []
    if not entries.measured:
        notes.append(UNMEASURED_NOTE)
    if any(r.id == "tiny" for r in fired):
        choices = _tiny_choices(entries, f, dialect)
    else:
        choices, more = _corrected_choices(entries, f, dialect, fired)
        notes += more
    if f.drifting and f.trend is not None:
        t = f.trend
        notes.append(
            f"The mismatch grows over steps {t.first_step}–{t.last_step}: {t.words()}. A "
            "correction treats the symptom: find what changes over training (weight sync between "
            "trainer and rollout engine, engine precision or kernels, a policy drifting toward "
            "low-probability tokens)."
        )
    if f.catastrophic_severe:
        notes.append(
            f"{pct(f.veto_fraction)} of the sequences hold a catastrophic token, above verl's "
            "10% alarm: check the log-prob computation itself (the same tokenizer and chat "
            "template on both sides, sampling temperature and logit processors applied by the "
            "trainer too, numerical issues) before tuning the correction."
        )
    if dialect == "legacy" and f.catastrophic:
        notes.append(
            "The legacy dialect has no max criterion; its veto (rollout_token_veto_threshold) "
            "plays that role. verl since January 2026 replaces it by seq_max_k2."
        )
    return {
        "dialect": dialect,
        "rules": [{"id": r.id, "text": r.because(f, dialect)} for r in fired],
        "choices": choices,
        "avoid": _avoid(entries, f, {c["name"] for c in choices}),
        "notes": notes,
        "measured": entries.measured,
    }


__all__ = [
    "DEFAULT_IS_THRESHOLD",
    "RULES",
    "AdviceRule",
    "Entries",
    "Entry",
    "choose_is_threshold",
    "expected_text",
    "knee",
    "recommend",
]
