"""What every benchmark script records: the machine, and the same-run matmul rate."""

from __future__ import annotations

import os
import platform
import time

import numpy as np


def machine_info():
    """Platform, CPU count, load, library versions and BLAS thread pools."""
    import scipy
    import sklearn
    from threadpoolctl import threadpool_info

    keys = ("internal_api", "version", "num_threads", "architecture", "filepath")
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "load_average_1_5_15": list(os.getloadavg()),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "sklearn": sklearn.__version__,
        "blas": [{k: info.get(k) for k in keys} for info in threadpool_info()],
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
    }


def matmul_rate(size=2048, repeats=5):
    """float64 GEMM rate in FLOP/s (median of repeats, default BLAS threads)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((size, size)), rng.standard_normal((size, size))
    a @ b  # warm up the BLAS threads
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - start)
    return 2 * size**3 / float(np.median(times))
