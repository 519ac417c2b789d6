"""plotly.js in the page: embedded gzip-compressed (under 2 MB a page), or shared from a path, or
loaded from a URL (``--plotlyjs``)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rcdiag.cli import app
from rcdiag.report.plotlyjs import (
    PLOTLY_JS_SHA256,
    PLOTLY_JS_VERSION,
    bundle_gzip,
    parse_source,
    plotly_js,
    script_src,
)

ROOT = Path(__file__).resolve().parent.parent
DRIFT = ROOT / "sample_data" / "drift"
HEAVY = ROOT / "sample_data" / "heavy_tails.parquet"
PAGE_LIMIT = 2_000_000  # bytes
runner = CliRunner()


def run(*args: object) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def test_the_shipped_bundle_is_the_recorded_plotly_js() -> None:
    source = plotly_js()
    assert hashlib.sha256(source.encode("utf-8")).hexdigest() == PLOTLY_JS_SHA256
    assert f"plotly.js (basic - minified) v{PLOTLY_JS_VERSION}" in source[:200]
    assert gzip.decompress(bundle_gzip()).decode("utf-8") == source


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("embed") / "drift.html"
    code, _, err = run("report", DRIFT, "-o", out, "--quiet")
    assert code == 0, err
    assert out.stat().st_size < PAGE_LIMIT
    return out.read_text(encoding="utf-8")


def test_embedded_page_holds_plotly_js_compressed_once(embedded: str) -> None:
    blobs = re.findall(
        r'<script type="application/octet-stream" id="rcdiag-plotly" '
        r'data-encoding="gzip\+base64">([A-Za-z0-9+/=]+)</script>',
        embedded,
    )
    assert len(blobs) == 1
    assert gzip.decompress(base64.b64decode(blobs[0])).decode("utf-8") == plotly_js()
    assert not re.search(r"<script[^>]*\bsrc\s*=", embedded)
    assert 'DecompressionStream("gzip")' in embedded


def test_page_is_under_2_mb(embedded: str) -> None:
    assert len(embedded.encode("utf-8")) < PAGE_LIMIT


def test_a_shared_copy_is_written_once_and_loaded_relative_to_the_page(tmp_path: Path) -> None:
    shared = tmp_path / "assets" / "plotly.min.js"
    first, second = tmp_path / "a.html", tmp_path / "runs" / "b.html"
    assert run("report", DRIFT, "-o", first, "--plotlyjs", shared, "-q")[0] == 0
    assert shared.read_text(encoding="utf-8") == plotly_js()
    shared.write_text("/* someone's own plotly.js build */")  # an existing file is left alone
    code, _, err = run("report", HEAVY, "-o", second, "--plotlyjs", shared, "-q")
    assert code == 0, err
    assert shared.read_text() == "/* someone's own plotly.js build */"
    assert '<script src="assets/plotly.min.js"></script>' in first.read_text()
    assert '<script src="../assets/plotly.min.js"></script>' in second.read_text()
    assert first.stat().st_size < 200_000 and 'data-encoding="gzip+base64"' not in first.read_text()


def test_analyze_html_takes_plotlyjs_too(tmp_path: Path) -> None:
    page, shared = tmp_path / "r.html", tmp_path / "plotly.js"
    code, _, err = run("analyze", HEAVY, "--html", page, "--plotlyjs", shared, "-q")
    assert code == 0, err
    assert '<script src="plotly.js"></script>' in page.read_text()
    assert shared.read_text(encoding="utf-8") == plotly_js()


def test_a_url_is_referenced_as_given(tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    url = "https://cdn.example.org/plotly-basic-4.1.1.min.js?v=1&x=<y>"
    assert run("report", HEAVY, "-o", page, "--plotlyjs", url, "-q")[0] == 0
    assert (
        '<script src="https://cdn.example.org/plotly-basic-4.1.1.min.js?v=1&amp;x=&lt;y&gt;">'
        in page.read_text()
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("ftp://example.org/plotly.js", "only http:// and https:// URLs"),
        ("", "expected embed, a path or an http(s) URL"),
        ("SAME", "--plotlyjs"),
    ],
)
def test_bad_plotlyjs_values_are_one_error_line(tmp_path: Path, value: str, message: str) -> None:
    page = tmp_path / "r.html"
    code, _, err = run(
        "report", HEAVY, "-o", page, "--plotlyjs", page if value == "SAME" else value
    )
    assert code == 2, err
    assert err.startswith("Error:") and message in err and len(err.strip().splitlines()) == 1
    assert not page.exists()


def test_script_src_is_relative_and_url_quoted(tmp_path: Path) -> None:
    source = parse_source(str(tmp_path / "js dir" / "plotly #1.js"))
    assert script_src(source, tmp_path / "out" / "r.html") == "../js%20dir/plotly%20%231.js"
