"""The HTML report and the recommendation: results first, HTML second.

* :mod:`rcdiag.report.run` — one pass over a dump → the report document (JSON-ready dict).
* :mod:`rcdiag.report.findings`, :mod:`rcdiag.report.verdict`, :mod:`rcdiag.report.recommend` —
  pure functions of that document: the figures the rules read, healthy / watch / act, and the ranked
  configurations with reasons.
* :mod:`rcdiag.report.figures` and :mod:`rcdiag.report.render` — plotly figures and the HTML page,
  built from the document only.
"""
