"""Accuracy and speed of MultiHeadAttentionLearner, as same-run measurements.

(a) Planted recovery with DEFAULT settings: m = 2 heads, d = 8, k = 8, Boolean
    inputs, n = 2000 noiseless training samples, a fresh test set of 4000. Reports
    the test relative MSE ``||F_hat - F||^2 / ||F||^2`` (target at most 1e-6), the
    wall time of ``fit`` (target at most 60 s on 2 cores), how many of the
    ``n_init`` starts succeeded (training relative MSE at most 1e-6) and the
    parameter errors after Hungarian matching; on several planted instances.

(b) One loss-and-gradient evaluation at n = 4096, k = 16, d = 16, m = 4 against
    its useful floating-point work at the float64 matrix-multiply rate measured
    in the same run (target at most 3x). The useful work is the nine matrix
    products of the forward and backward pass, ``2 n k m d (5 d + 4 k)`` flops
    (see ``useful_flops``); element-wise work is not counted. GEMM and evaluation
    timings are interleaved so that both see the same machine load. For context
    it also times the direct ``einsum`` chain of the paper notes (on a subsample,
    scaled linearly) and the evaluation with BLAS left multi-threaded and no
    chunk threads, standalone and inside ``scipy.optimize.minimize``, where the
    NumPy and SciPy OpenBLAS pools were seen to collide.

Results are written as JSON with the machine, versions and sizes.

Usage::

    python benchmarks/bench_attention.py            # the issue's sizes
    python benchmarks/bench_attention.py --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import machine_info  # noqa: E402

from sklearn_attn._backend import cpu_workers  # noqa: E402
from sklearn_attn.attention import MultiHeadAttentionLearner, match_heads  # noqa: E402
from sklearn_attn.attention._layer import (  # noqa: E402
    loss_and_gradient,
    useful_flops,
)
from sklearn_attn.datasets import make_attention_layer_regression  # noqa: E402


def _timed(func):
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


# -- (a) planted recovery -------------------------------------------------------------


def planted(seeds, n_train, n_test, m, d, k):
    rows = []
    for seed in seeds:
        X, Y, layer = make_attention_layer_regression(
            n_train, n_heads=m, n_tokens=k, token_dim=d, random_state=seed
        )
        X_test, Y_test, _ = make_attention_layer_regression(
            n_test,
            n_heads=m,
            n_tokens=k,
            token_dim=d,
            layer=layer,
            random_state=seed + 1000,
        )
        # Starts from another stream than the planted layer's: with the same
        # seed the first start would be a scaled copy of the answer.
        model = MultiHeadAttentionLearner(n_heads=m, random_state=seed + 2000)
        seconds = _timed(lambda: model.fit(X, Y))  # noqa: B023
        test_rel = float(
            np.sum((model.predict(X_test) - Y_test) ** 2) / np.sum(Y_test**2)
        )
        # Training relative MSE of each start: 2 * objective / mean ||Y_n||^2
        # (alpha = 0, so the objective is the data term).
        train_rel = 2 * model.init_losses_ / np.mean(np.sum(Y**2, axis=(1, 2)))
        matched = match_heads(model.theta_, model.values_, layer.theta, layer.values)
        rows.append(
            {
                "seed": seed,
                "fit_seconds": seconds,
                "test_relative_mse": test_rel,
                "starts": int(model.n_init),
                "starts_succeeded": int(np.sum(train_rel <= 1e-6)),
                "train_relative_mse_per_start": [float(v) for v in train_rel],
                "n_iter_kept_start": int(model.n_iter_),
                "theta_relative_error": matched.theta_error,
                "values_relative_error": matched.values_error,
            }
        )
        print(
            f"(a) seed {seed}: test rel MSE {test_rel:.2e}, "
            f"{rows[-1]['starts_succeeded']}"
            f"/{model.n_init} starts succeeded, fit {seconds:.2f} s",
            file=sys.stderr,
        )
    return rows


# -- (b) loss and gradient ------------------------------------------------------


def einsum_loss_and_gradient(X, Y, theta, values):
    """The direct einsum chain of the paper notes (section C.1): correct but slow."""
    N = X.shape[0]
    A = np.einsum("nad,mde,nbe->nmab", X, theta, X)
    S = np.exp(A - A.max(-1, keepdims=True))
    S /= S.sum(-1, keepdims=True)
    P = np.einsum("nmab,nbd->nmad", S, X)
    F = np.einsum("nmad,mde->nae", P, values)
    R = (F - Y) / N
    loss = 0.5 * N * np.sum(R**2)
    grad_values = np.einsum("nmad,nae->mde", P, R)
    G = np.einsum("nae,nmbe->nmab", R, np.einsum("nbd,mde->nmbe", X, values))
    dA = S * (G - (G * S).sum(-1, keepdims=True))
    grad_theta = np.einsum("nad,nmab,nbe->mde", X, dA, X)
    return loss, grad_theta, grad_values


def loss_gradient_speed(n, k, d, m, repeats, einsum_samples, lbfgs_iters):
    from threadpoolctl import threadpool_info

    rng = np.random.default_rng(0)
    X = rng.choice([-1.0, 1.0], size=(n, k, d))
    Y = rng.normal(size=(n, k, d))
    theta = rng.normal(size=(m, d, d)) / d
    values = rng.normal(size=(m, d, d)) / np.sqrt(d)
    flops = useful_flops(n, k, d, m)
    size = 2048
    a, b = rng.normal(size=(size, size)), rng.normal(size=(size, size))
    a @ b  # warm up the BLAS threads

    gemm_times, ours_times, block_ratios = [], [], []
    with cpu_workers() as workers:
        n_threads = 1 if workers is None else workers.n_threads
    for _ in range(repeats):
        # Alternating blocks, so that the GEMM reference and the evaluation see
        # the same machine load. The first evaluation after a GEMM block is not
        # timed: NumPy's OpenBLAS threads keep spinning for a while after a
        # multi-threaded GEMM and slow it down (up to ~30% measured), which a
        # fit, running only evaluations, never sees.
        gemm = [_timed(lambda: a @ b) for _ in range(2)]
        with cpu_workers() as workers:
            loss_and_gradient(X, Y, theta, values, executor=workers)
            evals = [
                _timed(lambda: loss_and_gradient(X, Y, theta, values, executor=workers))  # noqa: B023
                for _ in range(3)
            ]
        gemm_times.extend(gemm)
        ours_times.extend(evals)
        # Ratio within one block: robust to load that changes during the run.
        block_ratios.append(
            np.median(evals) / (flops * np.median(gemm) / (2 * size**3))
        )
    # The GEMM reference runs outside cpu_workers, with all BLAS threads.
    rate = 2 * size**3 / float(np.median(gemm_times))
    ideal = flops / rate
    ours = float(np.median(ours_times))

    plain_times = [
        _timed(lambda: loss_and_gradient(X, Y, theta, values))
        for _ in range(max(3, repeats // 2))
    ]
    sub = slice(0, einsum_samples)
    einsum_seconds = (
        float(
            np.median(
                [
                    _timed(
                        lambda: einsum_loss_and_gradient(X[sub], Y[sub], theta, values)
                    )
                    for _ in range(2)
                ]
            )
        )
        * n
        / einsum_samples
    )
    ref = einsum_loss_and_gradient(X[sub], Y[sub], theta, values)
    got = loss_and_gradient(
        np.ascontiguousarray(X[sub]), np.ascontiguousarray(Y[sub]), theta, values
    )
    agree = all(
        np.allclose(r, g, rtol=1e-10, atol=1e-14) for r, g in zip(ref, got, strict=True)
    )
    result = {
        "sizes": {"n_samples": n, "n_tokens": k, "token_dim": d, "n_heads": m},
        "useful_flops": flops,
        "useful_flops_formula": "2 n k m d (5 d + 4 k): X Theta, P W, P^T R, R W^T, "
        "X^T D (2 n k m d^2 each); scores, S X, dL/dS, dA X "
        "(2 n m k^2 d each)",
        "matmul_flops_per_s": rate,
        "matmul_reference": f"float64 {size}x{size} @ {size}x{size}, "
        f"median of {2 * repeats}, default BLAS threads",
        "evaluations_timed": len(ours_times),
        "ideal_seconds_at_matmul_rate": ideal,
        "chunk_threads": n_threads,
        "seconds_median": ours,
        "seconds_all": [float(t) for t in ours_times],
        "ratio_to_ideal": ours / ideal,
        "ratio_per_block_median": float(np.median(block_ratios)),
        "ratio_per_block_all": [float(r) for r in block_ratios],
        "gemm_seconds_all": [float(t) for t in gemm_times],
        "target_ratio_at_most": 3.0,
        "blas_threads_no_chunk_threads_seconds_median": float(np.median(plain_times)),
        "einsum_seconds_scaled_from_subsample": einsum_seconds,
        "einsum_subsample": einsum_samples,
        "einsum_ratio_to_ideal": einsum_seconds / ideal,
        "einsum_matches": bool(agree),
        "blas_pools": [(i["filepath"], i["num_threads"]) for i in threadpool_info()],
    }
    print(
        f"(b) matmul {rate / 1e9:.1f} GFLOP/s; loss+grad {ours * 1e3:.1f} ms = "
        f"{ours / ideal:.2f} x ideal ({ideal * 1e3:.1f} ms; per block "
        f"{np.median(block_ratios):.2f} x); einsum "
        f"{einsum_seconds / ideal:.0f} x",
        file=sys.stderr,
    )
    result["inside_lbfgs"] = _inside_lbfgs(X, Y, theta, values, lbfgs_iters)
    return result


def _inside_lbfgs(X, Y, theta, values, iterations):
    """Per-evaluation time inside scipy.optimize.minimize, with and without limits."""
    import scipy.optimize

    m, d, _ = theta.shape
    w0 = np.concatenate([theta.ravel(), values.ravel()])
    out = {}
    for name in ("chunk_threads_blas_limited", "blas_threads_unlimited"):
        times = []

        def objective(w, workers):
            start = time.perf_counter()
            loss, g_theta, g_values = loss_and_gradient(
                X,
                Y,
                w[: m * d * d].reshape(m, d, d),
                w[m * d * d :].reshape(m, d, d),
                executor=workers,
            )
            times.append(time.perf_counter() - start)  # noqa: B023
            return loss, np.concatenate([g_theta.ravel(), g_values.ravel()])

        def run(workers):
            scipy.optimize.minimize(
                objective,
                w0,
                args=(workers,),
                jac=True,
                method="L-BFGS-B",
                options={"maxiter": iterations, "gtol": 0},
            )

        if name == "chunk_threads_blas_limited":
            with cpu_workers() as workers:
                run(workers)
        else:
            run(None)
        out[name] = {
            "evaluations": len(times),
            "seconds_per_evaluation_median": float(np.median(times)),
        }
        print(
            f"(b) inside L-BFGS, {name}: {np.median(times) * 1e3:.1f} ms per "
            "evaluation",
            file=sys.stderr,
        )
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a smoke run")
    parser.add_argument("--seeds", type=int, default=3, help="planted instances in (a)")
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "attention.json")
    )
    args = parser.parse_args(argv)
    planted_sizes = {"n_train": 2000, "n_test": 4000, "m": 2, "d": 8, "k": 8}
    speed_sizes = {"n": 4096, "k": 16, "d": 16, "m": 4}
    einsum_samples, lbfgs_iters = 256, 15
    if args.quick:
        planted_sizes.update(n_train=300, n_test=500, d=4, k=4)
        speed_sizes.update(n=256, k=8, d=8, m=2)
        args.seeds, args.repeats, einsum_samples, lbfgs_iters = 1, 3, 32, 3

    report = {
        "benchmark": "attention",
        "machine": machine_info(),
        "defaults": {
            k: v
            for k, v in MultiHeadAttentionLearner().get_params().items()
            if k in ("n_init", "max_iter", "tol", "init_scale", "solver", "alpha")
        },
    }
    rows = planted(
        range(args.seeds),
        planted_sizes["n_train"],
        planted_sizes["n_test"],
        planted_sizes["m"],
        planted_sizes["d"],
        planted_sizes["k"],
    )
    report["planted"] = {
        "sizes": {
            **planted_sizes,
            "inputs": "boolean",
            "noise": 0.0,
            "theta_norm": 2.0,
            "values_std": "1/sqrt(d)",
        },
        "settings": (
            "MultiHeadAttentionLearner defaults (n_heads=m, random_state=seed + 2000)"
        ),
        "success_rule": "training relative MSE of a start <= 1e-6",
        "targets": {"test_relative_mse_at_most": 1e-6, "fit_seconds_at_most": 60.0},
        "instances": rows,
        "worst_test_relative_mse": max(r["test_relative_mse"] for r in rows),
        "slowest_fit_seconds": max(r["fit_seconds"] for r in rows),
    }
    report["loss_and_gradient"] = loss_gradient_speed(
        speed_sizes["n"],
        speed_sizes["k"],
        speed_sizes["d"],
        speed_sizes["m"],
        args.repeats,
        einsum_samples,
        lbfgs_iters,
    )
    report["machine"]["load_average_after"] = list(os.getloadavg())
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    summary = {
        "planted_worst_test_relative_mse": report["planted"]["worst_test_relative_mse"],
        "planted_slowest_fit_seconds": report["planted"]["slowest_fit_seconds"],
        "planted_starts_succeeded": [r["starts_succeeded"] for r in rows],
        "loss_gradient_ratio_to_ideal": report["loss_and_gradient"]["ratio_to_ideal"],
        "loss_gradient_ratio_per_block_median": report["loss_and_gradient"][
            "ratio_per_block_median"
        ],
    }
    print(json.dumps(summary, indent=2))
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
