"""The spine: the one road from a dump to a decided, typed document.

* :mod:`~rcdiag.run.dump` — where a dump is and how to read it (:class:`DumpSpec`), and the one table
  of dump options the API's ``**dump`` and the commands' flags come from;
* :mod:`~rcdiag.run.consumers` — what one pass computes (mergeable consumers);
* :mod:`~rcdiag.run.engine` — the one place a pass starts, here or on Ray (:mod:`~rcdiag.run.ray`);
* :mod:`~rcdiag.run.results`, :mod:`~rcdiag.run.documents`, :mod:`~rcdiag.run.check` — the
  builders: every decision (diagnosis, verdict, recommendation, check results) made once.
"""
