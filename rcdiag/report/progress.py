"""A progress bar in a notebook: the rows a pass has read, shown under the running cell by
IPython's own display (an HTML ``<progress>`` element and a text line; no widget library).

:func:`in_notebook` says whether the code runs in a Jupyter kernel, the only place
:mod:`rcdiag.api` shows one unasked; elsewhere (a script, a test, a terminal) the API stays silent
and the commands draw their own bar on a terminal's stderr.
"""

from __future__ import annotations

import functools
import html
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

UPDATE_EVERY = 0.2
"""Seconds between two redraws at most (a pass reports every batch; redraws cost the kernel)."""


def in_notebook() -> bool:
    """True inside a Jupyter kernel (IPython's ``ZMQInteractiveShell``), False elsewhere."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class NotebookProgress:
    """``progress(rows_read, total_rows)`` drawn under the running cell; :meth:`finish` leaves
    one line saying what was read and how long it took."""

    def __init__(self, what: str = "reading", unit: str = "rows") -> None:
        self.what, self.unit = what, unit
        self.started = time.monotonic()
        self.drawn_at = 0.0
        self.done = self.total = 0
        self.handle: Any = None

    def __call__(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        now = time.monotonic()
        if self.handle is None or now - self.drawn_at >= UPDATE_EVERY or done >= total:
            self._draw(self._bundle())
            self.drawn_at = now

    def _bundle(self) -> dict[str, str]:
        share = f" ({self.done / self.total:.0%})" if self.total else ""
        text = f"rcdiag: {self.what} {self.done:,} / {self.total:,} {self.unit}{share}"
        bar = f'<progress value="{self.done}" max="{max(self.total, 1)}" style="width:16em"></progress>'
        return {
            "text/plain": text,
            "text/html": f'<div class="rcdiag-progress">{bar} {html.escape(text)}</div>',
        }

    def _draw(self, bundle: dict[str, str]) -> None:
        from IPython.display import display

        if self.handle is None:
            self.handle = display(bundle, raw=True, display_id=True)
        else:
            self.handle.update(bundle, raw=True)

    def finish(self) -> None:
        """Replace the bar with one line: ``rcdiag: read 1,234 rows in 2.1 s``."""
        if self.handle is None:
            return
        seconds = time.monotonic() - self.started
        text = f"rcdiag: read {self.done:,} {self.unit} in {seconds:.1f} s"
        self._draw({"text/plain": text, "text/html": f'<div class="rcdiag-progress">{text}</div>'})


F = TypeVar("F", bound=Callable[..., Any])


def shows_progress_in_notebooks(function: F) -> F:
    """In a Jupyter notebook, a call without ``progress=`` shows a bar of the rows read under the
    cell (:class:`NotebookProgress`), and one line when done; anywhere else
    nothing is shown unless ``progress`` is given."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("progress") is not None:
            return function(*args, **kwargs)
        if not in_notebook():
            return function(*args, **kwargs)
        bar = NotebookProgress()
        try:
            return function(*args, **{**kwargs, "progress": bar})
        finally:
            bar.finish()

    return wrapper  # type: ignore[return-value]
