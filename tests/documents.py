"""Comparing two result documents (``to_json()``) leaf by leaf, for the tests that compute one
result two ways: by another engine, batching, thread split, cache, file format or value width."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any


def assert_documents_close(
    a: Any,
    b: Any,
    *,
    rel: float,
    abs_tol: float = 0.0,
    nan_equal: bool = False,
    skip: Callable[[str], bool] | None = None,
    where: str = "",
) -> None:
    """Equal keys, lengths and non-float leaves; floats equal, or within ``abs_tol`` or ``rel``
    times the smaller magnitude of the two (``rel=0, abs_tol=0``: exactly equal). ``nan_equal``:
    NaN matches NaN. ``skip``: strings it returns True for (paths that name the input) are not
    compared. The failure names the path of the leaf."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            assert_documents_close(
                a[key],
                b[key],
                rel=rel,
                abs_tol=abs_tol,
                nan_equal=nan_equal,
                skip=skip,
                where=f"{where}/{key}",
            )
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_documents_close(
                x,
                y,
                rel=rel,
                abs_tol=abs_tol,
                nan_equal=nan_equal,
                skip=skip,
                where=f"{where}[{i}]",
            )
    elif isinstance(a, float) and isinstance(b, float):
        if a == b or (nan_equal and math.isnan(a) and math.isnan(b)):
            return
        bound = max(abs_tol, rel * min(abs(a), abs(b)))
        assert abs(a - b) <= bound, (where, a, b)
    elif skip is not None and isinstance(a, str) and isinstance(b, str) and skip(a):
        return
    else:
        assert a == b, (where, a, b)
