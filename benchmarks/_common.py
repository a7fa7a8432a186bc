"""What every benchmark script records: the machine, and the same-run matmul rate."""

from __future__ import annotations

import os
import platform
import resource
import time
from pathlib import Path

import numpy as np


def _cpu_model():
    """The CPU's model name (Linux's ``/proc/cpuinfo``), or None where unknown:
    ratios against a reference in the same run compare across machines, times
    do not."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def machine_info():
    """Platform, CPU count, load, library versions and BLAS thread pools."""
    import scipy
    import sklearn
    from threadpoolctl import threadpool_info

    keys = ("internal_api", "version", "num_threads", "architecture", "filepath")
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_model": _cpu_model(),
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


def stream_batch(index, args):
    """Samples ``[index * args.batch, (index + 1) * args.batch)`` of the
    streamed benchmarks' data set (``bench_partial_fit.py``, ``bench_dask.py``),
    from a generator seeded by ``(args.seed, index)``: any batch without the
    others, the same in both scripts."""
    return token_regression(
        args.batch, args.keys, args.dim, seed=[args.seed, int(index)]
    )


def peak_memory_bytes():
    """This process's resident high-water mark (``VmHWM``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
