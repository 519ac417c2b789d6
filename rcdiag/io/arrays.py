"""Arrow arrays as numpy arrays, without pyarrow's pandas conversion.

``pyarrow.Array.to_numpy()`` (and ``numpy.asarray`` of an Arrow array) goes through pyarrow's
pandas conversion, which imports pandas whenever it is installed: 0.3–0.7 s added to every command
on a machine that has pandas, for arrays that need no conversion at all. :func:`as_numpy` reads the
data buffer of a null-free numeric or boolean array directly (zero copy for numbers, one unpacking
of the bits for booleans), lists strings as Python objects, and leaves every other array to
pyarrow.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def as_numpy(array: pa.Array) -> np.ndarray:
    """The values of ``array`` as a numpy array, as ``array.to_numpy(zero_copy_only=False)`` gives
    them: a read-only view of a null-free integer or floating array's buffer, a fresh ``bool``
    array for a null-free boolean one, pyarrow's own conversion for anything else (nulls,
    chunked arrays), except that strings become an object array of ``str`` (``None`` for a
    null) without it.

    Example:
        >>> import pyarrow as pa
        >>> as_numpy(pa.array([1.5, 2.0, 3.0], pa.float32()).slice(1)).tolist()
        [2.0, 3.0]
        >>> as_numpy(pa.array([True, False, True, True]).slice(1)).tolist()
        [False, True, True]
        >>> as_numpy(pa.array(["a", None])).tolist()
        ['a', None]
    """
    kind = array.type
    simple = isinstance(array, pa.Array) and array.null_count == 0
    size, offset = len(array), array.offset if simple else 0
    if simple and pa.types.is_boolean(kind):
        if size == 0:
            return np.zeros(0, dtype=bool)
        bits = np.frombuffer(array.buffers()[1], dtype=np.uint8)
        unpacked = np.unpackbits(bits, count=offset + size, bitorder="little")
        return unpacked[offset:].view(bool)
    if simple and (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        dtype = np.dtype(kind.to_pandas_dtype())
        if size == 0:
            return np.zeros(0, dtype=dtype)
        data = array.buffers()[1]
        return np.frombuffer(data, dtype=dtype, count=size, offset=offset * dtype.itemsize)
    if isinstance(array, pa.Array) and (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        return np.array(array.to_pylist(), dtype=object)  # str, None for a null: as pyarrow's
    return array.to_numpy(zero_copy_only=False)
