"""`rcdiag check` and `rcdiag baseline` end to end on synthetic dumps with controlled mismatch.

The judged scenarios (fixed seeds): a healthy dump passes the default rules; the same dump with its
mismatch doubled, or with drift injected in late steps, fails the relevant rules; dumps drawn from the
baseline's distribution with other seeds are not flagged against it, a doubled mismatch is.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rcdiag.checks.defaults import BASELINE_DIRECTIONS
from rcdiag.cli import app
from rcdiag.io.writer import write_dump
from rcdiag.synth import SynthConfig, generate_step, write_synthetic_dump

runner = CliRunner()

NOISE = 0.025
"""Healthy: k3_kl ≈ σ²/2 ≈ 3e-4 (gate 1e-3); doubled, ≈ 1.25e-3."""
SHAPE = {"steps": 16, "rows_per_step": 16, "mean_length": 64}
DRIFT_FROM = 11


def run(*args: object, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args], env=env)
    return result.exit_code, result.stdout, result.stderr


def synth(path: Path, seed: int, noise: float = NOISE) -> Path:
    write_synthetic_dump(path, SynthConfig(seed=seed, noise=noise, **SHAPE))
    return path


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("dumps")
    out = {
        "healthy": synth(root / "healthy.parquet", seed=1),
        "doubled": synth(root / "doubled.parquet", seed=1, noise=2 * NOISE),
        **{f"seed{s}": synth(root / f"seed{s}.parquet", seed=s) for s in (2, 3, 4)},
        "doubled_seed2": synth(root / "doubled2.parquet", seed=2, noise=2 * NOISE),
    }
    calm = SynthConfig(seed=1, noise=NOISE, **SHAPE)
    hot = SynthConfig(seed=1, noise=2 * NOISE, **SHAPE)
    for step in range(SHAPE["steps"]):
        batch = generate_step(hot if step >= DRIFT_FROM else calm, step)
        write_dump(
            root / "late" / f"step={step}" / "part-0.parquet",
            batch.rollout_log_probs,
            batch.old_log_probs,
            batch.response_mask,
            step=step,
        )
    out["late"] = root / "late"
    code, _, err = run("baseline", out["healthy"], "-o", root / "baseline.json", "-q")
    assert code == 0, err
    out["baseline"] = root / "baseline.json"
    return out


def check_json(tmp_path: Path, *args: object, expect: int) -> dict[str, Any]:
    out = tmp_path / "check.json"
    code, stdout, stderr = run("check", *args, "--json", out, "-q")
    assert code == expect, stdout + stderr
    return json.loads(out.read_text())


def statuses(document: dict[str, Any]) -> dict[str, str]:
    return {r["name"]: r["status"] for r in document["rules"]}


K3_WATCH = "warn: rollout_corr/k3_kl.overall <= 0.001"
K3_ACT = "rollout_corr/k3_kl.overall <= 0.1"
DRIFT = "diagnosis: growing_drift (act)"


def test_healthy_dump_passes_the_default_rules(dumps: dict[str, Path], tmp_path: Path) -> None:
    code, stdout, stderr = run("check", dumps["healthy"])
    assert code == 0, stderr
    assert K3_ACT in stdout and "PASSED" in stdout
    document = check_json(tmp_path, dumps["healthy"], expect=0)
    assert set(statuses(document).values()) == {"pass"}
    assert document["passed"] is True and document["exit_code"] == 0
    assert document["diagnosis"]["verdict"] == "healthy"
    assert {K3_WATCH, K3_ACT, "rollout_corr/chi2_token.overall <= 1"} <= set(statuses(document))


def test_doubled_mismatch_is_watched_not_failed(dumps: dict[str, Path], tmp_path: Path) -> None:
    """k3_kl ≈ 1.25e-3 is past the watch limit 1e-3, far from the act limit 0.1: reported, and the
    run passes, as the verdict is watch."""
    code, stdout, _ = run("check", dumps["doubled"])
    assert code == 0
    assert "PASSED" in stdout
    document = check_json(tmp_path, dumps["doubled"], expect=0)
    result = statuses(document)
    assert result[K3_WATCH] == "warn"
    assert result[K3_ACT] == "pass"
    assert document["diagnosis"]["verdict"] == "watch"


def test_late_drift_fails_through_the_diagnosis_and_names_the_step(
    dumps: dict[str, Path], tmp_path: Path
) -> None:
    document = check_json(tmp_path, dumps["late"], expect=1)
    result = statuses(document)
    assert result[K3_ACT] == "pass", "the overall value alone would not catch it"
    assert result[DRIFT] == "fail"
    assert document["diagnosis"]["verdict"] == "act"
    drift = next(c for c in document["diagnosis"]["causes"] if c["id"] == "growing_drift")
    assert drift["evidence"]["change_step"] == DRIFT_FROM
    assert f"at step {DRIFT_FROM} " in drift["summary"]
    assert drift["evidence"]["relative_change"] == pytest.approx(3.0, rel=0.3)  # k3 ∝ σ²: ×4


def test_explicit_rise_rules_still_locate_the_step(dumps: dict[str, Path], tmp_path: Path) -> None:
    rise = "rollout_corr/k3_kl.rise <= 0.5"
    document = check_json(tmp_path, dumps["late"], "--rule", rise, expect=1)
    rule = next(r for r in document["rules"] if r["name"] == rise)
    assert rule["status"] == "fail" and rule["step"] == DRIFT_FROM
    assert f"a step change at step {DRIFT_FROM}" in rule["detail"]


@pytest.mark.parametrize("seed", [2, 3, 4])
def test_same_distribution_is_not_flagged_against_the_baseline(
    dumps: dict[str, Path], tmp_path: Path, seed: int
) -> None:
    document = check_json(tmp_path, dumps[f"seed{seed}"], "--baseline", dumps["baseline"], expect=0)
    baseline_rules = [r for r in document["rules"] if r["baseline"] is not None]
    assert len(baseline_rules) == len(BASELINE_DIRECTIONS)
    assert all(r["status"] == "pass" for r in baseline_rules), [
        (r["name"], r["detail"]) for r in baseline_rules if r["status"] != "pass"
    ]


@pytest.mark.parametrize("dump", ["doubled", "doubled_seed2"])
def test_doubled_mismatch_is_flagged_against_the_baseline(
    dumps: dict[str, Path], tmp_path: Path, dump: str
) -> None:
    document = check_json(tmp_path, dumps[dump], "--baseline", dumps["baseline"], expect=1)
    rules = {r["name"]: r for r in document["rules"]}
    for name in (
        "rollout_corr/k3_kl.overall <= baseline",
        "rcdiag/abs_log_ratio_mean.overall <= baseline",
        "rollout_corr/chi2_token.overall <= baseline",
    ):
        assert rules[name]["status"] == "fail", rules[name]["detail"]
        low, high = rules[name]["baseline"]["interval"]
        assert low <= rules[name]["baseline"]["delta"] <= high
    assert document["baseline"]["path"] == str(dumps["baseline"])


def test_baseline_document_is_reproducible(dumps: dict[str, Path], tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    for out, seed in ((a, 7), (b, 7), (c, 8)):
        code, _, err = run("baseline", dumps["healthy"], "-o", out, "--seed", seed, "-q")
        assert code == 0, err
    first, again, other = (json.loads(p.read_text()) for p in (a, b, c))
    assert first["schema_version"] == 2 and first["kind"] == "rcdiag-baseline"
    assert first["dialect"] == "latest" and first["rcdiag_version"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", first["created"])
    assert first["source"]["paths"] == [str(dumps["healthy"])]
    assert first["bootstrap"]["seed"] == 7 and first["bootstrap"]["replicates"] == 500
    assert first["bootstrap"]["metrics"] == again["bootstrap"]["metrics"]
    assert first["bootstrap"]["metrics"] != other["bootstrap"]["metrics"]
    assert "rcdiag/abs_log_ratio_max" not in first["bootstrap"]["metrics"], "not bootstrapped"
    code, stdout, _ = run("baseline", dumps["healthy"], "-o", tmp_path / "d.json")
    assert code == 0 and "rollout_corr/k3_kl" in stdout


def test_junit_markdown_and_step_summary(dumps: dict[str, Path], tmp_path: Path) -> None:
    junit, md, summary = tmp_path / "r.xml", tmp_path / "r.md", tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    args = ["check", dumps["doubled"], "--baseline", dumps["baseline"], "--junit", junit]
    code, _, _ = run(
        *args,
        "--markdown",
        md,
        "--json",
        tmp_path / "r.json",
        "-q",
        env={"GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert code == 1
    document = json.loads((tmp_path / "r.json").read_text())
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("name") == "rcdiag check"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [r["name"] for r in document["rules"]]
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert failed == [r["name"] for r in document["rules"] if r["status"] == "fail"]
    assert suite.get("failures") == str(len(failed)) and suite.get("tests") == str(len(cases))
    text = md.read_text()
    assert text.startswith("### rcdiag check: FAILED")
    assert "| FAIL | `rollout_corr/k3_kl.overall <= baseline` |" in text
    assert summary.read_text() == "earlier step\n" + text + "\n", "appended, not replaced"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")], "atomic writes"


def test_warn_severity_and_skipped_rules_do_not_fail(
    dumps: dict[str, Path], tmp_path: Path
) -> None:
    document = check_json(
        tmp_path,
        dumps["healthy"],
        "--rule",
        "warn: rollout_corr/k3_kl.overall < 1e-9",
        "--rule",
        "rcdiag/abs_log_ratio_mean.slope < 1",
        "--step",
        "3",
        expect=0,
    )
    assert [r["status"] for r in document["rules"]] == ["warn", "skipped"]
    assert document["counts"] == {"pass": 0, "fail": 0, "warn": 1, "skipped": 1}


def test_rules_file_with_presets_and_defaults(dumps: dict[str, Path], tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(
        "include_defaults = true\n"
        'rules = ["preset:decoupled_geo_rs/rollout_corr/rollout_rs_masked_fraction.max_step < 1"]\n'
        "[[rule]]\n"
        'name = "IS mean near 1"\n'
        'metric = "preset:decoupled_token_is/rollout_corr/rollout_is_mean"\n'
        'op = "between"\nvalue = [0.99, 1.01]\n'
    )
    document = check_json(tmp_path, dumps["healthy"], "--rules", rules, expect=0)
    by_name = {r["name"]: r for r in document["rules"]}
    assert K3_ACT in by_name, "include_defaults"
    is_mean = by_name["IS mean near 1"]
    out = tmp_path / "presets.json"
    code, _, _ = run(
        "compare-presets", dumps["healthy"], "-p", "decoupled_token_is", "--json", out, "-q"
    )
    assert code == 0
    (entry,) = json.loads(out.read_text())["presets"]
    assert is_mean["value"] == entry["overall"]["rollout_corr/rollout_is_mean"]


def test_baseline_adopts_dialect_and_refuses_mismatches(
    dumps: dict[str, Path], tmp_path: Path
) -> None:
    legacy = tmp_path / "legacy.json"
    code, _, _ = run("baseline", dumps["healthy"], "-o", legacy, "--dialect", "legacy", "-q")
    assert code == 0
    document = check_json(tmp_path, dumps["seed2"], "--baseline", legacy, expect=0)
    assert document["dialect"] == "legacy"
    code, _, err = run("check", dumps["seed2"], "--baseline", legacy, "--dialect", "latest")
    assert code == 2
    assert err.strip() == (
        f"Error: {legacy}: the baseline was made with --dialect legacy, this run uses --dialect "
        "latest; metrics of different dialects are not comparable"
    )
    newer = json.loads(legacy.read_text()) | {"schema_version": 3}
    (tmp_path / "newer.json").write_text(json.dumps(newer))
    code, _, err = run("check", dumps["seed2"], "--baseline", tmp_path / "newer.json")
    assert code == 2 and "baseline schema_version 3, but this rcdiag" in err
    code, _, err = run("check", dumps["seed2"], "--baseline", legacy, "--veto-threshold", "0.01")
    assert code == 2 and "the baseline used veto threshold 0.0001, this run 0.01" in err


def _bad(tmp_path: Path, dumps: dict[str, Path], kind: str) -> tuple[list[object], str]:
    dump = dumps["healthy"]
    if kind == "unknown_metric":
        return [dump, "--rule", "rollout_corr/k3_k.overall < 1e-3"], (
            "rule 'rollout_corr/k3_k.overall < 1e-3': unknown metric 'rollout_corr/k3_k' in the "
            "analyze results; closest: rollout_corr/k3_kl"
        )
    if kind == "unknown_preset":
        return [dump, "--rule", "preset:decoupled_geo/rollout_corr/kl < 1"], (
            "unknown preset 'decoupled_geo'; closest: decoupled_geo_rs"
        )
    if kind == "malformed":
        return [dump, "--rule", "rollout_corr/k3_kl.overall << 1"], "--rule: rule"
    if kind == "rules_missing":
        return [dump, "--rules", tmp_path / "nope.toml"], "nope.toml: cannot read rules file"
    if kind == "rules_not_toml":
        (tmp_path / "bad.toml").write_text("rules = [")
        return [dump, "--rules", tmp_path / "bad.toml"], "bad.toml: not valid TOML"
    if kind == "baseline_missing":
        return [dump, "--baseline", tmp_path / "b.json"], "b.json: cannot read baseline"
    if kind == "baseline_not_json":
        (tmp_path / "b.json").write_text("{")
        return [dump, "--baseline", tmp_path / "b.json"], "b.json: not valid JSON"
    if kind == "analyze_as_baseline":
        out = tmp_path / "analyze.json"
        assert run("analyze", dump, "--json", out, "-q")[0] == 0
        return [dump, "--baseline", out], "analyze.json: not a baseline made by `rcdiag baseline`"
    if kind == "baseline_rule_without_baseline":
        return [dump, "--rule", "rcdiag/ess_seq.overall >= baseline"], "pass --baseline FILE"
    if kind == "bad_setting":
        return [dump, "--confidence", "1.5"], "--confidence must be strictly between 0 and 1"
    if kind == "missing_dump":
        return [tmp_path / "nope.parquet"], "no such file or directory"
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind",
    [
        "unknown_metric",
        "unknown_preset",
        "malformed",
        "rules_missing",
        "rules_not_toml",
        "baseline_missing",
        "baseline_not_json",
        "analyze_as_baseline",
        "baseline_rule_without_baseline",
        "bad_setting",
        "missing_dump",
    ],
)
def test_bad_input_is_exit_2_with_one_line(
    dumps: dict[str, Path], tmp_path: Path, kind: str
) -> None:
    args, fragment = _bad(tmp_path, dumps, kind)
    code, stdout, err = run("check", *args)
    assert code == 2
    lines = err.strip().splitlines()  # (a transient progress bar may leave a blank line)
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    assert fragment in err
    assert "Traceback" not in err and "PASSED" not in stdout


def test_baseline_bad_options_are_exit_2(dumps: dict[str, Path], tmp_path: Path) -> None:
    for count in (5, 10**9):
        args = ("-o", tmp_path / "b.json", "--replicates", count)
        code, _, err = run("baseline", dumps["healthy"], *args)
        assert code == 2 and "--replicates must lie in [10, 100,000]" in err
    code, _, err = run("baseline", tmp_path / "nope.parquet", "-o", tmp_path / "b.json")
    assert code == 2 and err.strip().startswith("Error: ")
    assert not (tmp_path / "b.json").exists()


def test_a_crash_is_exit_2_never_1(dumps: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("rcdiag.run.check.evaluate_rules", broken)
    code, _, err = run("check", dumps["healthy"], "-q")
    assert code == 2
    assert "Error: internal error (RuntimeError: boom); rerun with --debug" in err


def test_a_config_file_selects_its_dialect(dumps: dict[str, Path], tmp_path: Path) -> None:
    geo = tmp_path / "geo.yaml"
    geo.write_text("rollout_rs: geometric\nrollout_rs_threshold: 1.05\n")  # legacy keys
    rule = "preset:geo/rollout_corr/rollout_rs_masked_fraction.overall <= 1"
    code, _, stderr = run("check", dumps["healthy"], "-c", geo, "-r", rule, "-q")
    assert code == 0, stderr
    code, _, stderr = run("check", dumps["healthy"], "-c", geo, "-r", rule, "--dialect", "latest")
    assert code == 2
    assert "uses legacy-dialect keys but --dialect latest was given" in stderr
