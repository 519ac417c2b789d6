"""The diagnosis: which causes explain a dump — a bug in how it was made, or a real mismatch.

* :mod:`~rcdiag.assess.diagnosis.causes` — one record per cause and :func:`diagnose`;
* :mod:`~rcdiag.assess.diagnosis.observations` — what the detectors read, and their limits;
* :mod:`~rcdiag.assess.diagnosis.dump_bugs`, :mod:`~rcdiag.assess.diagnosis.mismatch` — the
  detectors of each family.
"""
