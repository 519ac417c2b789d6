"""The verdict: healthy, watch or act, its headline and the gauges that decide it.

* :mod:`~rcdiag.assess.verdict.signals` — the signals and :func:`verdict`;
* :mod:`~rcdiag.assess.verdict.gauges` — a deciding figure on its metric's published ranges.
"""
