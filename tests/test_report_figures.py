"""The report's figures are plain plotly.js JSON (rcdiag/report/figures.py): every chart of every
sample dump must be a figure plotly's own schema accepts, so a misspelt attribute (which plotly.js
would silently ignore) fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from rcdiag.report.figures import bar, plotly_figure, scatter
from rcdiag.report.view import all_charts
from rcdiag.run.documents import ReportOptions, build_report_document
from rcdiag.run.dump import DumpSpec

go = pytest.importorskip("plotly.graph_objects")

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted(
    [*ROOT.glob("sample_data/*.parquet"), ROOT / "sample_data" / "drift"]
    + [p for p in (ROOT / "sample_data" / "model").iterdir() if p.is_dir()]
)


@pytest.mark.parametrize("dump", SAMPLES, ids=[p.name for p in SAMPLES])
def test_every_chart_is_a_valid_plotly_figure(dump: Path) -> None:
    document = build_report_document(DumpSpec([str(dump)]), ReportOptions()).to_json()
    charts = [chart for section in all_charts(document).values() for chart in section]
    assert charts
    for chart in charts:
        try:
            go.Figure(chart.figure)  # validates every trace and layout attribute
        except ValueError as exc:
            pytest.fail(f"{dump.name}: chart {chart.id} is not a valid plotly figure: {exc}")


def test_a_misspelt_attribute_is_caught() -> None:
    figure = plotly_figure([scatter(x=[1], y=[2], lnie={"width": 2})], {})
    with pytest.raises(ValueError, match="lnie"):
        go.Figure(figure)


def test_traces_are_plotly_json() -> None:
    figure = plotly_figure(
        [scatter(x=(1, 2), y=[0.123456789, float("nan")]), bar(x=["a"], y=[3])],
        {"height": 280},
    )
    assert figure == {
        "data": [
            {"type": "scatter", "x": [1, 2], "y": [0.1235, None]},
            {"type": "bar", "x": ["a"], "y": [3]},
        ],
        "layout": {"height": 280},
    }
    assert go.Figure(figure).to_plotly_json()["data"][1]["type"] == "bar"
