"""The HTML report: results first, HTML second; no decision is made here.

* :mod:`rcdiag.run.documents` — one pass over a dump → the report document
  (:class:`~rcdiag.model.ReportDocument`, whose ``to_json()`` the page is drawn from), with the
  verdict and the recommendation of :mod:`rcdiag.assess`; reading one back (``--from``).
* :mod:`rcdiag.report.view` — what the page prints, laid out from the document (words and
  thresholds from :mod:`rcdiag.assess`); :mod:`rcdiag.report.texts` — the glossary and card texts.
* :mod:`rcdiag.report.figures` (shared parts), :mod:`rcdiag.report.trends` with
  :mod:`rcdiag.report.steps`, :mod:`rcdiag.report.histograms`, :mod:`rcdiag.report.buckets` and
  :mod:`rcdiag.report.sweeps` — the plotly figures, built from the document only.
* :mod:`rcdiag.report.plotlyjs` and :mod:`rcdiag.report.render` — plotly.js for the page and the
  HTML page itself.
"""
