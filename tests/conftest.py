"""Shared test set-up."""

from __future__ import annotations

import sys
from pathlib import Path

# pytest runs with --import-mode=importlib, which does not put tests/ on sys.path; the test modules
# import the independent reference implementation as a plain top-level module ``reference``.
_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)
