"""The median and quantiles rcdiag takes without numpy's (which import its masked arrays) agree
with numpy's own, value for value."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rcdiag.metrics.distributions import median, quantiles


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 10, 11, 100, 1001])
def test_quantiles_and_median_equal_numpys(size: int) -> None:
    rng = np.random.default_rng(size)
    qs = [0.0, 0.025, 0.5, 0.95, 0.975, 1.0, *rng.uniform(0, 1, 10).tolist()]
    for _ in range(20):
        values = rng.standard_normal(size) * 10 ** rng.uniform(-8, 8)
        if size > 3:
            values[: size // 3] = values[0]  # ties
        assert quantiles(values, qs) == np.quantile(values, qs).tolist()
        assert median(values) == float(np.median(values))


def test_nan_and_bad_arguments() -> None:
    assert all(math.isnan(q) for q in quantiles([1.0, math.nan, 2.0], [0.1, 0.9]))
    with pytest.raises(ValueError, match="no values"):
        quantiles([], [0.5])
    with pytest.raises(ValueError, match="outside"):
        quantiles([1.0], [1.5])
