"""The CPU eigendecomposition on one BLAS thread against the default thread count.

The ridge estimators decompose a symmetric matrix once per fit
(``sklearn_attn._backend.eigh``, LAPACK's ``syevd``). Its tridiagonal reduction
is half level-2 BLAS, whose threads synchronise at every step, so with
OpenBLAS's spinning threads a second busy process on the machine can slow it
down many times. This script measures ``scipy.linalg.eigh`` at several sizes on
one thread and on the default count, alternating the two in each repeat, and
optionally with a busy process beside it (``--load``), so that both are
measured under the same conditions. Below ``_EIGH_SERIAL_SIZE`` the package
uses one thread.

    python benchmarks/bench_eigh_threads.py --out benchmarks/results/eigh_threads.json
    python benchmarks/bench_eigh_threads.py --load \
        --out benchmarks/results/eigh_threads_loaded.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time

import numpy as np
import scipy.linalg
from _common import machine_info
from threadpoolctl import threadpool_limits

from sklearn_attn._backend import _EIGH_SERIAL_SIZE


def _spin(stop):
    while not stop.is_set():
        pass


def time_eigh(n, n_threads, repeats, rng):
    a = rng.standard_normal((n, n))
    a = a @ a.T
    times = []
    for _ in range(repeats):
        matrix = np.asfortranarray(a)
        with threadpool_limits(n_threads, user_api="blas"):
            start = time.perf_counter()
            scipy.linalg.eigh(
                matrix, overwrite_a=True, check_finite=False, driver="evd"
            )
            times.append(time.perf_counter() - start)
    return float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024, 2048])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--load", action="store_true", help="a busy process beside")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    stop = multiprocessing.Event()
    spinner = None
    if args.load:
        spinner = multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
        spinner.start()
    default_threads = None  # threadpoolctl: leave the count as it is
    rows = []
    try:
        for n in args.sizes:
            rng = np.random.default_rng(n)
            one = time_eigh(n, 1, args.repeats, rng)
            default = time_eigh(n, default_threads, args.repeats, rng)
            rows.append(
                {
                    "n": n,
                    "one_thread_s": one,
                    "default_threads_s": default,
                    "default_over_one": default / one,
                }
            )
            print(
                f"n={n:5d}  one thread {one:8.3f} s  default {default:8.3f} s  "
                f"ratio {default / one:6.2f}"
            )
    finally:
        stop.set()
        if spinner is not None:
            spinner.join()
    result = {
        "machine": machine_info(),
        "busy_process_beside": args.load,
        "serial_below": _EIGH_SERIAL_SIZE,
        "rows": rows,
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
