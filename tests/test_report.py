"""`rcdiag report`: results first, HTML second — round trips, self-containment, escaping, the CLI."""

from __future__ import annotations

import copy
import functools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from rcdiag import write_dump
from rcdiag.cli import app
from rcdiag.metrics.analysis import AnalyzeOptions
from rcdiag.model import ReportDocument
from rcdiag.report.plotlyjs import bundle_base64
from rcdiag.report.render import missing_sections, render_html, view_model
from rcdiag.report.trends import bucketed
from rcdiag.run.documents import ReportOptions, analyze_part, build_report_document, page_json
from rcdiag.run.dump import DumpSpec
from rcdiag.run.results import analyze_dump
from rcdiag.synth import config_for, write_synthetic_dump

ROOT = Path(__file__).resolve().parent.parent
DRIFT = ROOT / "sample_data" / "drift"
HEAVY = ROOT / "sample_data" / "heavy_tails.parquet"
SIZE_LIMIT = 2_000_000  # bytes: the page with plotly.js embedded compressed
runner = CliRunner()


@functools.cache
def _built() -> ReportDocument:
    return build_report_document(DumpSpec([str(DRIFT)]), ReportOptions())


@functools.cache
def _drift() -> dict[str, Any]:
    return _built().to_json()


def drift() -> dict[str, Any]:
    return copy.deepcopy(_drift())


def drift_analysis() -> dict[str, Any]:
    """The analyze document inside the drift report document (what ``analyze --json`` writes)."""
    return analyze_part(_built()).to_json()


def run(*args: object) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def body_without_plotly(html: str) -> str:
    """The page minus the embedded plotly.js bundle (base64 of its gzip: no markup, no URL)."""
    bundle = bundle_base64()
    assert html.count(bundle) == 1, "plotly.js must be embedded exactly once"
    return html.replace(bundle, "")


# --- the document --------------------------------------------------------------------------------


def test_document_extends_the_analyze_document() -> None:
    doc = drift()
    assert doc["schema_version"] == 2 and doc["dialect"] == "latest"
    assert {"source", "overall", "steps", "checks"} <= doc.keys()
    assert {"presets", "sweeps", "profile", "verdict", "recommendation"} <= doc.keys()
    assert len(doc["steps"]) == 20
    assert [p["name"] for p in doc["presets"]][:2] == [
        "decoupled_token_is",
        "decoupled_token_icepop",
    ]
    assert {s["key"] for s in doc["sweeps"]} == {"geo", "max", "geo+max", "is"}
    # the sample has a uid column: the report names the worst sequences by uid, file and row
    worst = doc["profile"]["top_sequences"]["by_abs_sum"][0]
    assert worst["uid"].startswith(f"step{worst['step']}-prompt")
    assert worst["file"].endswith(f"step={worst['step']}/part-0.parquet")
    assert isinstance(worst["row"], int)


def test_document_is_strict_json() -> None:
    text = json.dumps(drift(), allow_nan=False)
    assert "NaN" not in text and "Infinity" not in text


def test_step_selection_is_reported_and_rows_stay_located() -> None:
    from rcdiag.io.files import StepSelection

    spec = DumpSpec([str(DRIFT)], selection=StepSelection.parse(steps="15:"))
    doc = build_report_document(spec, ReportOptions(top_k=3)).to_json()
    assert [s["step"] for s in doc["steps"]] == [15, 16, 17, 18, 19]
    assert doc["options"]["selected_steps"] == [15, 16, 17, 18, 19]
    for record in doc["profile"]["top_sequences"]["by_abs_sum"]:
        assert record["step"] >= 15
        assert record["file"].endswith(f"step={record['step']}/part-0.parquet")
        assert record["uid"].startswith(f"step{record['step']}-prompt")


# --- JSON → HTML ---------------------------------------------------------------------------------


def test_json_round_trip_renders_the_same_page(tmp_path: Path) -> None:
    html, results = tmp_path / "direct.html", tmp_path / "results.json"
    code, _, err = run("report", DRIFT, "-o", html, "--json", results, "--quiet")
    assert code == 0, err
    again = tmp_path / "again.html"
    code, _, err = run("report", "--from", results, "-o", again, "--quiet")
    assert code == 0, err
    assert again.read_bytes() == html.read_bytes()
    stored = json.loads(results.read_text())
    assert stored["recommendation"] == json.loads(json.dumps(drift()["recommendation"]))


def test_plain_analyze_json_renders_what_it_can(tmp_path: Path) -> None:
    analyze = tmp_path / "analyze.json"
    code, _, err = run("analyze", HEAVY, "--json", analyze, "--quiet")
    assert code == 0, err
    out = tmp_path / "analyze.html"
    code, stdout, err = run("report", "--from", analyze, "-o", out)
    assert code == 0, err
    assert stdout.startswith("ACT:")
    html = out.read_text()
    assert "Not in these results" in html and "no &#39;profile&#39;" in html
    assert 'data-figure="trend-k3"' in html and 'data-figure="hist-token"' not in html
    assert "seq_max_k2" in html  # the rules still run, with verl's default thresholds
    assert "no preset comparison or sweep" in err  # said on stderr, and first in "What to do"
    what_to_do = html[html.index('id="recommendation"') :]
    assert what_to_do.index("no preset comparison or sweep") < what_to_do.index("choice primary")
    assert "Geometric-mean rejection is a safety valve" not in html


def test_compare_presets_json_renders_without_a_verdict(tmp_path: Path) -> None:
    results = tmp_path / "compare.json"
    code, _, err = run(
        "compare-presets",
        HEAVY,
        "-p",
        "decoupled_geo_rs",
        "--sweep",
        "seq_mean_k1",
        "--json",
        results,
        "-q",
    )
    assert code == 0, err
    out = tmp_path / "compare.html"
    code, _, err = run("report", "--from", results, "-o", out, "--quiet")
    assert code == 0, err
    html = out.read_text()
    assert "No verdict" in html and "decoupled_geo_rs" in html
    assert "seq_mean_k1 (rejection only)" in html


def test_missing_sections_are_named() -> None:
    doc = drift_analysis()
    missing = " ".join(missing_sections(doc))
    assert "profile" in missing and "presets" in missing and "sweeps" in missing
    assert missing_sections(drift()) == []


# --- one self-contained file -----------------------------------------------------------------


def test_page_loads_nothing_from_the_network() -> None:
    html = render_html(drift())
    body = body_without_plotly(html)
    assert not re.search(r"<script[^>]*\bsrc\s*=", body, re.IGNORECASE)
    assert not re.search(r"<link\b", body, re.IGNORECASE)
    assert not re.search(r"<(img|iframe|embed|object|source|audio|video)\b", body, re.IGNORECASE)
    assert not re.search(r"(src|href)\s*=\s*[\"']?\s*(https?:)?//", body, re.IGNORECASE)
    assert not re.search(r"url\(\s*[\"']?\s*(https?:)?//", body, re.IGNORECASE)
    assert "@import" not in body
    assert "http://" not in body and "https://" not in body


def test_every_chart_has_data_and_a_figure() -> None:
    model = view_model(drift())
    figures = json.loads(str(model["figures_json"]))
    charts = [c for section in model["charts"].values() for c in section]
    assert len(charts) == len(figures) >= 14
    for chart in charts:
        data = figures[chart.id]["data"]
        assert data, chart.id
        values = [
            v for trace in data for v in (trace.get("y") or trace.get("x") or []) if v is not None
        ]
        assert values, f"{chart.id} is empty"
    html = render_html(drift())
    assert html.count('data-figure="') == len(figures)


def test_the_page_reads_no_per_step_preset_figures() -> None:
    """The page is rendered from the document without the presets' per-step entries
    (``page_json``); the same page as from the whole document, so nothing on it needs them."""
    document = _built()
    light = page_json(document)
    assert all(p["steps"] == [] for p in light["presets"])
    assert all(p["steps"] for p in drift()["presets"])
    assert render_html(light) == render_html(drift())


def test_everything_is_escaped() -> None:
    doc = drift()
    evil = "<script>alert('x')</script>&<b>"
    doc["source"]["paths"] = [f"/tmp/{evil}/a.parquet"]
    doc["recommendation"]["choices"][0]["reasons"].append(evil)
    doc["presets"][0]["purpose"] = evil
    html = render_html(doc)
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in html
    blob = re.search(r'<script type="application/json" id="rcdiag-figures">(.*?)</script>', html)
    assert blob is not None and "</" not in blob.group(1)


def test_a_1000_step_report_stays_under_2_mb(tmp_path: Path) -> None:
    dump = tmp_path / "long_run.parquet"
    config = config_for("drift", steps=1000, rows_per_step=8, mean_length=60)
    write_synthetic_dump(dump, config)
    out = tmp_path / "long_run.html"
    code, _, err = run("report", dump, "-o", out, "--quiet")
    assert code == 0, err
    assert out.stat().st_size < SIZE_LIMIT
    html = out.read_text()
    figures = json.loads(re.search(r'id="rcdiag-figures">(.*?)</script>', html).group(1))  # type: ignore[union-attr]
    trend = figures["trend-k3"]["data"][0]
    assert len(trend["x"]) <= 400  # decimated, spikes kept
    assert max(v for v in trend["y"] if v is not None) == pytest.approx(
        max(s["metrics"]["rollout_corr/k3_kl"] for s in _steps_of(dump)), rel=1e-3
    )


def test_a_10000_step_report_draws_buckets_and_says_so(tmp_path: Path) -> None:
    steps = 10_000
    rng = np.random.default_rng(0)
    rollout = -rng.exponential(0.7, (steps, 8))
    old = rollout + np.linspace(0.01, 0.2, steps)[:, None] * rng.standard_normal((steps, 8))
    dump = write_dump(tmp_path / "long_run.parquet", rollout, old, step=np.arange(steps))
    document = page_json(ReportDocument.of(analyze_dump(DumpSpec([str(dump)]), AnalyzeOptions())))
    html = render_html(document)
    assert len(html.encode()) < SIZE_LIMIT
    assert "10,000 steps shown as 150 buckets of 67 consecutive steps" in html
    figures = json.loads(re.search(r'id="rcdiag-figures">(.*?)</script>', html).group(1))  # type: ignore[union-attr]
    high, low, mean = figures["trend-k3"]["data"][:3]
    assert (high["name"], low["name"], mean["name"]) == ("k3_kl max", "k3_kl min", "k3_kl (mean)")
    assert len(mean["x"]) == 150 and low["fill"] == "tonexty"
    k3 = [s["metrics"]["rollout_corr/k3_kl"] for s in document["steps"]]
    assert max(high["y"]) == pytest.approx(max(k3), rel=1e-3)
    assert min(low["y"]) == pytest.approx(min(k3), rel=1e-3)
    assert all(lo <= m <= hi for lo, m, hi in zip(low["y"], mean["y"], high["y"], strict=True))


@pytest.mark.parametrize("size", [1, 3, 67])
def test_buckets_hold_the_mean_min_and_max_of_their_steps(size: int) -> None:
    rng = np.random.default_rng(size)
    x = np.arange(100, 300, dtype=np.int64)
    y = rng.lognormal(size=x.size)
    y[rng.random(x.size) < 0.2] = np.nan
    y[:size] = np.nan  # a bucket without any value
    middle, mean, low, high = bucketed(x, y, size)
    for j, start in enumerate(range(0, x.size, size)):
        part = y[start : start + size]
        present = part[~np.isnan(part)]
        assert middle[j] == x[start : start + size][(part.size - 1) // 2]
        if present.size == 0:
            assert np.isnan([mean[j], low[j], high[j]]).all()
        else:
            assert (low[j], high[j]) == (present.min(), present.max())
            assert mean[j] == pytest.approx(present.mean(), rel=1e-12)


def _steps_of(dump: Path) -> list[dict[str, Any]]:
    from rcdiag.metrics.analysis import AnalyzeOptions
    from rcdiag.run.results import analyze_dump

    return analyze_dump(DumpSpec([str(dump)]), AnalyzeOptions()).to_json()["steps"]


# --- the command ---------------------------------------------------------------------------------


def test_report_command_prints_the_verdict_and_writes_the_file(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "report.html"
    code, stdout, stderr = run("report", HEAVY, "-o", out)
    assert code == 0, stderr
    assert stdout.startswith("ACT: 20.3% of sequences hold a catastrophic token")
    assert "→ use custom: token TIS + seq_max_k2" in stdout
    assert "wrote" in stderr and out.exists()
    assert not [p for p in out.parent.iterdir() if p.name != "report.html"], "no temp file left"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "Error: no input: give a dump"),
        (["--from", "missing.json"], "Error: missing.json: cannot read results"),
        (["nowhere.parquet"], "Error: nowhere.parquet: no such file or directory"),
        (["--dialect", "newest", str(HEAVY)], "Error: --dialect 'newest': expected one of"),
    ],
)
def test_report_command_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, stderr = run("report", *args, "-o", tmp_path / "r.html")
    assert code == 2
    assert stderr.startswith(message), stderr
    assert len(stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r.html").exists()


def test_report_command_rejects_bad_results(tmp_path: Path) -> None:
    not_json = tmp_path / "bad.json"
    not_json.write_text("{oops")
    code, _, stderr = run("report", "--from", not_json, "-o", tmp_path / "r.html")
    assert code == 2 and "not valid JSON" in stderr
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": 1}))
    code, _, stderr = run("report", "--from", other, "-o", tmp_path / "r.html")
    assert code == 2 and "not rcdiag results" in stderr
    future = tmp_path / "future.json"
    future.write_text(json.dumps({**drift_analysis(), "schema_version": 3}))
    code, _, stderr = run("report", "--from", future, "-o", tmp_path / "r.html")
    assert code == 2 and "schema_version 3" in stderr
    good = tmp_path / "good.json"
    good.write_text(json.dumps(drift_analysis()))
    code, _, stderr = run("report", HEAVY, "--from", good, "-o", tmp_path / "r.html")
    assert code == 2 and "not both" in stderr
    code, _, stderr = run(
        "report", "--from", good, "--dialect", "legacy", "-o", tmp_path / "r.html"
    )
    assert code == 2 and "latest dialect" in stderr


def test_report_from_a_dump_or_binary_file_says_so(tmp_path: Path) -> None:
    code, _, stderr = run("report", "--from", HEAVY, "-o", tmp_path / "r.html")
    assert code == 2 and "internal error" not in stderr
    assert "not a results JSON (it looks like a parquet dump: pass it without --from)" in stderr
    binary = tmp_path / "blob.json"
    binary.write_bytes(b"\xff\xfe\x00\x81garbage")
    code, _, stderr = run("report", "--from", binary, "-o", tmp_path / "r.html")
    assert code == 2 and "not a results JSON" in stderr and "internal error" not in stderr


def test_short_help_is_a_complete_sentence() -> None:
    import rcdiag.commands.recommend as recommend_command
    import rcdiag.commands.report as report_command

    for function in (report_command.report, recommend_command.recommend):
        doc = function.__doc__ or ""
        first, _, rest = doc.partition("\n")
        assert first.endswith(".") and len(first) <= 80, first
        assert rest.startswith("\n"), "details after a blank line"


def test_glossary_and_chart_axes() -> None:
    html = render_html(drift())
    for term in ("slime&#39;s gate", "NeMo-RL gate", "TIS", "IcePop", "k1 / k2 / k3", "ESS"):
        assert f"<dt>{term}</dt>" in html, term
    assert "E[ρ²] − 1" in html and "Variance of the token IS weights" not in html
    figures = {c.id: c.figure for cs in view_model(drift())["charts"].values() for c in cs}
    for id in ("bucket-prob", "bucket-position", "bucket-length"):
        layout = figures[id]["layout"]
        bars = max(v for v in figures[id]["data"][0]["y"])
        assert layout["yaxis"]["type"] == "linear" and layout["yaxis"]["range"][0] == 0
        assert layout["yaxis"]["range"][1] > bars
        assert "tickvals" not in layout["yaxis2"]
    for id in ("hist-token", "hist-seq"):
        assert figures[id]["layout"]["yaxis"]["dtick"] == 1
    assert "displayModeBar: false" in html


@pytest.mark.parametrize(
    "module",
    [
        "rcdiag.report.figures",
        "rcdiag.report.steps",
        "rcdiag.report.render",
        "rcdiag.report.plotlyjs",
        "rcdiag.assess.wording",
        "rcdiag.assess.recommendation.snippets",
        "rcdiag.formatting",
    ],
)
def test_docstring_examples(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0


def _analyze_has_html() -> bool:
    return "--html" in runner.invoke(app, ["analyze", "--help"]).stdout


@pytest.mark.skipif(not _analyze_has_html(), reason="rcdiag analyze has no --html option yet")
def test_analyze_html_writes_the_report_from_the_same_pass(tmp_path: Path) -> None:
    plain, both, page = tmp_path / "plain.json", tmp_path / "both.json", tmp_path / "r.html"
    assert run("analyze", HEAVY, "--json", plain, "-q")[0] == 0
    code, _, stderr = run("analyze", HEAVY, "--json", both, "--html", page)
    assert code == 0, stderr
    assert json.loads(both.read_text()) == json.loads(plain.read_text())
    assert page.stat().st_size < SIZE_LIMIT and 'data-figure="hist-token"' in page.read_text()


def test_the_page_template_compiles_once_on_either_thread() -> None:
    """``report`` compiles the template on a worker thread while its pass runs; rendering then
    takes that compilation (or makes it, once, if the worker has not finished)."""
    import threading

    from rcdiag.report.prepare import compile_in_background
    from rcdiag.report.render import page_template

    compile_in_background()
    first = page_template()
    for thread in threading.enumerate():
        if thread.name == "rcdiag-template":
            thread.join()
    assert page_template() is first
