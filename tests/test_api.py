"""The Python API (rcdiag.analyze, compare_presets, report, check, baseline): the same numbers as
the commands, tables equal to the JSON documents, exports that read back equal, real signatures."""

from __future__ import annotations

import inspect
import json
import math
import pydoc
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
import typer.main
from typer.testing import CliRunner

import rcdiag
from rcdiag.cli import app
from rcdiag.errors import InputError, UsageError
from rcdiag.model import AnalysisResult, CheckResult, ComparisonResult, ReportDocument

DRIFT = Path(__file__).resolve().parent.parent / "sample_data" / "drift"
PRESETS = ["decoupled_token_is", "decoupled_geo_rs", "decoupled_k3_rs"]
runner = CliRunner()


def cli(*args: object) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def cli_json(tmp_path: Path, *args: object) -> dict[str, Any]:
    out = tmp_path / "cli.json"
    code, _, err = cli(*args, "--json", out, "-q")
    assert code == 0, err
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def with_empty_step(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three steps; step 1 has no valid token (every metric null there)."""
    root = tmp_path_factory.mktemp("dump")
    rng = np.random.default_rng(3)
    for step in range(3):
        rollout = rng.normal(-1.0, 0.3, (6, 9)).clip(max=-0.01)
        old = rollout + rng.normal(0, 0.02, rollout.shape)
        mask = np.ones_like(rollout, dtype=bool) if step != 1 else np.zeros_like(rollout, bool)
        rcdiag.write_dump(root / f"step={step}" / "part-0.parquet", rollout, old, mask, step=step)
    return root


def assert_table_equals_steps(frame: pl.DataFrame, steps: list[dict[str, Any]]) -> None:
    """Every cell of a per-step table equals the JSON document's value (null for null)."""
    assert frame.height == len(steps)
    assert frame.columns[:3] == ["step", "rows", "valid_tokens"]
    assert frame.columns[3:] == list(steps[0]["metrics"])
    assert all(dtype == pl.Float64 for dtype in frame.dtypes[3:])
    for row, entry in zip(frame.iter_rows(named=True), steps, strict=True):
        assert (row["step"], row["rows"], row["valid_tokens"]) == (
            entry["step"],
            entry["rows"],
            entry["valid_tokens"],
        )
        assert {k: row[k] for k in entry["metrics"]} == entry["metrics"]


def test_analyze_is_the_command(tmp_path: Path) -> None:
    result = rcdiag.analyze(str(DRIFT))
    assert isinstance(result, AnalysisResult)
    assert result.to_json() == cli_json(tmp_path, "analyze", DRIFT)
    assert_table_equals_steps(result.steps, result.to_json()["steps"])
    assert result.overall["rollout_corr/k3_kl"] == result.to_json()["overall"]["rollout_corr/k3_kl"]
    assert result.diagnosis.verdict in ("healthy", "watch", "act")


def test_analyze_with_options_and_nulls(with_empty_step: Path, tmp_path: Path) -> None:
    result = rcdiag.analyze(with_empty_step, dialect="legacy", veto_threshold=1e-3, steps=(0, 1))
    document = cli_json(
        tmp_path, "analyze", with_empty_step, "--dialect", "legacy", "--veto-threshold", "1e-3",
        "--steps", "0:1",
    )  # fmt: skip
    assert result.to_json() == document
    assert result.steps["step"].to_list() == [0, 1]
    assert result.steps.row(1, named=True)["rollout_corr/kl"] is None
    assert_table_equals_steps(result.steps, document["steps"])
    assert rcdiag.analyze([with_empty_step], step=[2]).steps["step"].to_list() == [2]


def test_the_table_is_a_copy(with_empty_step: Path) -> None:
    result = rcdiag.analyze(with_empty_step)
    frame = result.steps
    frame = frame.with_columns(pl.lit(0).alias("step"))
    assert frame is not result.steps and result.steps["step"].to_list() == [0, 1, 2]


def test_compare_presets_is_the_command(tmp_path: Path) -> None:
    args = [a for p in PRESETS for a in ("--preset", p)]
    result = rcdiag.compare_presets(DRIFT, presets=PRESETS, sweep="seq_mean_k1", grid=["1.001"])
    assert isinstance(result, ComparisonResult)
    document = cli_json(tmp_path, "compare-presets", DRIFT, *args, "--sweep", "seq_mean_k1",
                        "--grid", "1.001")  # fmt: skip
    assert result.to_json() == document
    frame = result.steps
    assert frame.columns[:2] == ["step", "configuration"]
    steps = document["source"]["steps"]
    assert frame.height == steps * len(PRESETS)
    assert frame["configuration"].to_list()[: len(PRESETS)] == PRESETS  # by step, then as asked
    for entry in document["presets"]:
        rows = frame.filter(pl.col("configuration") == entry["name"]).iter_rows(named=True)
        for row, step in zip(rows, entry["steps"], strict=True):
            assert row["step"] == step["step"]
            assert {k: row[k] for k in step["summary"]} == step["summary"]
            assert {k: row[k] for k in step["metrics"]} == step["metrics"]
            missing = set(frame.columns) - {"step", "configuration", *step["summary"]}
            assert all(row[k] is None for k in missing - set(step["metrics"]))
    assert (
        result.overall["decoupled_k3_rs"]["kept_token_share"]
        == (document["presets"][2]["summary"]["kept_token_share"])
    )
    assert result.configurations["configuration"].to_list() == PRESETS
    assert result.diagnosis is not None and result.recommendation is not None
    wide = frame.pivot("configuration", index="step", values="ess")
    assert wide.columns == ["step", *PRESETS]


def test_inline_configurations_are_files(tmp_path: Path) -> None:
    keys = {"rollout_is": "token", "rollout_is_threshold": 2.0}
    (tmp_path / "mine.yaml").write_text("rollout_is: token\nrollout_is_threshold: 2.0\n")
    inline = rcdiag.compare_presets(DRIFT, presets=[], configs={"mine": keys})
    from_file = rcdiag.compare_presets(DRIFT, presets=[], configs=[tmp_path / "mine.yaml"])
    assert inline.to_json() == from_file.to_json()
    with pytest.raises(UsageError, match="configuration 'bad'"):
        rcdiag.compare_presets(DRIFT, configs={"bad": {"rollout_is": "tokens"}})


def test_report_check_and_baseline(tmp_path: Path, with_empty_step: Path) -> None:
    document = rcdiag.report(DRIFT, top=5)
    assert isinstance(document, ReportDocument)
    assert document.recommendation and document.verdict and document.options
    assert document.options.top_k == 5
    assert_table_equals_steps(document.steps, document.to_json()["steps"])
    preset_steps = document.preset_steps
    assert preset_steps is not None and preset_steps.columns[:2] == ["step", "configuration"]
    size = rcdiag.write_report(document, tmp_path / "r.html")
    assert size == (tmp_path / "r.html").stat().st_size > 10_000
    rcdiag.write_report(rcdiag.analyze(DRIFT), tmp_path / "a.html")
    rcdiag.write_report(rcdiag.compare_presets(DRIFT, presets=PRESETS[:1]), tmp_path / "c.html")
    first = sorted(DRIFT.glob("step=0/*.parquet"))[0]
    with pytest.raises(UsageError, match="an input of this run"):
        rcdiag.write_report(document, first)
    (tmp_path / "doc.json").write_text(json.dumps(document.to_json()))
    again = rcdiag.report(from_json=tmp_path / "doc.json")
    assert again.to_json() == document.to_json()

    made = rcdiag.baseline(DRIFT, replicates=20)
    assert made.steps.height == 20 and made.diagnosis is not None
    checked = rcdiag.check(DRIFT, baseline=made, rules=["rollout_corr/k3_kl.overall <= baseline"])
    assert isinstance(checked, CheckResult) and checked.passed and checked.exit_code == 0
    assert checked.rules["status"].to_list() == ["pass"]
    failing = rcdiag.check(with_empty_step, rules=["rollout_corr/k3_kl.max_step < 0"])
    assert not failing.passed and failing.rules["status"].to_list() == ["fail"]
    assert failing.steps is not None and failing.steps.height == 3
    back = CheckResult.from_json(failing.to_json(), source="check.json")
    assert back.passed is False and back.diagnosis == failing.diagnosis and back.steps is None
    code, _, _ = cli("check", with_empty_step, "-r", "rollout_corr/k3_kl.max_step < 0", "--json",
                     tmp_path / "check.json", "-q")  # fmt: skip
    assert code == 1
    assert json.loads((tmp_path / "check.json").read_text()) == failing.to_json()


def test_to_pandas(with_empty_step: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pandas = pytest.importorskip("pandas")
    result = rcdiag.analyze(with_empty_step)
    table = result.to_pandas()
    assert isinstance(table, pandas.DataFrame) and list(table["step"]) == [0, 1, 2]
    assert math.isnan(table["rollout_corr/kl"][1])
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if pandas were not installed
    with pytest.raises(ImportError, match=r"pip install pandas"):
        result.to_pandas()


def test_errors_are_the_commands(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file or directory"):
        rcdiag.analyze(tmp_path / "missing")
    with pytest.raises(UsageError, match="dialect 'newest'"):
        rcdiag.analyze(DRIFT, dialect="newest")
    with pytest.raises(UsageError, match="rollout_col: empty column name"):
        rcdiag.analyze(DRIFT, rollout_col=" ")
    with pytest.raises(UsageError, match="nothing to compare"):
        rcdiag.compare_presets(DRIFT, presets=[])
    with pytest.raises(UsageError, match="not both"):
        rcdiag.report(DRIFT, from_json=tmp_path / "x.json")


def test_signatures_and_help_mirror_the_commands() -> None:
    import typer.main

    from rcdiag.run.dump import DumpArguments

    api_only = {"progress", "presets", "configs", "rules", "rules_file", "from_json", "baseline"}
    api_only |= {"translate"}  # report's: recommend --framework
    cli_only = {"json_path", "html", "csv", "parquet", "quiet", "debug", "sort", "preset"}
    cli_only |= {"plotlyjs"}  # the API's write_report takes it
    cli_only |= {"framework"}  # recommend --framework is translate= (docs/python-api.md)
    cli_only |= {"tensorboard", "mlflow", "wandb"}  # rcdiag.trackers
    cli_only |= {"config", "rule", "baseline_path", "junit", "markdown_path", "output"}
    group = typer.main.get_command(app)
    for name in ("analyze", "compare-presets", "report", "recommend", "check", "baseline"):
        function = getattr(rcdiag, name.replace("-", "_"))
        signature = inspect.signature(function).parameters
        assert signature["dump"].kind is inspect.Parameter.VAR_KEYWORD, name
        parameters = {n: p for n, p in signature.items() if n != "dump"}
        dump_names = set(DumpArguments.__annotations__)
        options = {
            "storage_options" if p.name == "storage_option" else p.name
            for p in group.commands[name].params  # type: ignore[attr-defined]
        }
        assert options - cli_only - {"paths"} <= set(parameters) | dump_names, name
        assert (set(parameters) | dump_names) - options - api_only == set(), name
        assert all(p.kind is p.KEYWORD_ONLY for p in list(parameters.values())[1:]), name
        text = pydoc.render_doc(function, renderer=pydoc.plaintext)
        assert "veto_threshold" in text or name == "compare-presets"
        assert "{dump_arguments}" not in text and "``storage_options``" in text
    with pytest.raises(TypeError, match=r"analyze\(\) got an unexpected keyword argument 'stpes'"):
        rcdiag.analyze(DRIFT, stpes="1:2")  # type: ignore[call-arg]
    write_dump = list(inspect.signature(rcdiag.write_dump).parameters)
    assert write_dump[:5] == [
        "output",
        "rollout_log_probs",
        "old_log_probs",
        "response_mask",
        "step",
    ]
    assert "compression" in write_dump and "kwargs" not in write_dump


def test_report_stays_the_function_when_its_package_is_imported() -> None:
    import rcdiag.report.render
    from rcdiag.run.documents import build_report_document  # noqa: F401

    assert rcdiag.report is rcdiag.api.report and inspect.isfunction(rcdiag.report)
    assert set(rcdiag.__all__) <= set(dir(rcdiag))


def test_import_rcdiag_is_light() -> None:
    code = (
        "import sys, rcdiag; rcdiag.write_dump; "
        "print(','.join(m for m in ('numpy', 'pyarrow', 'polars', 'torch') if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert loaded == ""


@pytest.mark.parametrize("command", ["analyze", "compare-presets"])
def test_exports_read_back_equal_to_the_json(command: str, tmp_path: Path) -> None:
    extra = ["--preset", PRESETS[0], "--preset", PRESETS[2]] if command != "analyze" else []
    csv, parquet, out = tmp_path / "t.csv", tmp_path / "sub" / "t.parquet", tmp_path / "r.json"
    code, _, err = cli(command, DRIFT, *extra, "--json", out, "--csv", csv, "--parquet", parquet)
    assert code == 0, err
    assert f"wrote {csv}" in err.replace("\n", "")
    document = json.loads(out.read_text())
    from_parquet = pl.read_parquet(parquet)
    from_csv = pl.read_csv(csv, schema=from_parquet.schema)
    assert from_csv.equals(from_parquet, null_equal=True)
    if command == "analyze":
        assert_table_equals_steps(from_parquet, document["steps"])
        assert from_parquet.equals(AnalysisResult.from_json(document, source="x").steps)
    else:
        expected = ComparisonResult.from_json(document, source="x").steps
        assert from_parquet.equals(expected, null_equal=True)
        first = document["presets"][0]["steps"][0]
        row = from_parquet.row(0, named=True)
        assert {k: row[k] for k in first["metrics"]} == first["metrics"]


@pytest.mark.parametrize(
    ("outputs", "fragment"),
    [
        (["--csv", "{dump}"], "is an input of this run"),
        (["--csv", "{tmp}/same", "--json", "{tmp}/same"], "are the same file"),
        (["--parquet", "{dumpdir}/steps.parquet"], "a directory of the dump"),
        (["--csv", "{tmp}/"], "names a directory"),
    ],
)
def test_exports_are_checked_outputs(outputs: list[str], fragment: str, tmp_path: Path) -> None:
    dumpdir = tmp_path / "run"
    dump = dumpdir / "step=0" / "part.parquet"
    rcdiag.write_dump(dump, np.full((2, 3), -1.0), np.full((2, 3), -1.1))
    given = [o.format(dump=dump, tmp=tmp_path, dumpdir=dumpdir) for o in outputs]
    code, _, err = cli("analyze", dumpdir, *given)
    assert code == 2 and fragment in err, err
    assert sorted(p.name for p in dumpdir.rglob("*") if p.is_file()) == ["part.parquet"]


def test_the_dump_options_are_one_table() -> None:
    from rcdiag.run.dump import DUMP_OPTIONS, DumpArguments

    names = [option.name for option in DUMP_OPTIONS]
    assert names == list(DumpArguments.__annotations__)
    documented = inspect.getdoc(DumpArguments) or ""
    for option in DUMP_OPTIONS:
        assert f"{option.name}:" in documented and option.flag in documented, option.name
    group = typer.main.get_command(app)
    for command in ("analyze", "compare-presets", "report", "recommend", "check", "baseline"):
        flags = {o for p in group.commands[command].params for o in p.opts}  # type: ignore[attr-defined]
        assert {option.flag for option in DUMP_OPTIONS} <= flags, command
