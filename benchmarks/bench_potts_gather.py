"""The full Potts objective by gathers against the dense one-hot products.

One evaluation of :func:`sklearn_attn.potts._model.objective` (the full model,
``alpha_couplings=16``, ``alpha_fields=0.01``, float32 products) on random
codes of ``n`` sequences and ``L`` sites (``q = 21``), by the two routes in
turn in one process: the median of repeats of each, after a first call that
compiles the kernels and fills the buffers (timed apart), their ratio, and
the two values and gradients against each other. Also: the time of importing
numba and loading the cached kernels, in a fresh interpreter.

Usage::

    python benchmarks/bench_potts_gather.py                # L = 53, 100, 200, 400
    python benchmarks/bench_potts_gather.py --quick        # a smoke run, no file
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
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


def compare(n_sites, n_sequences, repeats, seed=0):
    from sklearn_attn.potts._model import FullCouplings, OneHotRows

    rng = np.random.default_rng(seed)
    codes = rng.integers(0, N_STATES, size=(n_sequences, n_sites))
    weights = rng.uniform(0.5, 1.0, n_sequences)
    model = FullCouplings(n_sites, N_STATES)
    theta = 0.05 * rng.standard_normal(model.n_params)
    result = {"L": n_sites, "n": n_sequences}
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


def import_seconds():
    """Seconds to import numba and load the cached kernels, in a new process
    (after this process has compiled them)."""
    code = (
        "import time; t = time.perf_counter(); import numba; "
        "t1 = time.perf_counter(); "
        "from sklearn_attn.potts import _gather_kernels; "
        "t2 = time.perf_counter(); print(t1 - t, t2 - t1)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    numba_s, kernels_s = map(float, out.stdout.split())
    return {"import_numba_s": numba_s, "import_kernels_s": kernels_s}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[53, 100, 200, 400])
    parser.add_argument("--n-sequences", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--output", type=Path, default=ROOT / "benchmarks/results/potts_gather.json"
    )
    parser.add_argument("--quick", action="store_true", help="L = 20, 500 rows")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.n_sequences, args.repeats = [20], 500, 1
    record = {"machine": machine_info(), "n_states": N_STATES}
    record["sizes"] = [
        compare(n_sites, args.n_sequences, args.repeats) for n_sites in args.sizes
    ]
    record["imports"] = import_seconds()
    record["machine"]["load_average_after"] = machine_info()["load_average_1_5_15"]
    if not args.quick:
        args.output.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
