"""CI gates on the rollout/training mismatch (``rcdiag check`` and ``rcdiag baseline``).

Pure compute, no I/O and no printing:

* :mod:`~rcdiag.checks.rules` — rules as data, their grammar (compact and TOML) and validation;
* :mod:`~rcdiag.checks.defaults` — the built-in rule set (the registry's bands, baseline);
* :mod:`~rcdiag.metrics.bootstrap` — the streaming sequence-level Poisson bootstrap;
* :mod:`~rcdiag.checks.baseline` — baseline documents and the drift decision;
* :mod:`~rcdiag.checks.catalog` — the metric names a run will produce;
* :mod:`~rcdiag.checks.evaluate` — evaluation and the serializable check result;
* :mod:`~rcdiag.checks.outputs` — JUnit XML and Markdown renderings of that result.
"""
