"""Typed results (rcdiag.model): every document rcdiag writes reads back to the same document, and a
wrongly typed value is reported as the file and the field."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rcdiag import SCHEMA_VERSION
from rcdiag.checks.baseline import make_baseline
from rcdiag.cli import app
from rcdiag.correction.loading import resolve_configs
from rcdiag.correction.sweep import build_sweep
from rcdiag.errors import InputError
from rcdiag.metrics.analysis import AnalyzeOptions
from rcdiag.metrics.bootstrap import BASELINE_STREAM
from rcdiag.model import (
    AnalysisResult,
    Baseline,
    ComparisonResult,
    Diagnosis,
    MetricStatus,
    Profile,
    ReportDocument,
    SourceInfo,
    StepResult,
)
from rcdiag.run.consumers import BootstrapRequest, Request
from rcdiag.run.documents import ReportOptions, build_report_document
from rcdiag.run.dump import DumpSpec
from rcdiag.run.engine import run
from rcdiag.run.results import analysis_result, analyze_dump, compare_dump

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_data"
DUMPS = {
    "bf16": SAMPLES / "bf16.parquet",
    "fp8": SAMPLES / "fp8.parquet",
    "heavy_tails": SAMPLES / "heavy_tails.parquet",
    "long_responses": SAMPLES / "long_responses.parquet",
    "drift": SAMPLES / "drift",
    "model/stale": SAMPLES / "model" / "stale",
    "model/swapped": SAMPLES / "model" / "swapped",
}
runner = CliRunner()


def as_read(document: dict[str, Any]) -> dict[str, Any]:
    """The document as a file holds it: dumped to JSON (NaN as null) and loaded back."""
    return json.loads(json.dumps(document, allow_nan=False))


@functools.cache
def analyze_json(sample: str) -> dict[str, Any]:
    return as_read(analyze_dump(DumpSpec([str(DUMPS[sample])]), AnalyzeOptions()).to_json())


@functools.cache
def compare_json(sample: str, dialect: str) -> dict[str, Any]:
    chosen, configs = resolve_configs(None, (), dialect)  # type: ignore[arg-type]
    target = "seq_mean_k1" if chosen == "latest" else "rs_geometric"
    sweep = build_sweep(target, chosen)
    return as_read(compare_dump(DumpSpec([str(DUMPS[sample])]), configs, chosen, sweep).to_json())


@functools.cache
def _report(sample: str, dialect: str) -> ReportDocument:
    spec = DumpSpec([str(DUMPS[sample])])
    return build_report_document(spec, ReportOptions(dialect=dialect))  # type: ignore[arg-type]


def report_json(sample: str, dialect: str = "latest") -> dict[str, Any]:
    return as_read(_report(sample, dialect).to_json())


@functools.cache
def baseline_json(sample: str) -> dict[str, Any]:
    request = Request(AnalyzeOptions(), bootstrap=BootstrapRequest(20, 0, BASELINE_STREAM))
    done = run(DumpSpec([str(DUMPS[sample])]), request)
    reps = done.replicates()
    assert reps is not None
    created = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    made = make_baseline(analysis_result(done), reps, seed=0, created=created)
    return as_read(made.to_json())


# --- round trips ---------------------------------------------------------------------------------


@pytest.mark.parametrize("sample", list(DUMPS))
def test_analyze_documents_read_back_unchanged(sample: str) -> None:
    document = analyze_json(sample)
    result = AnalysisResult.from_json(document, source="run.json")
    assert result.to_json() == document
    assert isinstance(result.step_results[0], StepResult) and isinstance(
        result.diagnosis, Diagnosis
    )
    assert all(isinstance(c, MetricStatus) for c in result.checks)
    assert result.overall == document["overall"]


@pytest.mark.parametrize(
    ("sample", "dialect"), [("heavy_tails", "latest"), ("drift", "latest"), ("bf16", "legacy")]
)
def test_compare_presets_documents_read_back_unchanged(sample: str, dialect: str) -> None:
    document = compare_json(sample, dialect)
    assert document["sweep"]["points"] and document["presets"][0]["steps"][0]["metrics"]
    assert ComparisonResult.from_json(document, source="c.json").to_json() == document


@pytest.mark.parametrize(
    ("sample", "dialect"),
    [("drift", "latest"), ("heavy_tails", "latest"), ("bf16", "legacy")],
)
def test_report_documents_read_back_unchanged(sample: str, dialect: str) -> None:
    document = report_json(sample, dialect)
    read = ReportDocument.from_json(document, source="r.json")
    assert read.to_json() == document
    assert isinstance(read.profile, Profile) and read.verdict is not None
    assert read.verdict.to_json() == document["verdict"]
    if dialect == "legacy":  # an alias maps to the preset it duplicates
        assert document["preset_aliases"] == {"token_tis": "token_is"}


@pytest.mark.parametrize("sample", ["bf16", "drift"])
def test_baselines_read_back_unchanged(sample: str) -> None:
    document = baseline_json(sample)
    baseline = Baseline.from_json(document, source="b.json")
    assert baseline.to_json() == document
    assert baseline.replicates == 20 and baseline.bootstrap
    assert all(values.size == 20 for values in baseline.bootstrap.values())


def test_the_report_holds_the_analyze_document() -> None:
    analysis = _report("drift", "latest").analysis
    assert analysis is not None
    assert as_read(analysis.to_json()) == analyze_json("drift")


@pytest.mark.parametrize("kind", ["analyze", "compare"])
def test_a_report_reads_analyze_and_compare_presets_documents(kind: str) -> None:
    document = analyze_json("heavy_tails") if kind == "analyze" else compare_json("drift", "latest")
    read = ReportDocument.from_json(document, source="x.json")
    assert read.to_json() == document
    assert (read.analysis is None) == (kind == "compare")


def test_command_line_json_is_the_typed_result(tmp_path: Path) -> None:
    dump = DUMPS["heavy_tails"]
    html = tmp_path / "r.html"
    outputs: list[tuple[str, list[object], type[Any]]] = [
        ("analyze", ["--json"], AnalysisResult),
        ("compare-presets", ["--json"], ComparisonResult),
        ("report", ["-o", html, "--json"], ReportDocument),
        ("baseline", ["--replicates", 10, "-o"], Baseline),
    ]
    for command, options, cls in outputs:
        path = tmp_path / f"{command}.json"
        result = runner.invoke(app, [str(a) for a in (command, dump, *options, path, "-q")])
        assert result.exit_code == 0, result.stderr
        document = json.loads(path.read_text())
        assert document["schema_version"] == SCHEMA_VERSION
        assert cls.from_json(document, source=str(path)).to_json() == document


def test_a_legacy_report_renders_again_from_its_json(tmp_path: Path) -> None:
    results, html = tmp_path / "r.json", tmp_path / "r.html"
    args = ["report", str(DUMPS["bf16"]), "--dialect", "legacy", "-o", str(html)]
    assert runner.invoke(app, [*args, "--json", str(results), "-q"]).exit_code == 0
    again = tmp_path / "again.html"
    result = runner.invoke(app, ["report", "--from", str(results), "-o", str(again), "-q"])
    assert result.exit_code == 0, result.stderr
    assert again.read_bytes() == html.read_bytes()


def test_non_finite_numbers_are_written_as_null() -> None:
    step = StepResult(3, 1, 0, {"a": float("nan"), "b": float("inf"), "c": -0.0, "d": 2})
    assert step.to_json()["metrics"] == {"a": None, "b": None, "c": 0.0, "d": 2}
    assert str(step.to_json()["metrics"]["c"]) == "0.0"


# --- hostile values ------------------------------------------------------------------------------

Damage = Callable[[dict[str, Any]], Any]


def _set(path: tuple[Any, ...], value: Any) -> Damage:
    def damage(document: dict[str, Any]) -> None:
        target: Any = document
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return damage


def _delete(path: tuple[Any, ...]) -> Damage:
    def damage(document: dict[str, Any]) -> None:
        target: Any = document
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return damage


def _first_metric(document: dict[str, Any]) -> list[Any]:
    return next(iter(document["bootstrap"]["metrics"].values()))


RESULTS = "run.json: not valid rcdiag results ("
KL = ("metrics", "rollout_corr/kl")

ANALYZE_CASES: dict[str, tuple[Damage, str]] = {
    "text metric": (
        _set(("steps", 3, *KL), "high"),
        RESULTS + "steps[3].metrics['rollout_corr/kl'] is \"high\", expected a number or null)",
    ),
    "boolean overall": (
        _set(("overall", "rollout_corr/k3_kl"), True),
        RESULTS + "overall['rollout_corr/k3_kl'] is true, expected a number or null)",
    ),
    "missing field": (_delete(("steps", 0, "rows")), RESULTS + "steps[0].rows is missing)"),
    "negative count": (
        _set(("source", "valid_tokens"), -1),
        RESULTS + "source.valid_tokens is -1, expected an integer ≥ 0)",
    ),
    "float step": (
        _set(("source", "empty_steps"), [1.5]),
        RESULTS + "source.empty_steps[0] is 1.5, expected an integer)",
    ),
    "zero veto": (
        _set(("options", "effective_veto_threshold"), 0),
        RESULTS + "options.effective_veto_threshold is 0, expected a number > 0)",
    ),
    "unknown status": (
        _set(("checks", 0, "status"), "ok"),
        RESULTS + 'checks[0].status is "ok", expected one of "healthy", "watch", "act")',
    ),
    "unknown kind": (
        _set(("diagnosis", "causes", 0, "kind"), "bug"),
        RESULTS + 'diagnosis.causes[0].kind is "bug", expected one of "dump_bug", "mismatch")',
    ),
    "evidence list": (
        _set(("diagnosis", "causes", 0, "evidence"), [1]),
        RESULTS + "diagnosis.causes[0].evidence is [1], expected an object)",
    ),
    "steps object": (_set(("steps",), {}), RESULTS + "steps is {}, expected a list)"),
    "version": (
        _set(("schema_version",), 99),
        f"run.json: results schema_version 99; this rcdiag reads {SCHEMA_VERSION}",
    ),
    "dialect": (_set(("dialect",), "newest"), "run.json: unknown dialect 'newest'"),
    "source": (_set(("source",), []), "run.json: not rcdiag results (no 'source' object)"),
    "version text": (
        _set(("rcdiag_version",), 1),
        RESULTS + "rcdiag_version is 1, expected a string)",
    ),
}


@pytest.mark.parametrize("case", list(ANALYZE_CASES))
def test_analyze_documents_name_the_wrong_field(case: str) -> None:
    document = copy.deepcopy(analyze_json("drift"))
    damage, message = ANALYZE_CASES[case]
    damage(document)
    with pytest.raises(InputError) as raised:
        AnalysisResult.from_json(document, source="run.json")
    assert str(raised.value).startswith(message), str(raised.value)
    with pytest.raises(InputError) as again:  # the report reads the same fields the same way
        ReportDocument.from_json(document, source="run.json")
    assert str(again.value) == str(raised.value)


def test_not_a_document_at_all() -> None:
    for value in ([], "text", {"hello": 1}):
        with pytest.raises(InputError, match=r"^run\.json: not rcdiag results"):
            AnalysisResult.from_json(value, source="run.json")
    with pytest.raises(InputError, match=r"run.json: not valid rcdiag results \(the document is"):
        SourceInfo.from_json([], source="run.json")


PRESETS = ("presets", 0)

COMPARE_CASES: dict[str, tuple[Damage, str]] = {
    "step figure": (
        _set((*PRESETS, "steps", 1, "summary", "ess"), "x"),
        'presets[0].steps[1].summary.ess is "x", expected a number or null',
    ),
    "step metric": (
        _set((*PRESETS, "steps", 2, *KL), [0.1]),
        "presets[0].steps[2].metrics['rollout_corr/kl'] is [0.1], expected a number or null",
    ),
    "null step metrics": (
        _set((*PRESETS, "steps", 2, "metrics"), None),
        "presets[0].steps[2].metrics is null, expected an object",
    ),
    "step number": (
        _set((*PRESETS, "steps", 0, "step"), "0"),
        'presets[0].steps[0].step is "0", expected an integer',
    ),
    "worst step": (
        _set((*PRESETS, "summary", "worst_steps", "ess", "step"), 2.0),
        "presets[0].summary.worst_steps.ess.step is 2.0, expected an integer",
    ),
    "rejected steps": (
        _set((*PRESETS, "summary", "fully_rejected_steps"), "none"),
        'presets[0].summary.fully_rejected_steps is "none", expected a list',
    ),
    "config": (
        _set((*PRESETS, "config", "rollout_is"), ["token"]),
        'presets[0].config.rollout_is is ["token"], expected a string, number, boolean or null',
    ),
    "threshold": (
        _set(("sweep", "points", 0, "threshold"), 1.5),
        "sweep.points[0].threshold is 1.5, expected a string",
    ),
    "no name": (_delete((*PRESETS, "name")), "presets[0].name is missing"),
}


@pytest.mark.parametrize("case", list(COMPARE_CASES))
def test_compare_presets_documents_name_the_wrong_field(case: str) -> None:
    document = copy.deepcopy(compare_json("drift", "latest"))
    damage, message = COMPARE_CASES[case]
    damage(document)
    with pytest.raises(InputError) as raised:
        ComparisonResult.from_json(document, source="c.json")
    assert str(raised.value) == f"c.json: not valid rcdiag results ({message})"


PROFILE = ("profile",)

REPORT_CASES: dict[str, tuple[Damage, str]] = {
    "edge": (
        _set((*PROFILE, "histogram_edges", 3), None),
        "profile.histogram_edges[3] is null, expected a number)",
    ),
    "count": (
        _set((*PROFILE, "token_log_ratio", "counts", 5), 0.5),
        "profile.token_log_ratio.counts[5] is 0.5, expected an integer",
    ),
    "bucket figure": (
        _set((*PROFILE, "by_position", 0, "tokens"), "many"),
        'profile.by_position[0].tokens is "many", expected a number or null',
    ),
    "top file": (
        _set((*PROFILE, "top_sequences", "by_max_token", 0, "file"), 3),
        "profile.top_sequences.by_max_token[0].file is 3, expected a string or null",
    ),
    "alias": (
        _set(("preset_aliases",), {"a": ["b"]}),
        'preset_aliases.a is ["b"], expected a string',
    ),
    "sweep title": (
        _set(("sweeps", 0, "title"), None),
        "sweeps[0].title is null, expected a string",
    ),
    "purpose": (
        _set((*PRESETS, "purpose"), 1),
        "presets[0].purpose is 1, expected a string",
    ),
    "top_k": (_set(("options", "top_k"), -3), "options.top_k is -3, expected an integer ≥ 0"),
    "verdict": (_set(("verdict",), 7), "verdict is 7, expected an object"),
}


@pytest.mark.parametrize("case", list(REPORT_CASES))
def test_report_documents_name_the_wrong_field(case: str) -> None:
    document = copy.deepcopy(report_json("drift"))
    damage, message = REPORT_CASES[case]
    damage(document)
    with pytest.raises(InputError) as raised:
        ReportDocument.from_json(document, source="r.json")
    assert str(raised.value).startswith(f"r.json: not valid rcdiag results ({message}")


BASELINE = "b.json: not a valid baseline ("

BASELINE_CASES: dict[str, tuple[Damage, str]] = {
    "cut short": (
        lambda d: _first_metric(d).pop(),
        "] holds 19 replicates but bootstrap.replicates is 20; was the file cut short?); "
        "re-create it with `rcdiag baseline`",
    ),
    "text replicate": (
        lambda d: _first_metric(d).__setitem__(2, "x"),
        '] holds "x", expected numbers)',
    ),
    "step metric": (
        _set(("steps", 0, *KL), "x"),
        BASELINE + "steps[0].metrics['rollout_corr/kl'] is \"x\", expected a number or null)",
    ),
    "created": (_set(("created",), 5), BASELINE + "created is 5, expected a string)"),
    "source": (
        _set(("source", "paths"), "a.parquet"),
        BASELINE + 'source.paths is "a.parquet", expected a list)',
    ),
    "kind": (_delete(("kind",)), "b.json: not a baseline made by `rcdiag baseline`"),
    "version": (_set(("schema_version",), 1), "b.json: baseline schema_version 1, but this"),
    "not an object": (lambda d: d.clear(), "b.json: not a baseline made by `rcdiag baseline`"),
}


@pytest.mark.parametrize("case", list(BASELINE_CASES))
def test_baselines_name_the_wrong_field(case: str) -> None:
    document = copy.deepcopy(baseline_json("drift"))
    damage, message = BASELINE_CASES[case]
    damage(document)
    with pytest.raises(InputError) as raised:
        Baseline.from_json(document, source="b.json")
    text = str(raised.value)
    assert text.startswith(message) or (text.startswith(BASELINE) and message in text), text


def test_a_baseline_that_is_not_an_object() -> None:
    with pytest.raises(InputError, match=r"^b.json: not a baseline \(expected a JSON object\)$"):
        Baseline.from_json([1, 2], source="b.json")


# --- documentation -------------------------------------------------------------------------------


def test_every_public_class_and_field_is_documented() -> None:
    import dataclasses
    import inspect

    import rcdiag.model

    docs = (ROOT / "docs" / "report.md").read_text()
    classes = [
        obj
        for name in rcdiag.model.__all__
        if inspect.isclass(obj := getattr(rcdiag.model, name)) and dataclasses.is_dataclass(obj)
    ]
    assert len(classes) >= 18
    for cls in classes:
        assert f"`{cls.__name__}`" in docs, f"docs/report.md does not name {cls.__name__}"
        text = inspect.getdoc(cls) or ""
        for field in dataclasses.fields(cls):
            assert field.name in text, f"{cls.__name__}.{field.name} is not documented"
        assert hasattr(cls, "to_json") and hasattr(cls, "from_json"), cls.__name__
