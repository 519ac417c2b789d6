"""The HTML report: results first, HTML second; no decision is made here.

* :mod:`rcdiag.report.run` — one pass over a dump → the report document
  (:class:`~rcdiag.model.ReportDocument`, whose ``to_json()`` the page is drawn from), with the
  verdict and the recommendation of :mod:`rcdiag.assess`; reading one back (``--from``).
* :mod:`rcdiag.report.figures`, :mod:`rcdiag.report.trends` and :mod:`rcdiag.report.render` —
  plotly figures and the HTML page, built from the document only.
"""
