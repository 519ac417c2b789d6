"""Readers of the dumps other trainers write as they are: slime's and Miles' ``--dump-details``
directories, NeMo-RL's ``train_data_step{N}.jsonl``, SkyRL's dumped training batches
(docs/formats.md). Each yields the record batches the parquet reader reads from rcdiag's own dump.
"""

from rcdiag.io.native.detect import FORMATS, InputFormat, open_dump

__all__ = ["FORMATS", "InputFormat", "open_dump"]
