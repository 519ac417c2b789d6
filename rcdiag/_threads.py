"""The CLI's thread budget, fixed before numpy loads its BLAS library.

rcdiag already overlaps parquet decoding (a reader thread) with the numpy work on the main thread.
A multi-threaded BLAS would add threads that spin against both: on a 2-core machine that doubled
the CPU time of ``compare-presets`` for no gain (its dot products and the bootstrap's small matrix
products are memory-bound). The command-line process therefore asks for one BLAS thread unless the
user has said otherwise; the library, imported into someone else's process, leaves it alone.
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
