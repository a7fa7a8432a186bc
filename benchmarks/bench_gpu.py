"""GPU against CPU for the three estimator families, as issue 5 asks.

Run twice, once per machine, by the same script:

* ``--device cpu`` on the 2-core CPU machine (no GPU needed) writes
  ``benchmarks/results/gpu_cpu_reference.json``;
* ``--device cuda`` on the GPU machine (``benchmarks/gpu_check.sh`` runs it)
  writes its JSON where it is told and, given the CPU reference, the ratios.

What is measured:

* **RFA fit** (``RandomFeatureAttentionRegressor``, n = 100,000, N = 16 keys,
  d = 16, 4096 heads, float32, one alpha; ``p = 4096 * 17 = 69,632`` features,
  so the primal solver). On the GPU the whole fit is timed. On the CPU that fit
  does not fit in memory (its ``p x p`` float64 covariance alone is 39 GB), so
  its time is *estimated from measured rates*: the feature map's seconds per
  sample and head (a transform at 4096 heads), the Gram accumulation's rate
  (the package's own ``LowerGram`` on blocks of the fit's shape, at p = 8192,
  with the float64 products the CPU uses for float32 data) for the ``n p^2``
  flops, and float64 Cholesky's rate (at 8192) for the ``p^3 / 3``. The model
  is checked against a complete CPU fit at a size that fits (n = 12,000, 512
  heads), and the prediction error is reported. A lower bound puts the Gram
  flops at the CPU's float32 matrix-multiply rate and the Cholesky flops at
  its float64 rate instead; the GPU's speed-up is
  reported against both.
  The GPU's useful rate is the fit's dominant products (``n p^2`` for the
  Gram matrix, ``2 n M (d^2 + N d + N (d + 1))`` for the features) over the
  whole fit's time, against the float32 matrix-multiply rate measured in the
  same run: a lower bound on the rate of the products themselves.
* **MultiHeadAttentionLearner** and **PottsPseudoLikelihood**: seconds per
  L-BFGS iteration (fit time over iterations, host optimiser included) on the
  same problems on both devices: the learner at n = 100,000, k = 16, d = 16,
  m = 4; Potts on PF00014 (full couplings, and factored with 8 heads).

Usage::

    python benchmarks/bench_gpu.py --device cpu            # CPU reference
    python benchmarks/bench_gpu.py --device cuda --output results/gpu.json
    python benchmarks/bench_gpu.py --device cpu --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import machine_info, matmul_rate, token_regression  # noqa: E402

CPU_REFERENCE = ROOT / "benchmarks" / "results" / "gpu_cpu_reference.json"

FULL = {
    "rfa": dict(n=100_000, n_keys=16, d=16, heads=4096),
    "rfa_check": dict(n=12_000, n_keys=16, d=16, heads=512),
    "mha": dict(n=100_000, k=16, d=16, m=4, max_iter=10),
    "potts_max_iter": 10,
}
QUICK = {
    "rfa": dict(n=6_000, n_keys=8, d=8, heads=256),
    "rfa_check": dict(n=3_000, n_keys=8, d=8, heads=64),
    "mha": dict(n=2_000, k=8, d=8, m=2, max_iter=3),
    "potts_max_iter": 2,
}


# -- devices -------------------------------------------------------------------------


class _Clock:
    """Wall time that waits for the GPU to finish (CUDA work is asynchronous)."""

    def __init__(self, device):
        self.cupy = None
        if device != "cpu":
            import cupy

            self.cupy = cupy

    def sync(self):
        if self.cupy is not None:
            self.cupy.cuda.Device().synchronize()

    def time(self, func, repeats=1):
        times = []
        for _ in range(repeats):
            self.sync()
            start = time.perf_counter()
            func()
            self.sync()
            times.append(time.perf_counter() - start)
        return float(np.median(times))

    def release(self):
        if self.cupy is not None:
            self.cupy.get_default_memory_pool().free_all_blocks()


def _xp(device):
    if device == "cpu":
        return np
    import cupy

    return cupy


def _backend_device(device):
    from sklearn_attn._backend import resolve_device

    return resolve_device(device)


def gpu_info():  # pragma: no cover - needs a GPU
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    return {
        "name": props["name"].decode()
        if isinstance(props["name"], bytes)
        else props["name"],
        "total_memory_bytes": int(props["totalGlobalMem"]),
        "multiprocessors": int(props["multiProcessorCount"]),
        "cupy": cupy.__version__,
        "cuda_runtime": int(cupy.cuda.runtime.runtimeGetVersion()),
        "cuda_driver": int(cupy.cuda.runtime.driverGetVersion()),
    }


def _matmul_rate(device, dtype, size):
    clock = _Clock(device)
    return matmul_rate(size, dtype=dtype, xp=_xp(device), sync=clock.sync)


# -- random-feature attention ------------------------------------------------------


def _rfa_sizes(n, n_keys, d, heads):
    p = heads * (d + 1)
    return {
        "n": n,
        "n_keys": n_keys,
        "d": d,
        "heads": heads,
        "n_features": p,
        "gram_flops": float(n) * p * p,
        "feature_flops": 2.0 * n * heads * (d * d + n_keys * d + n_keys * (d + 1)),
        "cholesky_flops": p**3 / 3.0,
    }


def rfa_fit(device, n, n_keys, d, heads):
    """Time one float32 fit of the regressor; the model's dominant flops."""
    from sklearn_attn import RandomFeatureAttentionRegressor

    X, y = token_regression(n, n_keys, d, np.float32)
    model = RandomFeatureAttentionRegressor(
        n_heads=heads, alpha=1.0, random_state=0, device=device
    )
    # Warm up: kernels compile and the BLAS/cuBLAS handles start on a small fit.
    RandomFeatureAttentionRegressor(
        n_heads=8, alpha=1.0, random_state=0, device=device
    ).fit(X[:200], y[:200])
    # Record how the solver went (refinement steps, or float64 products).
    from sklearn_attn.random_features import _regressor

    solutions = []

    def recording_fit_ridge(*args, **kwargs):
        solutions.append(_fit_ridge(*args, **kwargs))
        return solutions[-1]

    _fit_ridge = _regressor.fit_ridge
    _regressor.fit_ridge = recording_fit_ridge
    try:
        start = time.perf_counter()
        model.fit(X, y)
        seconds = time.perf_counter() - start
    finally:
        _regressor.fit_ridge = _fit_ridge
    result = _rfa_sizes(n, n_keys, d, heads)
    result.update(seconds=seconds, solver=model.solver_)
    # None: float64 products (the CPU's route, or a float64 fallback on a GPU).
    result["refinement_steps"] = solutions[-1].refinement_steps
    result["train_r2_on_first_2000"] = float(model.score(X[:2000], y[:2000]))
    return result


def rfa_cpu_rates(n_keys, d, heads, gram_size, block_rows, chol_size):
    """Measured CPU rates of the fit's three parts, as the CPU runs them.

    The CPU multiplies float32 features in float64
    (``Device.single_precision_products``), so the Gram rate that enters the
    estimate is ``LowerGram``'s with float64 blocks; its float32 rate (the
    route a GPU takes) is recorded too.
    """
    import scipy.linalg

    from sklearn_attn import AttentionRandomFeatures
    from sklearn_attn._backend import LowerGram

    clock = _Clock("cpu")
    X, _ = token_regression(1000, n_keys, d, np.float32)
    transformer = AttentionRandomFeatures(n_heads=heads, random_state=0).fit(X)
    transformer.transform(X[:100])
    feature_seconds = clock.time(lambda: transformer.transform(X), repeats=3)

    rng = np.random.default_rng(0)
    device = _backend_device("cpu")
    gram_rates = {}
    for dtype in (np.float64, np.float32):
        block = rng.standard_normal((block_rows, gram_size)).astype(dtype)
        gram = LowerGram(gram_size, device)
        gram.add(block.T)  # the primal's call: block.T is (features, rows)
        seconds = clock.time(lambda: gram.add(block.T), repeats=3)  # noqa: B023
        gram_rates[np.dtype(dtype).name] = block_rows * gram_size**2 / seconds

    a = rng.standard_normal((chol_size, chol_size))
    spd = a @ a.T + chol_size * np.eye(chol_size)
    chol_seconds = clock.time(
        lambda: scipy.linalg.cho_factor(spd, lower=True, check_finite=False),
        repeats=3,
    )
    return {
        "feature_seconds_per_sample_head": feature_seconds / (X.shape[0] * heads),
        "gram_float64_flops_per_second": gram_rates["float64"],
        "gram_float32_flops_per_second": gram_rates["float32"],
        "cholesky_float64_flops_per_second": chol_size**3 / 3.0 / chol_seconds,
        "measured_at": {
            "transform": [X.shape[0], heads],
            "gram_block": [block_rows, gram_size],
            "cholesky": chol_size,
        },
    }


def rfa_cpu_estimate(rates, sizes, matmul32=None, matmul64=None):
    """CPU seconds of a fit from the measured rates (features + Gram + Cholesky).

    With the machine's GEMM rates, also a lower bound: the Gram matrix at the
    float32 matrix-multiply rate (as if the CPU took the float32 route at no
    cost for its refinement) and the Cholesky factorisation at the float64
    rate, which no implementation of them exceeds on this CPU.
    """
    parts = {
        "features": sizes["n"]
        * sizes["heads"]
        * rates["feature_seconds_per_sample_head"],
        "gram": sizes["gram_flops"] / rates["gram_float64_flops_per_second"],
        "cholesky": sizes["cholesky_flops"]
        / rates["cholesky_float64_flops_per_second"],
    }
    # With one alpha the primal computes the features once (one pass gives the
    # Gram matrix and the right-hand side). The O(p^2) passes (symmetrise,
    # centre, triangular solves) are left out: they are well under 1% at n >> p.
    result = {"seconds": sum(parts.values()), "parts": parts}
    if matmul32 is not None:
        result["lower_bound_seconds"] = (
            parts["features"]
            + sizes["gram_flops"] / matmul32
            + sizes["cholesky_flops"] / matmul64
        )
    return result


# -- attention learner and Potts ---------------------------------------------------


def mha_per_iteration(device, n, k, d, m, max_iter):
    from sklearn.exceptions import ConvergenceWarning

    from sklearn_attn import MultiHeadAttentionLearner
    from sklearn_attn.datasets import make_attention_layer_regression

    X, Y, *_ = make_attention_layer_regression(
        n_samples=n, n_tokens=k, token_dim=d, n_heads=m, random_state=0
    )
    kwargs = dict(n_init=1, max_iter=max_iter, tol=1e-30, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        MultiHeadAttentionLearner(m, device=device, **{**kwargs, "max_iter": 1}).fit(
            X[:500], Y[:500]
        )
        start = time.perf_counter()
        model = MultiHeadAttentionLearner(m, device=device, **kwargs).fit(X, Y)
        seconds = time.perf_counter() - start
    return {
        "n": n,
        "k": k,
        "d": d,
        "m": m,
        "n_iter": model.n_iter_,
        "seconds": seconds,
        "seconds_per_iteration": seconds / max(model.n_iter_, 1),
    }


def potts_per_iteration(device, parametrization, max_iter, n_heads=8):
    from sklearn.exceptions import ConvergenceWarning

    from sklearn_attn import PottsPseudoLikelihood
    from sklearn_attn.datasets import load_pf00014
    from sklearn_attn.potts import encode_sequences, sequence_weights

    data = load_pf00014()
    codes = encode_sequences(data.sequences)
    # Weights computed once, outside the timing: the fit's time is then its
    # iterations (plus a one-hot encoding and start-up of well under one).
    weights = sequence_weights(codes, identity_threshold=0.8)
    kwargs = dict(alpha_fields=0.01, tol=0.0, random_state=0)
    if parametrization == "full":
        kwargs["alpha_couplings"] = 16.0
    else:
        kwargs["n_heads"] = n_heads
    with warnings.catch_warnings():
        # tol=0: fixed numbers of iterations by design, never "converged".
        warnings.simplefilter("ignore", ConvergenceWarning)
        PottsPseudoLikelihood(parametrization, max_iter=1, device=device, **kwargs).fit(
            codes[:200]
        )
        model = PottsPseudoLikelihood(
            parametrization, max_iter=max_iter, device=device, **kwargs
        )
        start = time.perf_counter()
        model.fit(codes, sample_weight=weights)
        seconds = time.perf_counter() - start
    return {
        "parametrization": parametrization,
        "n_heads": None if parametrization == "full" else n_heads,
        "n_sequences": int(codes.shape[0]),
        "n_sites": int(codes.shape[1]),
        "n_iter": model.n_iter_,
        "seconds": seconds,
        "seconds_per_iteration": seconds / max(model.n_iter_, 1),
        "objective": model.objective_,
    }


# -- main ------------------------------------------------------------------------------


class _Report(dict):
    """The JSON report, written again after every stage: a stage that fails (or
    a time limit that ends the run) loses only itself, and its traceback is
    recorded under ``errors``."""

    def __init__(self, output, **fields):
        super().__init__(fields)
        self.output = output
        self.save()

    def stage(self, name, func):
        print(f"[bench_gpu] {name} ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            self[name] = func()
        except Exception:  # noqa: BLE001 - recorded, and the next stage runs
            self.setdefault("errors", {})[name] = traceback.format_exc()
            print(self["errors"][name], file=sys.stderr, flush=True)
        print(
            f"[bench_gpu] {name} done in {time.perf_counter() - start:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        self.save()
        return self.get(name)

    def save(self):
        if self.output is not None:
            self.output.parent.mkdir(parents=True, exist_ok=True)
            self.output.write_text(json.dumps(self, indent=2, default=float) + "\n")


def run_cpu(sizes, quick, output):
    report = _Report(output, device="cpu", machine=machine_info(), quick=quick)
    report["sizes"] = sizes
    matmul32 = report.stage(
        "float32_matmul_flops_per_second", lambda: _matmul_rate("cpu", np.float32, 4096)
    )
    matmul64 = report.stage(
        "float64_matmul_flops_per_second", lambda: _matmul_rate("cpu", np.float64, 4096)
    )
    report.stage("mha", lambda: mha_per_iteration("cpu", **sizes["mha"]))
    report.stage(
        "potts",
        lambda: [
            potts_per_iteration("cpu", p, sizes["potts_max_iter"])
            for p in ("full", "factored")
        ],
    )
    rfa = sizes["rfa"]
    size = 2048 if quick else 8192
    rates = report.stage(
        "rfa_cpu_rates",
        lambda: rfa_cpu_rates(rfa["n_keys"], rfa["d"], rfa["heads"], size, 1024, size),
    )
    target = _rfa_sizes(**rfa)
    report.stage(
        "rfa_estimate",
        lambda: {**target, **rfa_cpu_estimate(rates, target, matmul32, matmul64)},
    )

    def model_check():
        # The model against a complete fit that fits in this machine's memory.
        check = rfa_fit("cpu", **sizes["rfa_check"])
        predicted = rfa_cpu_estimate(rates, check)
        check["predicted_seconds"] = predicted["seconds"]
        check["prediction_error"] = predicted["seconds"] / check["seconds"] - 1.0
        return check

    report.stage("rfa_model_check", model_check)
    return report


def run_cuda(sizes, quick, cpu_reference, output):  # pragma: no cover - needs a GPU
    report = _Report(output, device="cuda", machine=machine_info(), quick=quick)
    report["sizes"] = sizes
    clock = _Clock("cuda")
    report.stage("gpu", gpu_info)
    size = 4096 if quick else 8192
    rate32 = report.stage(
        "float32_matmul_flops_per_second",
        lambda: _matmul_rate("cuda", np.float32, size),
    )
    report.stage(
        "float64_matmul_flops_per_second",
        lambda: _matmul_rate("cuda", np.float64, size),
    )
    # The cheaper stages first: the large fit is the one most likely to fail.
    report.stage("mha", lambda: mha_per_iteration("cuda", **sizes["mha"]))
    clock.release()
    report.stage(
        "potts",
        lambda: [
            potts_per_iteration("cuda", p, sizes["potts_max_iter"])
            for p in ("full", "factored")
        ],
    )
    clock.release()

    def fit():
        result = rfa_fit("cuda", **sizes["rfa"])
        useful = result["gram_flops"] + result["feature_flops"]
        result["useful_flops_per_second"] = useful / result["seconds"]
        result["fraction_of_float32_matmul_rate"] = (
            result["useful_flops_per_second"] / rate32 if rate32 else None
        )
        return result

    report.stage("rfa", fit)
    clock.release()
    if cpu_reference is not None:
        report.stage("speedups", lambda: _speedups(report, cpu_reference))
    return report


def _speedups(report, cpu):  # pragma: no cover - needs a GPU
    out = {"cpu_reference": str(cpu["_path"])}
    if "rfa" in report:
        seconds = report["rfa"]["seconds"]
        out["rfa_vs_cpu_estimate"] = cpu["rfa_estimate"]["seconds"] / seconds
        out["rfa_vs_cpu_lower_bound"] = (
            cpu["rfa_estimate"]["lower_bound_seconds"] / seconds
        )
    if "mha" in report:
        out["mha_per_iteration"] = (
            cpu["mha"]["seconds_per_iteration"] / report["mha"]["seconds_per_iteration"]
        )
    if "potts" in report:
        out["potts_per_iteration"] = {
            gpu["parametrization"]: c["seconds_per_iteration"]
            / gpu["seconds_per_iteration"]
            for c, gpu in zip(cpu["potts"], report["potts"], strict=True)
        }
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], required=True)
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke run")
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--cpu-reference", type=Path, default=CPU_REFERENCE)
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.device == "cpu":
        output = args.output or (None if args.quick else CPU_REFERENCE)
        report = run_cpu(sizes, args.quick, output)
    else:
        reference = None
        if args.cpu_reference.exists():
            reference = json.loads(args.cpu_reference.read_text())
            reference["_path"] = args.cpu_reference
            if reference.get("quick") != args.quick:
                reference = None  # sizes differ: no ratio
        report = run_cuda(sizes, args.quick, reference, args.output)
    print(json.dumps(report, indent=2, default=float))
    return 1 if "errors" in report else 0


if __name__ == "__main__":
    sys.exit(main())
