"""Readers of the dumps other trainers write as they are: slime's and Miles' ``--dump-details``
directories, NeMo-RL's ``train_data_step{N}.jsonl``, SkyRL's dumped training batches
(docs/formats.md). Each yields the record batches the parquet reader reads from rcdiag's own dump.

* :mod:`~rcdiag.io.native.names` — what a file's name and place say it is (discovery);
* :mod:`~rcdiag.io.native.detect` — the format of a dump's files (``--format``) and their readers;
* :mod:`~rcdiag.io.native.slime` (with :mod:`~rcdiag.io.native.miles`),
  :mod:`~rcdiag.io.native.nemo_rl`, :mod:`~rcdiag.io.native.skyrl` — one reader per trainer.
"""
