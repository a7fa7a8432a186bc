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


def matmul_rate(size=2048, repeats=5, dtype=np.float64, xp=np, sync=None):
    """GEMM rate in FLOP/s (median of repeats, default BLAS threads).

    ``xp`` is the array module (CuPy for a GPU, with ``sync`` waiting for it
    to finish: its work is asynchronous).
    """
    rng = np.random.default_rng(0)
    a = xp.asarray(rng.standard_normal((size, size)), dtype=dtype)
    b = xp.asarray(rng.standard_normal((size, size)), dtype=dtype)
    sync = sync or (lambda: None)
    a @ b  # warm up the BLAS threads (or the cuBLAS handle)
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        sync()
        times.append(time.perf_counter() - start)
    return 2 * size**3 / float(np.median(times))


def token_regression(n, n_keys, d, dtype=np.float64, seed=0):
    """Query-key data of the random-feature benchmarks: tokens on the sphere of
    radius sqrt(d), target the mean query-key correlation plus noise 0.1."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, n_keys + 1, d))
    X *= np.sqrt(d) / np.linalg.norm(X, axis=2, keepdims=True)
    y = np.einsum("nd,nkd->n", X[:, 0], X[:, 1:]) / (n_keys * np.sqrt(d))
    return X.astype(dtype, copy=False), y + 0.1 * rng.standard_normal(n)
