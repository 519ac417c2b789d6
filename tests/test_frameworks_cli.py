"""The frameworks on the command line: ``analyze --frameworks``, ``compare-presets --framework``,
``presets --framework``, ``recommend --framework``, and the translation tables."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rcdiag.cli import app
from rcdiag.correction.presets import PRESETS
from rcdiag.frameworks import FRAMEWORKS, parse_frameworks
from rcdiag.frameworks.slime_mis import MIS_KEYS
from rcdiag.frameworks.translate import translate
from rcdiag.model import AnalysisResult, ComparisonResult, ReportDocument

ROOT = Path(__file__).resolve().parent.parent
DRIFT = ROOT / "sample_data" / "drift"
runner = CliRunner()


def invoke(*args: str) -> tuple[int, str, str]:
    done = runner.invoke(app, list(args), env={"COLUMNS": "100"})
    return done.exit_code, done.stdout, done.stderr


def test_analyze_frameworks_json(tmp_path: Path) -> None:
    out = tmp_path / "a.json"
    code, text, _ = invoke("analyze", str(DRIFT), "--frameworks", "trl,nemo-rl", "--json", str(out))
    assert code == 0
    assert "sampling/importance_sampling_ratio/mean" in text and "token_mult_prob_error" in text
    document = json.loads(out.read_text())
    assert [f["framework"] for f in document["frameworks"]] == ["trl", "nemo_rl"]
    entry = document["frameworks"][1]
    assert len(entry["steps"]) == document["source"]["steps"]
    assert {c["metric"] for c in entry["checks"]} == {
        "nemo_rl/token_mult_prob_error",
        "nemo_rl/gen_kl_error",
    }
    # gen_kl_error is verl's k3_kl, prime-rl's mismatch_kl: one estimator under three names
    assert math.isclose(
        entry["overall"]["nemo_rl/gen_kl_error"], document["overall"]["rollout_corr/k3_kl"]
    )
    assert AnalysisResult.from_json(document, source="a.json").to_json() == document
    # where a value depends on a split the dump does not record, the output says so
    assert "per process" in document["frameworks"][0]["aggregation"]
    assert "TRL: per process" in " ".join(text.split())


def test_report_says_how_each_framework_value_maps(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    assert (
        invoke("report", str(DRIFT), "-q", "-o", str(out), "--frameworks", "open_instruct")[0] == 0
    )
    page = out.read_text()
    assert "How each value maps onto what the framework logs" in page
    assert "the last micro-batch" in page


def test_analyze_without_frameworks_has_no_section(tmp_path: Path) -> None:
    out = tmp_path / "a.json"
    assert invoke("analyze", str(DRIFT), "-q", "--json", str(out))[0] == 0
    assert "frameworks" not in json.loads(out.read_text())


def test_unknown_framework_is_a_usage_error() -> None:
    code, _, err = invoke("analyze", str(DRIFT), "--frameworks", "trl,ppo-land")
    assert code == 2 and "unknown framework 'ppo-land'" in err and "open_instruct" in err


def test_parse_frameworks_aliases_and_all() -> None:
    assert [f.id for f in parse_frameworks("NeMo-RL, open-instruct,trl")] == [
        "trl",
        "nemo_rl",
        "open_instruct",
    ]
    assert len(parse_frameworks("all")) == len(FRAMEWORKS)


def test_report_frameworks_section(tmp_path: Path) -> None:
    html, out = tmp_path / "r.html", tmp_path / "r.json"
    args = (
        "report",
        str(DRIFT),
        "-o",
        str(html),
        "--json",
        str(out),
        "--frameworks",
        "slime",
        "-q",
    )
    assert invoke(*args)[0] == 0
    document = json.loads(out.read_text())
    assert document["frameworks"][0]["framework"] == "slime"
    assert 'id="frameworks"' in html.read_text()
    assert ReportDocument.from_json(document, source="r.json").to_json() == document
    code, _, err = invoke("report", "--from", str(out), "-o", str(html), "--frameworks", "trl")
    assert code == 2 and "--frameworks needs the dump" in err


def test_compare_presets_framework_modes(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    code, text, _ = invoke(
        "compare-presets",
        str(DRIFT),
        "--preset",
        "none",
        "--framework",
        "trl,slime",
        "--json",
        str(out),
    )
    assert code == 0
    document = json.loads(out.read_text())
    names = [p["name"] for p in document["presets"]]
    assert names == [p.name for p in (*FRAMEWORKS["trl"].presets, *FRAMEWORKS["slime"].presets)]
    assert all(p["framework"] in ("trl", "slime") for p in document["presets"])
    trl_default = next(p for p in document["presets"] if p["name"] == "trl:sequence_mask")
    assert trl_default["config"]["vllm_importance_sampling_mode"] == "sequence_mask"
    assert not any(k.startswith("rollout_corr/") for k in trl_default["overall"])
    assert "trl:sequence_mask" in text
    assert ComparisonResult.from_json(document, source="c.json").to_json() == document


def test_compare_presets_framework_beside_verl(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    args = ("compare-presets", str(DRIFT), "-p", "decoupled_token_is", "--framework", "trl")
    assert invoke(*args, "--json", str(out), "-q")[0] == 0
    document = json.loads(out.read_text())
    verl, trl = document["presets"][0], document["presets"][1]
    assert "framework" not in verl and trl["framework"] == "trl"
    # token_truncate at C = 3 against verl's token TIS at C = 2: both keep every token
    assert verl["summary"]["kept_token_share"] == trl["summary"]["kept_token_share"] == 1.0


def test_presets_framework() -> None:
    code, text, _ = invoke("presets", "--framework", "openrlhf")
    assert code == 0 and "openrlhf:seq-mask-tis" in text
    assert "algo.advantage.is_correction_level" in text and "OpenRLHF 0.11.2 (PyPI)" in text


def test_recommend_framework_json(tmp_path: Path) -> None:
    out = tmp_path / "rec.json"
    code, text, _ = invoke("recommend", str(DRIFT), "--framework", "trl", "--json", str(out))
    assert code == 0
    assert "TRL configuration" in text
    entry = json.loads(out.read_text())["recommendation"]["framework"]
    assert entry["id"] == "trl" and entry["config"]["vllm_importance_sampling_correction"] is True


@pytest.mark.parametrize("framework", ["nemo_rl", "prime_rl", "areal", "skyrl", "open_instruct"])
def test_recommend_and_compare_presets_for_more_frameworks(framework: str) -> None:
    code, text, _ = invoke("recommend", str(DRIFT), "--framework", framework)
    assert code == 0 and FRAMEWORKS[framework].pin.version in text
    code, text, _ = invoke("compare-presets", str(DRIFT), "--framework", framework)
    assert code == 0 and f"{framework}:" in text


def latest(name: str) -> dict:
    return dict(PRESETS["latest"][name].config)


def test_translate_token_tis_is_exact_everywhere() -> None:
    config = latest("decoupled_token_is")
    trl = translate("trl", config, "latest")
    assert trl.exact and trl.config == {
        "vllm_importance_sampling_correction": True,
        "vllm_importance_sampling_mode": "token_truncate",
        "vllm_importance_sampling_clip_max": 2.0,
    }
    assert "# for trl main, 2026-07 (f2cd577)" in trl.snippet and trl.version.startswith("trl main")
    slime = translate("slime", config, "latest")
    assert (
        slime.exact and "--tis-clip 2.0" in slime.snippet and "slime main, 2026-08" in slime.snippet
    )
    openrlhf = translate("openrlhf", config, "latest")
    assert openrlhf.exact
    assert openrlhf.config["algo.advantage.is_correction_threshold"] == (0.0, 2.0)
    assert openrlhf.config["algo.advantage.is_correction_mode"] == "clip"
    assert "--algo.advantage.is_correction_level token" in openrlhf.snippet


def test_translate_says_what_a_framework_lacks() -> None:
    config = {
        **latest("decoupled_token_is"),
        "rollout_rs": "seq_mean_k1,seq_max_k2",
        "rollout_rs_threshold": "1.05,42.4",
    }
    trl = translate("trl", config, "latest")
    assert not trl.exact and sum("has no rejection" in n for n in trl.notes) == 2
    slime = translate("slime", config, "latest")
    assert not slime.exact and any("has no sequence trust region" in n for n in slime.notes)
    assert slime.config["rs_level"] == "geometric"
    assert math.isclose(slime.config["rs_lower_bound"], 1 / 1.05)  # k1 keeps ρ in [1/1.05, 1.05]
    assert slime.config["rs_upper_bound"] == 1.05
    assert list(slime.config) == list(MIS_KEYS)  # mis.py reads every key of mis.yaml


def test_translate_icepop_and_disabled() -> None:
    icepop = latest("decoupled_token_icepop")
    trl = translate("trl", icepop, "latest")
    assert trl.exact and trl.config["vllm_importance_sampling_mode"] == "token_mask"
    assert trl.config["vllm_importance_sampling_clip_min"] > 0  # TRL's lower bound: IcePop's band
    assert translate("openrlhf", icepop, "latest").exact
    slime = translate("slime", icepop, "latest")
    assert slime.exact and "icepop_function" in slime.snippet
    off = translate("trl", latest("disabled"), "latest")
    assert off.exact and "vllm_importance_sampling_correction=False" in off.snippet


def test_translate_legacy_veto_to_slime() -> None:
    config = dict(PRESETS["legacy"]["decoupled_geo_rs"].config)
    slime = translate("slime", config, "legacy")
    assert slime.config["rs_veto_threshold"] == 1e-4
    assert not slime.exact  # verl's geometric RS alone has no IS; slime's helper needs TIS on


@pytest.mark.parametrize("name", list(PRESETS["latest"]))
@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_every_preset_translates(framework: str, name: str) -> None:
    done = translate(framework, latest(name), "latest")
    assert done.snippet and (done.exact or done.notes)
