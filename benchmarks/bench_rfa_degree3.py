"""Degree-3 key averages with and without the constant in the attention scores.

At ``d = N = 4`` and ``n = 4000`` training samples (2000 test samples), on the
key-averaged targets ``mean_i t_i^3`` (``make_token_regression(degree=3)``,
whose variance is 80% linear in ``t``) and ``mean_i Q_3(t_i)`` (exactly degree
3, ``polynomial="gegenbauer"``), with ``t_i = <x_0, x_i> / sqrt(d)``:

* ``rfa_kernel`` (infinite width) by kernel ridge regression, its penalty
  ``tau 10^k`` (``k = -10 .. 0``, ``tau`` the mean diagonal of the centred
  training Gram matrix) chosen on a validation fifth of the training set and
  refitted on all of it ("tuned"); the best penalty of the grid on the test
  set is recorded beside it ("oracle", not a fair estimate);
* ``RandomFeatureAttentionRegressor(n_heads=1000)`` with its defaults
  (``alpha="auto"``);

each with the constant in the scores (``qk_bias=True``, the default) and
without it. Every seed draws new data and new random weights; errors are test
MSE over the test targets' variance.

Usage::

    python benchmarks/bench_rfa_degree3.py --n-jobs 2

Results go to ``benchmarks/results/rfa_degree3.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import machine_info  # noqa: E402

from sklearn_attn import RandomFeatureAttentionRegressor, rfa_kernel  # noqa: E402
from sklearn_attn.datasets import make_token_regression  # noqa: E402

TARGETS = {
    "correlation-3-power": {"degree": 3, "polynomial": "power"},
    "correlation-3": {"degree": 3, "polynomial": "gegenbauer"},
}
SETTING = {"n_train": 4000, "n_test": 2000, "token_dim": 4, "n_keys": 4}
PENALTIES = 10.0 ** np.arange(-10, 1)


def _kernel_ridge_errors(K, K_test, y, y_test, fit_rows, check_rows):
    """Test errors of centred kernel ridge at each penalty of the grid, fitted
    on ``fit_rows`` and (for the validation choice) scored on ``check_rows``."""
    from sklearn.kernel_ridge import KernelRidge

    def errors(train, rows_test, K_eval, y_eval):
        K_train = K[np.ix_(train, train)]
        # Centring in feature space: an unpenalised intercept.
        mean_row = K_train.mean(axis=0)
        centred = K_train - mean_row[None, :] - mean_row[:, None] + mean_row.mean()
        tau = float(np.trace(centred)) / len(train)
        K_eval = K_eval[np.ix_(rows_test, train)] if rows_test is not None else K_eval
        K_eval = K_eval - mean_row[None, :] - K_eval.mean(axis=1, keepdims=True)
        K_eval = K_eval + mean_row.mean()
        out = []
        for penalty in PENALTIES:
            model = KernelRidge(alpha=penalty * tau, kernel="precomputed")
            model.fit(centred, y[train] - y[train].mean())
            pred = model.predict(K_eval) + y[train].mean()
            out.append(float(np.mean((pred - y_eval) ** 2) / np.var(y_eval)))
        return np.array(out)

    validation = errors(fit_rows, check_rows, K, y[check_rows])
    everything = np.arange(len(y))
    test = errors(everything, None, K_test[:, everything], y_test)
    best = int(np.argmin(validation))
    return {
        "tuned": float(test[best]),
        "tuned_penalty_over_tau": float(PENALTIES[best]),
        "oracle": float(test.min()),
        "oracle_penalty_over_tau": float(PENALTIES[int(np.argmin(test))]),
    }


def one_seed(target, seed):
    """Every model on one draw of the data (and of the random weights)."""
    spec = TARGETS[target]
    common = dict(n_keys=SETTING["n_keys"], token_dim=SETTING["token_dim"], **spec)
    rng = np.random.SeedSequence([seed, 3]).generate_state(3)
    X, y = make_token_regression(SETTING["n_train"], random_state=int(rng[0]), **common)
    X_test, y_test = make_token_regression(
        SETTING["n_test"], random_state=int(rng[1]), **common
    )
    order = np.random.default_rng(int(rng[2])).permutation(len(y))
    fit_rows, check_rows = order[len(y) // 5 :], order[: len(y) // 5]
    rows = []
    with threadpool_limits(1):
        for qk_bias in (True, False):
            start = time.perf_counter()
            K = rfa_kernel(X, qk_bias=qk_bias)
            K_test = rfa_kernel(X_test, X, qk_bias=qk_bias)
            result = _kernel_ridge_errors(K, K_test, y, y_test, fit_rows, check_rows)
            rows.append(
                {
                    "target": target,
                    "model": "rfa_kernel",
                    "qk_bias": qk_bias,
                    "seed": seed,
                    "error": result["tuned"],
                    **result,
                    "seconds": time.perf_counter() - start,
                }
            )
            start = time.perf_counter()
            model = RandomFeatureAttentionRegressor(
                1000, qk_bias=qk_bias, random_state=int(rng[2])
            ).fit(X, y)
            error = np.mean((model.predict(X_test) - y_test) ** 2) / np.var(y_test)
            rows.append(
                {
                    "target": target,
                    "model": "RandomFeatureAttentionRegressor(1000)",
                    "qk_bias": qk_bias,
                    "seed": seed,
                    "error": float(error),
                    "alpha_": float(model.alpha_),
                    "seconds": time.perf_counter() - start,
                }
            )
    return rows


def summarize(rows):
    out = []
    keys = dict.fromkeys((r["target"], r["model"], r["qk_bias"]) for r in rows)
    for target, model, qk_bias in keys:
        errors = [
            r["error"]
            for r in rows
            if (r["target"], r["model"], r["qk_bias"]) == (target, model, qk_bias)
        ]
        out.append(
            {
                "target": target,
                "model": model,
                "qk_bias": qk_bias,
                "error_mean": float(np.mean(errors)),
                "error_std": float(np.std(errors)),
                "error_max": float(np.max(errors)),
                "n_seeds": len(errors),
            }
        )
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--n-jobs", type=int, default=None, help="joblib workers")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "rfa_degree3.json"
    )
    args = parser.parse_args(argv)
    load_before = machine_info()["load_average_1_5_15"]
    start = time.perf_counter()
    per_seed = Parallel(n_jobs=args.n_jobs)(
        delayed(one_seed)(target, seed)
        for target in TARGETS
        for seed in range(args.seeds)
    )
    rows = [row for part in per_seed for row in part]
    results = {
        "setting": SETTING,
        "penalties_over_tau": PENALTIES.tolist(),
        "n_jobs": args.n_jobs,
        "total_seconds": time.perf_counter() - start,
        "load_average_before": load_before,
        "machine": machine_info(),
        "summary": summarize(rows),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    for row in results["summary"]:
        print(
            f"{row['target']:20s} {row['model']:38s} qk_bias={row['qk_bias']!s:5s} "
            f"{row['error_mean']:.3f} ± {row['error_std']:.3f} "
            f"(max {row['error_max']:.3f}, {row['n_seeds']} seeds)"
        )
    print(f"total {results['total_seconds']:.0f} s; written to {args.out}")


if __name__ == "__main__":
    main()
