"""plotly.js for the page: embedded gzip-compressed (the default), or loaded from a path or a URL.

The report draws scatter and bar traces only, so it ships plotly.js's *basic* bundle (scatter, bar,
pie; the npm package ``plotly.js-basic-dist-min``, :data:`PLOTLY_JS_VERSION`, MIT licence in
``templates/plotly-LICENSE.txt``) as ``templates/plotly-basic.min.js.gz``: 1.19 MB of JavaScript,
0.40 MB compressed. :func:`parse_source` reads ``--plotlyjs``:

* ``embed`` — the compressed bundle, base64-encoded, in ``<script type="application/octet-stream"
  id="rcdiag-plotly">``: the page inflates it with the browser's ``DecompressionStream('gzip')`` and
  runs it before drawing. The page stays one self-contained file (~0.5 MB) that needs no network.
* an ``http://`` or ``https://`` URL — ``<script src=URL>``: small pages, but the browser needs to
  reach the URL.
* a path — ``<script src=…>`` relative to the page, so reports written beside each other share one
  copy; rcdiag writes the bundle there when the file does not exist (and leaves an existing file
  alone, e.g. another plotly.js build).

To update the bundle: ``npm pack plotly.js-basic-dist-min@VERSION``, gzip ``plotly-basic.min.js``
(level 9, no timestamp) into ``templates/`` and update :data:`PLOTLY_JS_VERSION` and
:data:`PLOTLY_JS_SHA256` (a test checks both).
"""

from __future__ import annotations

import base64
import gzip
import importlib.resources
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from rcdiag.errors import UsageError
from rcdiag.io.writer import atomic_write

TEMPLATES = Path(str(importlib.resources.files("rcdiag.templates")))
BUNDLE = "plotly-basic.min.js.gz"
PLOTLY_JS_VERSION = "4.1.1"
PLOTLY_JS_SHA256 = "99784e3abfb07b142a15e521a439e6d9addceadb3f79553fd24c72774f0649ba"
"""SHA-256 of the uncompressed bundle, as npm ships it."""

EMBED = "embed"


@dataclass(frozen=True)
class PlotlySource:
    """Where the page gets plotly.js: ``embed``, a ``url`` or a ``path`` (see the module)."""

    mode: Literal["embed", "url", "path"]
    location: str = ""


def parse_source(text: str | None) -> PlotlySource:
    """``--plotlyjs`` as given: ``embed`` (default), an http(s) URL, or a path.

    Example:
        >>> parse_source(None), parse_source("https://example.org/plotly.js").mode
        (PlotlySource(mode='embed', location=''), 'url')
    """
    if text is None or text == EMBED:
        return PlotlySource("embed")
    if not text.strip():
        raise UsageError(
            "--plotlyjs: expected embed, a path or an http(s) URL, not an empty string"
        )
    if text.lower().startswith(("http://", "https://")):
        return PlotlySource("url", text)
    if "://" in text:
        raise UsageError(f"--plotlyjs {text!r}: only http:// and https:// URLs can be loaded")
    return PlotlySource("path", text)


@cache
def bundle_gzip() -> bytes:
    """The compressed bundle as shipped."""
    return (TEMPLATES / BUNDLE).read_bytes()


@cache
def bundle_base64() -> str:
    """The compressed bundle, base64-encoded, as the page embeds it."""
    return base64.b64encode(bundle_gzip()).decode("ascii")


@cache
def plotly_js() -> str:
    """The plotly.js source (what ``embed`` inflates to, and what a path receives)."""
    return gzip.decompress(bundle_gzip()).decode("utf-8")


def script_src(source: PlotlySource, page: str | Path | None) -> str:
    """The ``src`` of the page's plotly.js script: the URL, or the path relative to the page's
    directory (absolute ``file:`` URL when there is no relative path, e.g. another drive)."""
    if source.mode == "url":
        return source.location
    target = Path(source.location).expanduser().absolute()
    base = Path(page).absolute().parent if page is not None else Path.cwd()
    try:
        relative = os.path.relpath(target, base)
    except ValueError:
        return target.as_uri()
    return quote(Path(relative).as_posix(), safe="/._-~")


def provide(source: PlotlySource) -> bool:
    """Write the bundle at a ``path`` source when no file is there; True when written."""
    if source.mode != "path":
        return False
    target = Path(source.location).expanduser()
    if target.is_dir():
        raise UsageError(f"--plotlyjs {source.location}: is a directory (give a file name)")
    if target.exists():
        return False
    try:
        with atomic_write(target, "wb") as handle:
            handle.write(plotly_js().encode("utf-8"))
    except OSError as exc:
        raise UsageError(f"{target}: cannot write ({exc.strerror or exc})") from None
    return True
