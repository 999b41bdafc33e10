"""R-MOTiFS benchmarks: see README.md in this folder.

One BLAS thread for every script of this package: the per-subset matrices are small, and
threads fighting for the 2 shared cores made each reward 5x slower (measured). Set here, in
the package's ``__init__``, because it must happen before numpy is imported and
``python -m bench.r_motifs.<script>`` runs this file first.
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
