"""The version of rcdiag and of the JSON documents it writes (a leaf: imports nothing)."""

__version__ = "0.1.0"

SCHEMA_VERSION = 2
"""Version of the JSON documents rcdiag writes (docs/report.md, "Results JSON")."""
