"""The full Potts objective by gathers against the dense one-hot products.

One evaluation of :func:`sklearn_attn.potts._model.objective` (the full model,
``alpha_couplings=16``, ``alpha_fields=0.01``, float32 products) on random
codes of ``n`` sequences and ``L`` sites (``q = 21``), and on the distinct
sequences of the bundled PF00014 family (their multiplicities as weights; a
protein family, whose consensus residues the gathers skip), by the two routes in
turn in one process: the median of repeats of each, after a first call that
compiles the kernels and fills the buffers (timed apart), their ratio, and
the two values and gradients against each other. Also, in fresh interpreters
with an empty numba cache: the time of importing numba and of the first
objective by gathers, once compiling the kernels (the first fit after an
install) and once loading them from the cache.

Usage::

    python benchmarks/bench_potts_gather.py                # L = 53, 100, 200, 400
    python benchmarks/bench_potts_gather.py --quick        # a smoke run, no file
    python benchmarks/bench_potts_gather.py --imports-only # the imports again
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info  # noqa: E402

N_STATES = 21


def _evaluation_seconds(rows, model, theta, repeats):
    from sklearn_attn.potts._model import objective

    start = time.perf_counter()
    value, grad = objective(theta, model, rows, 0.01, 16.0)
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        objective(theta, model, rows, 0.01, 16.0)
        times.append(time.perf_counter() - start)
    return value, grad.copy(), first, float(np.median(times))


def _random_codes(n_sites, n_sequences, seed=0):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, N_STATES, size=(n_sequences, n_sites))
    return codes, rng.uniform(0.5, 1.0, n_sequences)


def _pf00014_codes():
    """PF00014's distinct sequences and their multiplicities."""
    from sklearn_attn.datasets import load_pf00014
    from sklearn_attn.potts import encode_sequences

    family = load_pf00014()
    codes = encode_sequences(family.sequences, alphabet=family.alphabet)
    distinct, counts = np.unique(codes, axis=0, return_counts=True)
    return distinct, counts.astype(np.float64)


def compare(codes, weights, repeats, seed=0, **labels):
    from sklearn_attn.potts._model import FullCouplings, OneHotRows

    rng = np.random.default_rng(seed)
    n_sequences, n_sites = codes.shape
    model = FullCouplings(n_sites, N_STATES)
    theta = 0.05 * rng.standard_normal(model.n_params)
    result = {**labels, "L": n_sites, "n": n_sequences}
    outcome = {}
    for algorithm in ("dense", "gather"):
        rows = OneHotRows(
            codes, weights, N_STATES, dtype=np.float32, gather=algorithm == "gather"
        )
        value, grad, first, median = _evaluation_seconds(rows, model, theta, repeats)
        outcome[algorithm] = (value, grad)
        result[algorithm] = {"first_call_s": first, "evaluation_s": median}
    result["speedup_gather_over_dense"] = (
        result["dense"]["evaluation_s"] / result["gather"]["evaluation_s"]
    )
    (v_dense, g_dense), (v_gather, g_gather) = outcome["dense"], outcome["gather"]
    result["value_relative_difference"] = abs(v_gather - v_dense) / abs(v_dense)
    result["gradient_relative_difference"] = float(
        np.linalg.norm(g_gather - g_dense) / np.linalg.norm(g_dense)
    )
    print(json.dumps(result), flush=True)
    return result


# Imports numba, then runs a tiny objective by gathers (every kernel once),
# timing each step, and the peak resident memory (VmHWM: ru_maxrss would count
# the parent's memory copied by the fork too).
_FIRST_CALLS = """
import time
t0 = time.perf_counter()
import numba
t1 = time.perf_counter()
import numpy as np
from sklearn_attn.potts._model import FullCouplings, OneHotRows, objective
codes = np.random.default_rng(0).integers(0, 3, size=(40, 5))
model = FullCouplings(5, 3)
rows = OneHotRows(codes, np.ones(40), 3, dtype=np.float32, gather=True)
t2 = time.perf_counter()
objective(np.zeros(model.n_params), model, rows, 0.01, 1.0)
t3 = time.perf_counter()
from sklearn_attn._backend import peak_rss_bytes
print(t1 - t0, t3 - t2, peak_rss_bytes())
"""


def import_seconds():
    """Seconds to import numba and to make the kernels ready, in new processes
    with a cache folder of their own: the first (compiling them, as the first
    fit after an install does) and the second (loading them from the cache);
    and the peak resident memory of each."""
    record = {}
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(ROOT)}
        for run in ("compile", "cached"):
            out = subprocess.run(
                [sys.executable, "-c", _FIRST_CALLS],
                capture_output=True,
                text=True,
                check=True,
                env=env,
            )
            numba_s, kernels_s, peak = out.stdout.split()
            record[run] = {
                "import_numba_s": float(numba_s),
                "first_objective_s": float(kernels_s),
                "peak_rss_mb": int(peak) / 1e6,
            }
    return record


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[53, 100, 200, 400])
    parser.add_argument("--n-sequences", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--output", type=Path, default=ROOT / "benchmarks/results/potts_gather.json"
    )
    parser.add_argument("--quick", action="store_true", help="L = 20, 500 rows")
    parser.add_argument(
        "--imports-only",
        action="store_true",
        help="measure the imports again into the existing results file",
    )
    args = parser.parse_args(argv)
    if args.imports_only:
        record = json.loads(args.output.read_text())
        record["imports"] = import_seconds()
        args.output.write_text(json.dumps(record, indent=1) + "\n")
        print(json.dumps(record["imports"]))
        return
    if args.quick:
        args.sizes, args.n_sequences, args.repeats = [20], 500, 1
    record = {"machine": machine_info(), "n_states": N_STATES}
    record["sizes"] = [
        compare(*_random_codes(n_sites, args.n_sequences), args.repeats)
        for n_sites in args.sizes
    ]
    if not args.quick:
        record["pf00014"] = compare(*_pf00014_codes(), args.repeats, family="PF00014")
    record["imports"] = import_seconds()
    record["machine"]["load_average_after"] = machine_info()["load_average_1_5_15"]
    if not args.quick:
        args.output.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
