"""The page's template compiled while a pass runs (:func:`compile_in_background`)."""

from __future__ import annotations

import threading


def _compile() -> None:
    from rcdiag.report.render import page_template

    page_template()


def compile_in_background() -> None:
    """Import the renderer and compile the page's template on a worker thread (about 0.1 s of
    Python): a command that renders the page after its pass calls this first, and the pass, which
    spends its time in numpy and pyarrow outside the interpreter lock, hides it. Rendering takes
    the compiled template, or compiles it itself when this has not finished (never twice)."""
    threading.Thread(target=_compile, name="rcdiag-template", daemon=True).start()
