"""Decisions from measured figures, apart from any rendering.

* :mod:`~rcdiag.assess.registry` — one record per judged metric: healthy / watch / act bands.
* :mod:`~rcdiag.assess.diagnosis` — the causes (dump bugs, real mismatch) and the verdict;
  detectors in :mod:`~rcdiag.assess.dump_bugs` and :mod:`~rcdiag.assess.mismatch`.
* :mod:`~rcdiag.assess.findings`, :mod:`~rcdiag.assess.verdict`, :mod:`~rcdiag.assess.recommend`,
  :mod:`~rcdiag.assess.candidates`, :mod:`~rcdiag.assess.snippets` — the figures the
  recommendation reads, the headline and gauges, the ranked configurations and their snippets.
"""
