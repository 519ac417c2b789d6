"""The HTML report: results first, HTML second; no decision is made here.

* :mod:`rcdiag.report.run` — one pass over a dump → the report document (JSON-ready dict), with
  the verdict and the recommendation of :mod:`rcdiag.assess`.
* :mod:`rcdiag.report.figures`, :mod:`rcdiag.report.trends` and :mod:`rcdiag.report.render` —
  plotly figures and the HTML page, built from the document only.
"""
