"""Decisions from measured figures, apart from any rendering: three subsystems, each a package.

* :mod:`~rcdiag.assess.diagnosis` — the causes (dump bugs, real mismatch);
* :mod:`~rcdiag.assess.verdict` — healthy / watch / act, its headline and gauges;
* :mod:`~rcdiag.assess.recommendation` — the ranked configurations and their snippets.

Shared by them: :mod:`~rcdiag.assess.judge` (metric statuses against the records' bands),
:mod:`~rcdiag.assess.findings` (the figures a document holds), :mod:`~rcdiag.assess.wording` and
:mod:`~rcdiag.assess.statements` (the words), :mod:`~rcdiag.assess.references` (the reference
values the report's charts draw).
"""
