"""Arrow arrays reach numpy without pyarrow's pandas conversion, with the values it would give."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from rcdiag.io.arrays import as_numpy

ARRAYS = {
    "float32": pa.array(np.linspace(-3, 0, 37, dtype=np.float32)),
    "float64": pa.array(np.linspace(-3, 0, 37)),
    "float16": pa.array(np.linspace(-3, 0, 37).astype(np.float16)),
    "int8": pa.array(np.arange(-18, 19, dtype=np.int8)),
    "int32": pa.array(np.arange(37, dtype=np.int32)),
    "uint64": pa.array(np.arange(37, dtype=np.uint64) * (2**58)),
    "bool": pa.array(np.arange(37) % 3 == 0),
    "bool, all set": pa.array(np.ones(37, dtype=bool)),
    "float with nulls": pa.array([1.5, None, -2.0] * 12),
    "int with nulls": pa.array([1, None, 3] * 12, pa.int64()),
    "bool with nulls": pa.array([True, None, False] * 12),
    "string": pa.array([f"uid-{i}" for i in range(37)]),
    "large string with nulls": pa.array(["a", None, "b"] * 12, pa.large_string()),
}


@pytest.mark.parametrize("name", list(ARRAYS))
@pytest.mark.parametrize(("start", "stop"), [(0, 37), (1, 37), (3, 20), (9, 9), (36, 37)])
def test_as_numpy_gives_what_pyarrow_gives(name: str, start: int, stop: int) -> None:
    array = ARRAYS[name].slice(start, stop - start)
    expected = array.to_numpy(zero_copy_only=False)
    got = as_numpy(array)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if expected.dtype == object:
        assert got.tolist() == expected.tolist()
    else:
        np.testing.assert_array_equal(got, expected)


def test_list_values_of_a_sliced_list_array() -> None:
    lists = pa.array([[True, False, True], [False], [True, True, False, False]]).slice(1)
    assert as_numpy(lists.flatten()).tolist() == [False, True, True, False, False]
    assert as_numpy(lists.value_lengths()).tolist() == [1, 4]


def test_reading_a_dump_does_not_import_pandas(tmp_path: Path) -> None:
    """pyarrow's own conversion imports pandas when it is installed (0.3–0.7 s)."""
    pytest.importorskip("pandas")
    from rcdiag import write_dump

    rollout = np.linspace(-2, -0.1, 24).reshape(4, 6)
    path = write_dump(
        tmp_path / "d.parquet",
        rollout,
        rollout - 0.01,
        step=[0, 0, 1, 1],
        extra_columns={"uid": ["a", "b", "c", "d"]},
    )
    code = (
        "import sys; from rcdiag.cli import main; sys.argv[1:] = ['report', sys.argv[1], '-q', "
        "'-o', sys.argv[2]]\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('pandas' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path), str(tmp_path / "r.html")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip().splitlines()[-1] == "False", done.stdout + done.stderr
