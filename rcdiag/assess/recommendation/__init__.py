"""The recommendation: which rollout-correction configuration to use, and why.

* :mod:`~rcdiag.assess.recommendation.rules` — the rule table;
* :mod:`~rcdiag.assess.recommendation.candidates` — the candidate sweeps measured on the dump;
* :mod:`~rcdiag.assess.recommendation.entries` — the measured configurations a document holds;
* :mod:`~rcdiag.assess.recommendation.ranking` — :func:`recommend`, the ranked choices;
* :mod:`~rcdiag.assess.recommendation.snippets` — a configuration as verl YAML, Python, overrides.
"""
