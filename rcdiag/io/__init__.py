"""Reading and writing dumps: schema, discovery, streaming parquet readers, atomic writers."""

from rcdiag.io.files import ColumnNames, StepSelection
from rcdiag.io.reader import DumpReader
from rcdiag.io.writer import atomic_write, write_dump

__all__ = ["ColumnNames", "DumpReader", "StepSelection", "atomic_write", "write_dump"]
