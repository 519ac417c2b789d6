"""The recommendation: pinned on the five sample dumps, its rules, thresholds, snippets and docs."""

from __future__ import annotations

import copy
import functools
import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from rcdiag.assess.findings import ADVICE_LIMITS, findings, trend
from rcdiag.assess.recommendation.candidates import MAX_K2_THRESHOLD
from rcdiag.assess.recommendation.ranking import (
    RULES,
    Entries,
    Entry,
    choose_is_threshold,
    knee,
    recommend,
)
from rcdiag.assess.recommendation.snippets import (
    cli_overrides,
    matching_preset,
    python_call,
    verl_yaml,
)
from rcdiag.assess.verdict.signals import verdict
from rcdiag.cli import app
from rcdiag.correction.config import detect_dialect, parse_config
from rcdiag.correction.presets import PRESETS
from rcdiag.metrics.offpolicy import DEFAULT_VETO_THRESHOLD
from rcdiag.model import ReportDocument
from rcdiag.run.documents import ReportOptions, analyze_part, build_report_document
from rcdiag.run.dump import DumpSpec

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = {
    "bf16": ROOT / "sample_data" / "bf16.parquet",
    "fp8": ROOT / "sample_data" / "fp8.parquet",
    "heavy_tails": ROOT / "sample_data" / "heavy_tails.parquet",
    "long_responses": ROOT / "sample_data" / "long_responses.parquet",
    "drift": ROOT / "sample_data" / "drift",
}
runner = CliRunner()


@functools.cache
def _built(sample: str, dialect: str) -> ReportDocument:
    spec = DumpSpec([str(SAMPLES[sample])])
    return build_report_document(spec, ReportOptions(dialect=dialect))  # type: ignore[arg-type]


@functools.cache
def _document(sample: str, dialect: str) -> dict[str, Any]:
    return _built(sample, dialect).to_json()


def analyze_only(sample: str) -> dict[str, Any]:
    """The analyze document inside the sample's report document."""
    return analyze_part(_built(sample, "latest")).to_json()


def document(sample: str, dialect: str = "latest") -> dict[str, Any]:
    return copy.deepcopy(_document(sample, dialect))


def fired(doc: dict[str, Any]) -> list[str]:
    return [r["id"] for r in doc["recommendation"]["rules"]]


def primary(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["recommendation"]["choices"][0]


def avoided(doc: dict[str, Any]) -> set[str]:
    return {p["name"] for g in doc["recommendation"]["avoid"] for p in g["presets"]}


# --- the five sample dumps (latest dialect) -------------------------------------------------------


def test_bf16_tiny_mismatch_means_metrics_only() -> None:
    doc = document("bf16")
    assert doc["verdict"]["status"] == "healthy"
    assert fired(doc) == ["tiny"]
    choices = doc["recommendation"]["choices"]
    assert [c["preset"] for c in choices] == ["disabled", "decoupled_token_is", "bypass_ppo_clip"]
    assert primary(doc)["python"].endswith("RolloutCorrectionConfig.disabled()")
    assert doc["recommendation"]["avoid"] == []


def test_fp8_noise_means_token_level_reweighting_without_rejection() -> None:
    doc = document("fp8")
    assert doc["verdict"]["status"] == "act"
    assert {"large", "seq_explodes"} <= set(fired(doc))
    assert "bias" not in fired(doc), "unit-mean noise: kl = σ²/2, far below mean |Δ log p|"
    best = primary(doc)
    assert best["preset"] == "decoupled_token_is"
    assert best["config"]["rollout_is"] == "token" and best["config"]["rollout_rs"] is None
    assert best["expected"]["kept_token_share"] == 1.0
    others = [c["preset"] for c in doc["recommendation"]["choices"][1:]]
    assert "decoupled_token_icepop" in others
    # rejection at verl's default bands would throw the whole fp8 dump away
    assert {"decoupled_geo_rs", "decoupled_seq_is", "bypass_pg_is"} <= avoided(doc)


def test_heavy_tails_with_catastrophic_tokens_means_a_max_criterion() -> None:
    doc = document("heavy_tails")
    assert doc["verdict"]["status"] == "act"
    assert "catastrophic" in fired(doc)
    config = primary(doc)["config"]
    assert config["rollout_is"] == "token"
    assert config["rollout_rs"] == "seq_max_k2"
    assert config["rollout_rs_threshold"] == MAX_K2_THRESHOLD
    assert primary(doc)["evaluated"] == {"kind": "sweep", "ref": f"max@{MAX_K2_THRESHOLD}"}
    assert any("10% alarm" in note for note in doc["recommendation"]["notes"])


def test_long_responses_mean_token_level_not_sequence_level() -> None:
    doc = document("long_responses")
    assert doc["verdict"]["status"] == "watch"
    assert "seq_explodes" in fired(doc) and "tiny" not in fired(doc)
    for choice in doc["recommendation"]["choices"]:
        assert choice["config"]["rollout_is"] != "sequence"
        assert "seq_sum" not in str(choice["config"].get("rollout_rs"))
    assert primary(doc)["preset"] == "decoupled_token_is"
    assert {"decoupled_seq_is", "decoupled_seq_is_rs", "bypass_pg_is"} <= avoided(doc)


def test_drift_means_act_with_rejection_and_a_flag_on_the_trend() -> None:
    doc = document("drift")
    assert doc["verdict"]["status"] == "act"
    assert doc["verdict"]["headline"].startswith("The mismatch grows")
    assert "drift" in fired(doc)
    config = primary(doc)["config"]
    assert config["rollout_is"] == "token"
    assert config["rollout_rs"].split(",")[0] == "seq_mean_k1"
    assert primary(doc)["expected"]["kept_token_share"] >= ADVICE_LIMITS["keep_target"]
    assert any("treats the symptom" in note for note in doc["recommendation"]["notes"])


def test_the_recommendation_changes_across_the_samples() -> None:
    configs = {name: repr(sorted(primary(document(name))["config"].items())) for name in SAMPLES}
    assert len({configs["bf16"], configs["fp8"], configs["heavy_tails"], configs["drift"]}) == 4


# --- legacy dialect ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sample", "expected"),
    [
        ("bf16", {"rollout_is": None, "rollout_rs": None, "rollout_token_veto_threshold": None}),
        ("fp8", {"rollout_is": "token", "rollout_rs": None, "rollout_token_veto_threshold": None}),
        (
            "heavy_tails",
            {"rollout_is": "token", "rollout_token_veto_threshold": DEFAULT_VETO_THRESHOLD},
        ),
        (
            "drift",
            {"rollout_rs": "geometric", "rollout_token_veto_threshold": DEFAULT_VETO_THRESHOLD},
        ),
    ],
)
def test_legacy_dialect_uses_legacy_keys(sample: str, expected: dict[str, Any]) -> None:
    doc = document(sample, "legacy")
    config = primary(doc)["config"]
    for key, value in expected.items():
        assert config[key] == value
    assert "loss_type" not in config
    assert detect_dialect(config) in ("legacy", None)


# --- every choice is valid verl configuration, three ways ----------------------------------------


@pytest.mark.parametrize("dialect", ["latest", "legacy"])
@pytest.mark.parametrize("sample", list(SAMPLES))
def test_snippets_parse_back_to_the_same_configuration(sample: str, dialect: str) -> None:
    for choice in document(sample, dialect)["recommendation"]["choices"]:
        parsed = yaml.safe_load(choice["yaml"])
        block = parsed["algorithm"]["rollout_correction"]
        assert block == choice["config"]
        assert parsed["actor_rollout_ref"]["rollout"]["calculate_log_probs"] is True
        parse_config(block, dialect)  # verl would accept it (raises otherwise)
        assert choice["python"].startswith(
            "from verl.trainer.config.algorithm import RolloutCorrectionConfig"
        )
        if choice["preset"]:
            assert f"RolloutCorrectionConfig.{choice['preset']}(" in choice["python"]
        assert choice["overrides"].count("algorithm.rollout_correction.") == len(block)


def test_python_call_for_a_preset_with_arguments() -> None:
    config = dict(PRESETS["latest"]["decoupled_geo_rs"].config)
    config["rollout_rs_threshold"] = "0.998_1.002"
    assert python_call(config, "latest").endswith(
        'RolloutCorrectionConfig.decoupled_geo_rs(rs_threshold="0.998_1.002")'
    )
    icepop = dict(PRESETS["latest"]["decoupled_token_icepop"].config)
    assert matching_preset(icepop, "latest") == (
        "decoupled_token_icepop",
        {"threshold": 5.0, "threshold_lower": 0.5},
    )


def test_every_preset_round_trips_through_the_snippets() -> None:
    for dialect, registry in PRESETS.items():
        for preset in registry.values():
            text = verl_yaml(dict(preset.config))
            assert yaml.safe_load(text)["algorithm"]["rollout_correction"] == dict(preset.config)
            assert cli_overrides(dict(preset.config)).endswith("calculate_log_probs=True")
            python_call(dict(preset.config), dialect)  # type: ignore[arg-type]


# --- thresholds from the sweeps ----------------------------------------------------------------


def _points(kept: list[float]) -> list[Entry]:
    return [
        Entry("sweep", f"geo@{1 + 0.001 * (i + 1):g}", {}, {"kept_token_share": k})
        for i, k in enumerate(kept)
    ]


def test_knee_is_the_tightest_threshold_keeping_the_target() -> None:
    point, why = knee(_points([0.2, 0.9, 0.96, 0.99, 1.0]))
    assert point is not None and point.ref == "geo@1.003"
    assert "1.002 would keep only 90.0%" in why


def test_knee_rejects_inert_and_hopeless_sweeps() -> None:
    inert, why = knee(_points([0.5, 1.0, 1.0]))
    assert inert is None and "removes nothing" in why
    hopeless, why = knee(_points([0.0, 0.1, 0.5]))
    assert hopeless is None and "too broad" in why
    unmeasured, why = knee([Entry("sweep", "geo@1.001", {}, None)])
    assert unmeasured is None and "no sweep" in why


def test_is_threshold_moves_up_only_when_truncation_removes_too_much() -> None:
    doc = document("heavy_tails")
    assert choose_is_threshold(Entries(doc, "latest"))[0] == 2.0
    for point in next(s for s in doc["sweeps"] if s["key"] == "is")["points"]:
        c = float(point["threshold"])
        point["summary"]["weight_mass_removed"] = 0.2 if c < 5 else 0.01
    c, why = choose_is_threshold(Entries(doc, "latest"))
    assert c == 5.0 and "more than 5%" in why


def _ratio_phrase(text: str) -> tuple[float, float, float]:
    found = re.search(r"×([0-9.e-]+), from ([0-9.e-]+) \(.*?\) to ([0-9.e-]+)", text)
    assert found, text
    return float(found[1]), float(found[2]), float(found[3])


def test_growth_shown_is_the_ratio_of_the_numbers_shown() -> None:
    doc = document("drift")
    texts = [doc["verdict"]["headline"], *doc["recommendation"]["notes"], *primary(doc)["reasons"]]
    phrases = [t for t in texts if "×" in t]
    assert len(phrases) >= 3
    for text in phrases:
        ratio, first, last = _ratio_phrase(text)
        assert ratio == pytest.approx(last / first, rel=0.01), text
    assert not any("from step 0 to step" in t for t in texts)


def test_k3_kl_is_labelled_and_numbers_have_one_source() -> None:
    doc = document("heavy_tails")
    reasons = primary(doc)["reasons"]
    overall = doc["overall"]["rollout_corr/k3_kl"]
    assert any(f"k3_kl = {overall:.2g} overall" in r for r in reasons)
    removed = primary(doc)["expected"]["weight_mass_removed"]
    c_reason = next(r for r in reasons if r.startswith("Token-level truncated IS"))
    assert f"truncates {removed * 100:.1f}%" in c_reason
    length = doc["overall"]["rcdiag/response_length_mean"]
    assert any(f"mean {round(length):,} tokens" in r for r in reasons)


def test_long_responses_cite_the_figure_that_fired() -> None:
    doc = document("long_responses")
    moderate = next(r["text"] for r in doc["recommendation"]["rules"] if r["id"] == "moderate")
    assert moderate.startswith(
        "The per-token mismatch is moderate: mean |Δ log p| = 0.024 overall, past the healthy "
        "range (> 0.02"
    )
    assert "k3_kl = 4.5e-4 overall, within the healthy range (≤ 0.001)" in moderate
    # the headline is the lead reason (sequence weights), the size is said once, the same way
    assert doc["verdict"]["headline"].startswith("At ~3,895 tokens per response the sequence")
    assert "ESS_seq = 0.39 overall, past the healthy range (< 0.5" in doc["verdict"]["headline"]
    assert [s["text"] for s in doc["verdict"]["signals"]] == [moderate.split(". Every")[0] + "."]


def test_yaml_comments_wrap_at_88_characters() -> None:
    long = "token-level truncated IS (C = 2); " * 8
    text = verl_yaml({"rollout_is": "token"}, long)
    assert all(len(line) <= 88 for line in text.splitlines())
    assert yaml.safe_load(text)["algorithm"]["rollout_correction"] == {"rollout_is": "token"}
    assert " ".join(line[2:] for line in text.splitlines() if line.startswith("#")) == long.strip()


# --- findings, trend and verdict edge cases -----------------------------------------------------


def _steps(k3: list[float]) -> list[dict[str, Any]]:
    return [
        {"step": i, "metrics": {"rollout_corr/k3_kl": v, "rcdiag/abs_log_ratio_mean": 0.01}}
        for i, v in enumerate(k3)
    ]


def test_trend_describes_growth_and_the_diagnosis_decides_it() -> None:
    growing = trend(_steps([1e-4 * 2**i for i in range(8)]))
    assert growing is not None
    assert growing.growth == pytest.approx(2**7, rel=1e-6)
    assert growing.first == pytest.approx(1.5e-4) and growing.recent == pytest.approx(9.6e-3)
    assert trend(_steps([1e-4])) is None
    for causes, is_growing, is_drifting in (
        ([], False, False),
        ([{"id": "growing_drift", "kind": "mismatch", "severity": "watch"}], True, False),
        ([{"id": "growing_drift", "kind": "mismatch", "severity": "act"}], True, True),
    ):
        doc = {"steps": _steps([1e-4] * 8), "diagnosis": {"verdict": "watch", "causes": causes}}
        f = findings(doc)
        assert (f.growing, f.drifting) == (is_growing, is_drifting)


def test_analyze_only_results_get_a_verdict_and_default_thresholds() -> None:
    analyze = analyze_only("heavy_tails")
    rec = recommend(analyze).to_json()
    assert rec["measured"] is False
    assert rec["choices"][0]["config"]["rollout_rs"] == "seq_max_k2"
    assert rec["choices"][0]["expected"] is None
    assert "no preset comparison" in rec["notes"][0]  # first: it qualifies everything else
    assert not any("safety valve" in r for c in rec["choices"] for r in c["reasons"])
    drifting = recommend(analyze_only("drift")).to_json()
    assert "no preset comparison" in drifting["notes"][0]
    reasons = [r for c in drifting["choices"] for r in c["reasons"]]
    assert any(r.startswith("The mismatch grows") for r in reasons)
    assert not any("Geometric-mean rejection" in r for r in reasons)  # not in the choice
    assert verdict(analyze).status == "act"


def test_results_without_overall_metrics_give_no_advice() -> None:
    bare = {"schema_version": 2, "dialect": "latest", "source": {}}
    assert recommend(bare).choices == ()
    assert verdict(bare).status is None


def test_nan_metrics_are_treated_as_missing() -> None:
    analyze = analyze_only("bf16")
    analyze["overall"]["rollout_corr/chi2_seq"] = math.nan
    assert findings(analyze).chi2_seq is None
    assert recommend(analyze).choices[0].preset == "disabled"


# --- documentation stays in sync ----------------------------------------------------------------


def test_docs_describe_every_rule_and_limit() -> None:
    docs = (ROOT / "docs" / "recommendation.md").read_text()
    sections = {part.split("\n", 1)[0]: part for part in docs.split("\n## ")}
    rule_section, limit_section = sections["3. The rules"], sections["2. The limits"]
    rules = re.findall(r"^\| `(\w+)` \|", rule_section, flags=re.MULTILINE)
    assert rules == [r.id for r in RULES], "the rule table of the docs differs from RULES"
    limits = dict(re.findall(r"^\| `(\w+)` \| ([0-9.e-]+) \|", limit_section, flags=re.MULTILINE))
    assert set(limits) == set(ADVICE_LIMITS), (
        "the limits table of the docs differs from ADVICE_LIMITS"
    )
    for name, value in ADVICE_LIMITS.items():
        assert float(limits[name]) == value, f"{name}: docs say {limits[name]}, code {value}"


# --- the command ---------------------------------------------------------------------------------


def test_recommend_command_prints_choice_and_config(tmp_path: Path) -> None:
    out = tmp_path / "rec.json"
    result = runner.invoke(app, ["recommend", str(SAMPLES["heavy_tails"]), "--json", str(out)])
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert "ACT:" in text and "Recommended: custom: token TIS + seq_max_k2" in text
    assert 'rollout_rs: "seq_max_k2"' in text and "rollout_rs_threshold: 42.4" in text
    assert "Not recommended for this dump" in text
    again = runner.invoke(app, ["recommend", "--from", str(out)])
    assert again.exit_code == 0
    assert re.sub(r"\s+", " ", again.stdout) == re.sub(r"\s+", " ", text)


def test_recommend_command_legacy_and_errors(tmp_path: Path) -> None:
    result = runner.invoke(app, ["recommend", str(SAMPLES["bf16"]), "--dialect", "legacy"])
    assert result.exit_code == 0
    assert "RolloutCorrectionConfig.disabled()" in result.stdout
    missing = runner.invoke(app, ["recommend"])
    assert missing.exit_code == 2 and missing.stderr.startswith("Error: no input")
    bad = runner.invoke(app, ["recommend", str(tmp_path / "nope.parquet")])
    assert bad.exit_code == 2 and "no such file" in bad.stderr


@pytest.fixture
def results_of_fp8(tmp_path: Path) -> Path:
    out = tmp_path / "fp8.json"
    done = runner.invoke(app, ["recommend", str(SAMPLES["fp8"]), "--json", str(out), "-q"])
    assert done.exit_code == 0, done.stderr
    return out


def test_recommend_output_writes_the_recommended_yaml(tmp_path: Path, results_of_fp8: Path) -> None:
    out = tmp_path / "conf" / "rc.yaml"
    result = runner.invoke(app, ["recommend", "--from", str(results_of_fp8), "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    best = primary(document("fp8"))
    assert out.read_text() == best["yaml"]
    parsed = yaml.safe_load(out.read_text())
    assert parsed["algorithm"]["rollout_correction"] == best["config"]
    assert parsed["actor_rollout_ref"]["rollout"]["calculate_log_probs"] is True
    assert f"wrote {out}" in result.stderr
    assert [p.name for p in out.parent.iterdir()] == ["rc.yaml"]  # no temporary file left
    again = runner.invoke(app, ["recommend", "--from", str(results_of_fp8), "-o", str(out), "-q"])
    assert again.exit_code == 0 and again.stdout == "" and out.read_text() == best["yaml"]


def test_recommend_output_writes_nothing_for_a_dump_bug(tmp_path: Path) -> None:
    out = tmp_path / "rc.yaml"
    result = runner.invoke(
        app, ["recommend", str(ROOT / "sample_data" / "model" / "topp"), "-o", str(out)]
    )
    assert result.exit_code == 0, result.stderr
    assert not out.exists()
    assert "No rollout-correction configuration is recommended" in " ".join(result.stdout.split())
    said = " ".join(result.stderr.split())
    assert f"nothing written to {out}" in said and "processed_logprobs" in said


@pytest.mark.parametrize("clash", ["the --from file", "the --json file"])
def test_recommend_output_refuses_to_overwrite_an_input_or_another_output(
    tmp_path: Path, results_of_fp8: Path, clash: str
) -> None:
    before = results_of_fp8.read_bytes()
    json_out = tmp_path / "again.json"
    target = results_of_fp8 if clash == "the --from file" else json_out
    result = runner.invoke(
        app,
        ["recommend", "--from", str(results_of_fp8), "--json", str(json_out), "-o", str(target)],
    )
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: ") and len(result.stderr.strip().splitlines()) == 1
    assert results_of_fp8.read_bytes() == before and not json_out.exists()
