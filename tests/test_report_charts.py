"""The report's charts: no point on the plot edge, no label over the data, thresholds named in the
legend (or under the chart when far away), a spike that would flatten a chart cut with a note,
readable ticks on the token-TIS chart."""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rcdiag.formatting import pct
from rcdiag.report.figures import Chart, nice_ticks
from rcdiag.report.render import render_html
from rcdiag.report.sweeps import is_sweep_chart
from rcdiag.report.trends import trend_charts
from rcdiag.run.documents import ReportOptions, build_report_document
from rcdiag.run.dump import DumpSpec
from rcdiag.synth import config_for, write_synthetic_dump

ROOT = Path(__file__).resolve().parent.parent
DRIFT = ROOT / "sample_data" / "drift"


@functools.cache
def _drift() -> dict[str, Any]:
    return build_report_document(DumpSpec([str(DRIFT)]), ReportOptions()).to_json()


@pytest.fixture(scope="module")
def long_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A 300-step drifting run (every step drawn, no buckets)."""
    dump = tmp_path_factory.mktemp("long") / "run.parquet"
    write_synthetic_dump(dump, config_for("drift", steps=300, rows_per_step=4, mean_length=40))
    return build_report_document(DumpSpec([str(dump)]), ReportOptions()).to_json()


def _steps(values: dict[str, list[float]]) -> list[dict[str, Any]]:
    n = len(next(iter(values.values())))
    return [{"step": i, "metrics": {k: v[i] for k, v in values.items()}} for i in range(n)]


def _by_id(charts: list[Chart]) -> dict[str, Chart]:
    return {c.id: c for c in charts}


def _data_values(chart: Chart) -> list[float]:
    """The y values of the chart's data traces (not its reference lines or markers)."""
    out = []
    for trace in chart.figure["data"]:
        if trace.get("hoverinfo") == "skip" or trace.get("mode") == "markers":
            continue
        out += [v for v in trace.get("y") or [] if v is not None]
    return out


@pytest.mark.parametrize("which", ["drift", "long_run"])
def test_no_point_on_the_edge_and_no_label_over_the_data(
    which: str, long_run: dict[str, Any]
) -> None:
    document = _drift() if which == "drift" else long_run
    for chart in trend_charts(document):
        layout = chart.figure["layout"]
        assert not layout.get("annotations"), f"{chart.id}: a label drawn over the plot"
        axis = layout["yaxis"]
        values = _data_values(chart)
        low, high = axis["range"]
        if axis["type"] == "log":
            low, high = 10**low, 10**high
        cut = any(t.get("mode") == "markers" for t in chart.figure["data"])
        span = high - low
        assert min(values) > low + 0.01 * span * (axis["type"] != "log"), chart.id
        if not cut:
            assert max(values) < high - 0.01 * span * (axis["type"] != "log"), chart.id


def test_thresholds_are_named_in_the_legend_or_under_the_chart() -> None:
    charts = _by_id(trend_charts(_drift()))
    kl = charts["trend-kl"].figure["data"]
    lines = [t for t in kl if t.get("hoverinfo") == "skip"]
    assert [t["y"] for t in lines] == [[0.001, 0.001], [-0.001, -0.001], [0.1, 0.1], [-0.1, -0.1]]
    assert lines[0]["showlegend"] and "|kl| > 0.001" in lines[0]["name"]
    assert lines[2]["showlegend"] and "|kl| > 0.1" in lines[2]["name"]
    assert lines[1]["showlegend"] is False  # −0.001: the same threshold, one legend entry
    chi2 = charts["trend-chi2-token"]
    assert chi2.notes and chi2.notes[0].startswith("Not drawn: act > 1")
    assert not [t for t in chi2.figure["data"] if t.get("hoverinfo") == "skip"]
    k3 = [t["name"] for t in charts["trend-k3"].figure["data"] if t.get("hoverinfo") == "skip"]
    assert k3 == ["watch > 0.001 · NeMo-RL gate", "act > 0.1 · top of MoE range"]
    html = render_html(_drift())
    assert '<span class="chart-note">Not drawn: act &gt; 1' in html


def test_a_spike_that_would_flatten_the_chart_is_cut_with_a_note() -> None:
    rng = np.random.default_rng(0)
    chi2 = list(rng.uniform(-0.9, 0.8, 300))
    chi2[123] = 6000.0
    charts = _by_id(trend_charts({"steps": _steps({"rollout_corr/chi2_seq": chi2})}))
    chart = charts["trend-chi2-seq"]
    top = chart.figure["layout"]["yaxis"]["range"][1]
    assert 1.0 < top < 5.0, "the axis shows the usual values and the threshold"
    markers = [t for t in chart.figure["data"] if t.get("mode") == "markers"]
    assert len(markers) == 1 and markers[0]["x"] == [123]
    assert markers[0]["y"][0] < top
    assert chart.notes == (
        "1 step of χ²_seq above the axis (▲), up to 6000 at step 123: the axis is cut so the "
        "other steps stay readable.",
    )
    calm = _by_id(trend_charts({"steps": _steps({"rollout_corr/chi2_seq": chi2[:100]})}))
    assert not calm["trend-chi2-seq"].notes  # no spike, no cut


def test_token_tis_chart_ticks_are_the_grid_and_round_percentages() -> None:
    chart = is_sweep_chart(_drift())
    assert chart is not None
    layout = chart.figure["layout"]
    sweep = next(s for s in _drift()["sweeps"] if s["key"] == "is")
    grid = [float(p["threshold"]) for p in sweep["points"]]
    assert layout["xaxis"]["type"] == "log"
    assert layout["xaxis"]["tickvals"] == sorted(grid)
    assert layout["xaxis"]["ticktext"] == [f"{c:g}" for c in sorted(grid)]
    right = layout["yaxis2"]
    assert right["ticktext"][0] == "0%"
    assert all(re.fullmatch(r"\d+(\.\d{1,2})?%", t) for t in right["ticktext"]), right
    steps = np.diff(right["tickvals"])
    assert np.allclose(steps, steps[0])
    removed = max(v for v in chart.figure["data"][1]["y"] if v is not None)
    assert right["range"][1] > removed


@pytest.mark.parametrize(
    ("top", "ticks"),
    [(0.0095, [0.0, 0.002, 0.004, 0.006, 0.008, 0.01]), (1.0, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0])],
)
def test_nice_ticks(top: float, ticks: list[float]) -> None:
    assert nice_ticks(top) == ticks


@pytest.mark.parametrize(
    ("share", "shown"),
    [(5e-7, "0.00005%"), (9e-7, "0.00009%"), (2e-5, "0.002%"), (1e-12, "<0.000001%"), (0.0, "0%")],
)
def test_small_percentages_are_written_in_decimals(share: float, shown: str) -> None:
    assert pct(share) == shown


def test_no_percentage_in_scientific_notation_on_the_page() -> None:
    document = copy.deepcopy(_drift())
    for sweep in document["sweeps"]:
        for point in sweep["points"]:
            point["summary"]["weight_mass_removed"] = 5e-7
    assert not re.search(r"\de-?\d+%", render_html(document))
