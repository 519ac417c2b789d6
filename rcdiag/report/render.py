"""The self-contained HTML report, rendered from a result document only.

:func:`render_html` takes the JSON document of ``rcdiag report`` (or of ``rcdiag analyze``: the
sections it cannot fill are listed as missing) and returns one HTML page: the figures as one JSON
blob, CSS and JS inline, and plotly.js embedded gzip-compressed (or loaded from a path or URL:
:mod:`rcdiag.report.plotlyjs`). The jinja2 templates live in the repository's ``templates/``
(shipped as the package ``rcdiag.templates``). Everything the template prints is escaped
(autoescape on); JSON inside ``<script>`` has ``<``, ``>`` and ``&`` escaped as ``\\u003c`` etc.

The page records its own health for tests and CI: JavaScript errors (``window.onerror``, rejected
promises, plotly.js that cannot be loaded), how many charts rendered with data, and the resources it
fetched, into the JSON of ``<script id="rcdiag-status">`` and ``data-rcdiag-done="1"`` on ``<html>``
once every chart is drawn.
"""

from __future__ import annotations

import json
import threading
from functools import cache
from pathlib import Path
from typing import Any

from markupsafe import Markup

from rcdiag.io.writer import atomic_write
from rcdiag.model.fields import json_safe
from rcdiag.report import view
from rcdiag.report.figures import Chart
from rcdiag.report.plotlyjs import (
    TEMPLATES,
    PlotlySource,
    bundle_base64,
    parse_source,
    plotly_js,
    provide,
    script_src,
)
from rcdiag.report.view import missing_sections


def json_for_script(value: Any) -> Markup:
    """JSON safe inside ``<script type="application/json">``: no ``</script>``, NaN → null.

    Example:
        >>> str(json_for_script({"a": "</script><b>&", "n": float("nan")}))
        '{"a":"\\\\u003c/script\\\\u003e\\\\u003cb\\\\u003e\\\\u0026","n":null}'
    """
    text = json.dumps(json_safe(value), separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return Markup(text)


TEMPLATE = "report.html.j2"


_compiling = threading.Lock()
"""One compilation of the template, whichever thread asks first; the other waits for it."""


def page_template() -> Any:
    """The page's compiled template (compiled once: about 50 ms of Python)."""
    with _compiling:
        return _environment().get_template(TEMPLATE)


@cache
def _environment() -> Any:
    import jinja2

    from rcdiag.formatting import count, pct, short

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fmt"] = short
    env.filters["pct"] = pct
    env.filters["count"] = count
    return env


def _asset(name: str) -> Markup:
    return Markup((TEMPLATES / name).read_text(encoding="utf-8"))


def view_model(document: Any) -> dict[str, Any]:
    """:func:`rcdiag.report.view.view_model` with the figures as script-safe JSON."""
    model = view.view_model(document)
    return {**model, "figures_json": json_for_script(model.pop("figures"))}


def render_html(
    document: Any, plotlyjs: PlotlySource | str | None = None, page: str | Path | None = None
) -> str:
    """The report page for a result document (module docstring).

    Args:
        plotlyjs: ``embed`` (default), a path or an http(s) URL (:mod:`rcdiag.report.plotlyjs`).
        page: where the page will be written: a path source is referenced relative to it.
    """
    source = plotlyjs if isinstance(plotlyjs, PlotlySource) else parse_source(plotlyjs)
    plotly = (
        {"embed": True, "data": Markup(bundle_base64()), "src": ""}
        if source.mode == "embed"
        else {"embed": False, "data": "", "src": script_src(source, page)}
    )
    template = page_template()
    return str(
        template.render(
            **view_model(document),
            css=_asset("report.css"),
            script=_asset("report.js"),
            plotly=plotly,
        )
    )


def write_html(path: str | Path, document: Any, plotlyjs: PlotlySource | str | None = None) -> int:
    """Render and write the report atomically (and plotly.js at a path source that has no file
    yet); returns the page's size in bytes."""
    source = plotlyjs if isinstance(plotlyjs, PlotlySource) else parse_source(plotlyjs)
    html = render_html(document, source, path)
    data = html.encode("utf-8", "backslashreplace")  # a file name's undecodable bytes: \udcff
    with atomic_write(path, "wb") as handle:
        handle.write(data)
    provide(source)
    return len(data)


__all__ = [
    "Chart",
    "json_for_script",
    "missing_sections",
    "plotly_js",
    "render_html",
    "view_model",
    "write_html",
]
