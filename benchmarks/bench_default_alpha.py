"""Which default ridge penalty works for the random-feature regressors?

For each estimator (``RandomFeatureAttentionRegressor``, ``BiasedRFA``,
``RFMLP`` with the same number of trained weights ``M (d + 1)``), each data
generator of the package, each training size ``n`` and width ``M`` (heads) and
each seed, the explicit features of the matching transformer
(``AttentionRandomFeatures`` / ``MLPRandomFeatures``, the same random weights as
the estimator for the same ``random_state``) are centred and the whole ridge
path is computed from one eigendecomposition (of the ``p x p`` covariance when
``n > p``, of the ``n x n`` Gram matrix otherwise). On it:

* ``best``: the test error of the best alpha of a fine log grid,
  ``alpha = tau * 10^k`` for k in -8, -7.75, ..., 4 (49 values, a factor 1.78
  apart), with the feature scale ``tau = trace(Phi_c^T Phi_c) / n`` (the mean
  squared norm of the centred features: the average diagonal of the centred
  kernel);
* candidates, each as the ratio of its test error to ``best``:

  - ``fixed_1e-3``: today's default, ``alpha = 1e-3`` (absolute);
  - ``scaled``: one penalty ``alpha = c * tau`` (``--c``);
  - ``loo``: the small grid ``tau * SMALL_GRID`` selected by exact leave-one-out;
  - ``gcv``: the same grid selected by generalized cross-validation,
    ``GCV = (RSS / n) / (1 - df / n)^2``, ``df = 1 + sum_k s_k / (s_k + alpha)``
    (from sufficient statistics: it would work with a one-pass ``partial_fit``);
  - ``default`` (``--estimator-default``): the estimator constructed without
    ``alpha`` (its own default), fitted and scored as a user would.

The test error is the mean squared error on a held-out set (``--n-test``
samples, fixed per generator and seed), divided by the test targets' variance.
Ratios are paired (same test set), and each comes with its delta-method
standard error, so a ratio of 1.10 can be told from test-set noise.

Generators (their default noise, 0, and default targets unless noted):

* ``token``: ``make_token_regression()`` defaults, target ``"correlation"``,
  degree 1, ``d = 8``, ``N = 8`` keys;
* ``token_value``: ``make_token_regression(target="value", n_keys=16,
  token_dim=4)``, the RFA reproduction's part A (``sklearn_attn.experiments``);
* ``token_gamma``: ``make_token_regression(target="gamma", gamma=2)``, part B
  (``d = 8``, ``N = 8``);
* ``attention_layer``: ``make_attention_layer_regression()`` defaults (2 planted
  heads, 8 Boolean tokens of ``d = 8``); the target is the layer's output at the
  first token (the query), ``Y[:, 0, :]``, 8 outputs.

Usage::

    python benchmarks/bench_default_alpha.py                       # every cell
    python benchmarks/bench_default_alpha.py --quick               # a smoke run
    python benchmarks/bench_default_alpha.py --estimator-default   # + Estimator()

The run of the results file (about 45 minutes on 2 shared cores)::

    python benchmarks/bench_default_alpha.py --n-test 2000 --heavy-size 2000 \
        --heavy-cost 1e10 --heavy-seeds 1 --max-size 5000

The cells with ``min(n, p) > --heavy-size`` or ``n p min(n, p) > --heavy-cost``
(the flops of the Gram or covariance matrix) run only ``--heavy-seeds`` seeds;
those with ``min(n, p) > --max-size`` are skipped (n = 10,000 with 2,000 heads
needs a 10,000 x 10,000 eigendecomposition per fit).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import machine_info  # noqa: E402

# The fine grid, in units of the feature scale tau: 0.25 decades apart.
GRID_EXPONENTS = np.linspace(-8.0, 4.0, 49)
# The small grid of the selected candidates (a subset of the fine grid).
SMALL_GRID_EXPONENTS = np.arange(-6.0, 1.5, 0.5)
FIXED_ALPHA = 1e-3
THRESHOLD = 1.10

ESTIMATORS = ("RFA", "BiasedRFA", "RFMLP")
GENERATORS = ("token", "token_value", "token_gamma", "attention_layer")


# -- data -----------------------------------------------------------------------------


def _seed(*keys):
    return int(np.random.SeedSequence(list(keys)).generate_state(1)[0])


def make_data(generator, n_train, n_test, seed):
    """Train and test sets; the test set depends on (generator, seed) only."""
    from sklearn_attn.datasets import (
        make_attention_layer_regression,
        make_token_regression,
    )

    g = GENERATORS.index(generator)
    if generator == "attention_layer":
        X_test, Y_test, layer = make_attention_layer_regression(
            n_test, random_state=_seed(g, seed, 0)
        )
        X, Y, _ = make_attention_layer_regression(
            n_train, layer=layer, random_state=_seed(g, seed, 1, n_train)
        )
        return X, Y[:, 0, :], X_test, Y_test[:, 0, :]
    kwargs = {
        "token": {},
        "token_value": {"target": "value", "n_keys": 16, "token_dim": 4},
        "token_gamma": {"target": "gamma", "gamma": 2.0},
    }[generator]
    X_test, y_test = make_token_regression(
        n_test, random_state=_seed(g, seed, 0), **kwargs
    )
    X, y = make_token_regression(
        n_train, random_state=_seed(g, seed, 1, n_train), **kwargs
    )
    return X, y, X_test, y_test


def make_transformer(estimator, width, token_dim, random_state):
    from sklearn_attn import AttentionRandomFeatures, MLPRandomFeatures

    if estimator == "RFMLP":
        return MLPRandomFeatures(width * (token_dim + 1), random_state=random_state)
    qk_mean = "identity" if estimator == "BiasedRFA" else "zero"
    return AttentionRandomFeatures(width, qk_mean=qk_mean, random_state=random_state)


def make_estimator(estimator, width, token_dim, random_state):
    """The estimator with its own default alpha (none given)."""
    from sklearn_attn import RFMLP, BiasedRFA, RandomFeatureAttentionRegressor

    if estimator == "RFMLP":
        return RFMLP(width * (token_dim + 1), random_state=random_state)
    cls = BiasedRFA if estimator == "BiasedRFA" else RandomFeatureAttentionRegressor
    return cls(width, random_state=random_state)


# -- the ridge path from one eigendecomposition ---------------------------------


def ridge_path(F, y, F_test, alphas):
    """Test predictions, exact leave-one-out and GCV errors for every alpha.

    Ridge with an unpenalised intercept on the features ``F`` (overwritten:
    centred in place). Returns ``(pred, loo, gcv, tau, trace_over_p, solver)``
    with ``pred`` of shape (n_test, n_alphas, n_targets) and ``loo``, ``gcv``
    of shape (n_alphas,) (mean over targets).
    """
    n, p = F.shape
    mean = F.mean(axis=0)
    F -= mean
    y_mean = y.mean(axis=0)
    yc = y - y_mean
    a = np.asarray(alphas)
    if n <= p:
        solver = "dual"
        gram = F @ F.T
        trace = float(np.trace(gram))
        s, U = np.linalg.eigh(gram)
        del gram
        s = np.maximum(s, 0.0)
        Uy = U.T @ yc  # (n, q)
        shrink = a[None, :] / (s[:, None] + a[None, :])  # (n, A): alpha/(s+alpha)
        # Residuals of the fit: U diag(alpha / (s + alpha)) U^T y_c.
        resid = (U @ (shrink[:, :, None] * Uy[:, None, :]).reshape(n, -1)).reshape(
            n, a.size, -1
        )
        # 1 - leverage: sum_k U_ik^2 alpha / (s_k + alpha) minus the share 1/n of
        # the constant eigenvector (eigenvalue 0), which the intercept fits.
        one_minus_h = (U * U) @ shrink - 1.0 / n
        # Residual degrees of freedom n - df, df = 1 + sum s / (s + alpha).
        resid_df = shrink.sum(axis=0) - 1.0
        inv = 1.0 / (s[:, None] + a[None, :])
        dual = U @ (inv[:, :, None] * Uy[:, None, :]).reshape(n, -1)
        del U
        coef = (F.T @ dual).reshape(p, a.size, -1)
    else:
        solver = "primal"
        cov = F.T @ F
        trace = float(np.trace(cov))
        s, V = np.linalg.eigh(cov)
        del cov
        s = np.maximum(s, 0.0)
        g = V.T @ (F.T @ yc)  # (p, q)
        inv = 1.0 / (s[:, None] + a[None, :])  # (p, A)
        # Explicit products: a three-operand einsum is far slower here.
        coef = (V @ (inv[:, :, None] * g[:, None, :]).reshape(p, -1)).reshape(
            p, a.size, -1
        )
        Z = F @ V
        del V
        resid = yc[:, None, :] - (F @ coef.reshape(p, -1)).reshape(n, a.size, -1)
        one_minus_h = 1.0 - 1.0 / n - (Z * Z) @ inv
        del Z
        resid_df = (n - 1.0) - (s[:, None] * inv).sum(axis=0)
    loo = ((resid / one_minus_h[:, :, None]) ** 2).mean(axis=(0, 2))
    rss = (resid**2).mean(axis=(0, 2)) * n
    gcv = (rss / n) / (resid_df / n) ** 2
    F_test = F_test - mean
    pred = y_mean + (F_test @ coef.reshape(p, -1)).reshape(F_test.shape[0], a.size, -1)
    return pred, loo, gcv, trace / n, trace / p, solver


def _squared_errors(pred, y_test):
    """Per-sample squared error, averaged over targets: (n_test, ...)."""
    y = y_test.reshape(y_test.shape[0], *([1] * (pred.ndim - 2)), -1)
    return ((pred - y) ** 2).mean(axis=-1)


def _ratio(err_candidate, err_best):
    """Paired ratio of mean squared errors and its delta-method standard error."""
    m_c, m_b = err_candidate.mean(), err_best.mean()
    ratio = m_c / m_b
    se = np.std(err_candidate - ratio * err_best) / (np.sqrt(err_best.size) * m_b)
    return float(ratio), float(se)


def run_cell(estimator, generator, n, width, seed, n_test, c, with_default):
    X, y, X_test, y_test = make_data(generator, n, n_test, seed)
    y2 = y.reshape(n, -1)
    y_test2 = y_test.reshape(n_test, -1)
    d = X.shape[2]
    rs = _seed(ESTIMATORS.index(estimator), GENERATORS.index(generator), n, width, seed)
    start = time.perf_counter()
    transformer = make_transformer(estimator, width, d, rs).fit(X)
    F = transformer.transform(X)
    F_test = transformer.transform(X_test)
    p = F.shape[1]
    # The feature scale: the mean squared norm of the centred features.
    mean = F.mean(axis=0)
    tau = float(np.einsum("ij,ij->", F, F) / n - mean @ mean)
    grid = tau * 10.0**GRID_EXPONENTS
    alphas = np.concatenate([grid, [FIXED_ALPHA]])
    pred, loo, gcv, tau_path, trace_over_p, solver = ridge_path(F, y2, F_test, alphas)
    del F, F_test
    path_seconds = time.perf_counter() - start
    errors = _squared_errors(pred, y_test2)  # (n_test, n_alphas)
    var = float(y_test2.var(axis=0).mean())
    mse = errors.mean(axis=0) / var
    n_grid = GRID_EXPONENTS.size
    best = int(np.argmin(mse[:n_grid]))
    small = np.array(
        [int(np.argmin(abs(GRID_EXPONENTS - e))) for e in SMALL_GRID_EXPONENTS]
    )
    c_index = int(np.argmin(abs(GRID_EXPONENTS - np.log10(c))))
    chosen = {
        "fixed_1e-3": n_grid,
        "scaled": c_index,
        "loo": int(small[np.argmin(loo[small])]),
        "gcv": int(small[np.argmin(gcv[small])]),
    }
    cell = {
        "estimator": estimator,
        "generator": generator,
        "n": n,
        "width": width,
        "seed": seed,
        "n_features": p,
        "solver": solver,
        "tau": tau,
        "trace_over_p": trace_over_p,
        "target_variance": var,
        "best_exponent": float(GRID_EXPONENTS[best]),
        "best_alpha": float(grid[best]),
        "best_at_grid_edge": best in (0, n_grid - 1),
        "best_mse": float(mse[best]),
        "path_mse": mse[:n_grid].tolist(),
        "path_loo": (loo[:n_grid] / var).tolist(),
        "path_gcv": (gcv[:n_grid] / var).tolist(),
        "path_seconds": path_seconds,
        "candidates": {},
    }
    for name, index in chosen.items():
        ratio, se = _ratio(errors[:, index], errors[:, best])
        cell["candidates"][name] = {
            "alpha": float(alphas[index]),
            "alpha_over_tau": float(alphas[index] / tau),
            "ratio": ratio,
            "se": se,
        }
    if with_default:
        model = make_estimator(estimator, width, d, rs)
        start = time.perf_counter()
        model.fit(X, y)
        fit_seconds = time.perf_counter() - start
        err = _squared_errors(
            np.asarray(model.predict(X_test)).reshape(n_test, 1, -1), y_test2
        )[:, 0]
        ratio, se = _ratio(err, errors[:, best])
        cell["candidates"]["default"] = {
            "alpha": float(model.alpha_),
            "alpha_over_tau": float(model.alpha_ / tau),
            "ratio": ratio,
            "se": se,
            "fit_seconds": fit_seconds,
        }
    return cell


# -- summary --------------------------------------------------------------------------


def summarize(cells, candidates):
    """Worst ratio over seeds per (estimator, generator, n, width)."""
    groups = {}
    for cell in cells:
        key = (cell["estimator"], cell["generator"], cell["n"], cell["width"])
        groups.setdefault(key, []).append(cell)
    rows = []
    order = {name: i for i, name in enumerate(ESTIMATORS + GENERATORS)}
    for key in sorted(groups, key=lambda k: (order[k[0]], order[k[1]], k[2], k[3])):
        group = groups[key]
        row = dict(zip(("estimator", "generator", "n", "width"), key, strict=True))
        row["seeds"] = len(group)
        row["best_mse_mean"] = float(np.mean([c["best_mse"] for c in group]))
        row["best_exponents"] = [c["best_exponent"] for c in group]
        for name in candidates:
            worst = max(group, key=lambda c: c["candidates"][name]["ratio"])
            row[name] = worst["candidates"][name]["ratio"]
            row[name + "_se"] = worst["candidates"][name]["se"]
        rows.append(row)
    return rows


def single_c_analysis(cells):
    """For each fine-grid c: worst ratio over all cells of alpha = c * tau, and the
    spread of the best alpha in units of trace / n and of trace / p."""
    paths = np.array([c["path_mse"] for c in cells])
    best = paths.min(axis=1, keepdims=True)
    worst = (paths / best).max(axis=0)
    log_best_n = np.array([np.log10(c["best_alpha"] / c["tau"]) for c in cells])
    log_best_p = np.array(
        [np.log10(c["best_alpha"] / c["trace_over_p"]) for c in cells]
    )
    k = int(np.argmin(worst))
    return {
        "best_single_c": float(10.0 ** GRID_EXPONENTS[k]),
        "its_worst_ratio": float(worst[k]),
        "worst_ratio_per_c": dict(
            zip([f"{e:g}" for e in GRID_EXPONENTS], worst.tolist(), strict=True)
        ),
        "log10_best_alpha_over_trace_by_n": {
            "min": float(log_best_n.min()),
            "max": float(log_best_n.max()),
            "std": float(log_best_n.std()),
        },
        "log10_best_alpha_over_trace_by_p": {
            "min": float(log_best_p.min()),
            "max": float(log_best_p.max()),
            "std": float(log_best_p.std()),
        },
    }


def markdown_table(rows, candidates):
    head = ["estimator", "generator", "n", "M", "best MSE", "log10 a*/tau"]
    lines = [
        "| " + " | ".join(head + list(candidates)) + " |",
        "|" + "---|" * (len(head) + len(candidates)),
    ]
    for r in rows:
        exps = r["best_exponents"]
        cells = [
            r["estimator"],
            r["generator"],
            str(r["n"]),
            str(r["width"]),
            f"{r['best_mse_mean']:.3g}",
            f"{min(exps):g}..{max(exps):g}"
            if min(exps) != max(exps)
            else f"{exps[0]:g}",
        ]
        for name in candidates:
            ratio = r[name]
            text = f"{ratio:.3f}" if ratio < 100 else f"{ratio:.3g}"
            cells.append(f"**{text}**" if ratio > THRESHOLD else text)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _report(cells, candidates, args, wall):
    rows = summarize(cells, candidates)
    return {
        "benchmark": "default_alpha",
        "machine": machine_info(),
        "wall_seconds": wall,
        "command": " ".join(sys.argv),
        "settings": {
            "n": args.n,
            "widths": args.widths,
            "estimators": args.estimators,
            "generators": args.generators,
            "seeds": args.seeds,
            "heavy_size": args.heavy_size,
            "heavy_cost": args.heavy_cost,
            "heavy_seeds": args.heavy_seeds,
            "max_size": args.max_size,
            "n_test": args.n_test,
            "grid_exponents_of_tau": GRID_EXPONENTS.tolist(),
            "small_grid_exponents_of_tau": SMALL_GRID_EXPONENTS.tolist(),
            "fixed_alpha": FIXED_ALPHA,
            "scaled_c": args.c,
            "tau": "trace(Phi_c^T Phi_c) / n, Phi_c the centred training features",
            "threshold": THRESHOLD,
        },
        "single_c": single_c_analysis(cells),
        "cells_above_threshold": {
            name: sum(r[name] > THRESHOLD for r in rows) for name in candidates
        },
        "n_rows": len(rows),
        "table": rows,
        "cells": cells,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--n", type=int, nargs="+", default=[100, 300, 1000, 3000, 10000]
    )
    parser.add_argument("--widths", type=int, nargs="+", default=[50, 200, 500, 2000])
    parser.add_argument("--estimators", nargs="+", default=list(ESTIMATORS))
    parser.add_argument("--generators", nargs="+", default=list(GENERATORS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--n-test", type=int, default=5000)
    parser.add_argument("--c", type=float, default=1e-2, help="the scaled candidate")
    parser.add_argument("--heavy-size", type=int, default=5000)
    parser.add_argument("--heavy-cost", type=float, default=float("inf"))
    parser.add_argument("--heavy-seeds", type=int, default=1)
    parser.add_argument(
        "--max-size",
        type=int,
        default=None,
        help="skip the cells with min(n, n_features) above this",
    )
    parser.add_argument(
        "--estimator-default",
        action="store_true",
        help="also fit each estimator with its own default alpha",
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "default_alpha.json")
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.widths, args.seeds, args.n_test = [100, 300], [50, 200], 1, 1000
    candidates = ["fixed_1e-3", "scaled", "loo", "gcv"]
    if args.estimator_default:
        candidates.append("default")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    plan = []
    for generator in args.generators:
        d = 4 if generator == "token_value" else 8
        for n in args.n:
            for width in args.widths:
                p = width * (d + 1)
                size = min(n, p)
                if args.max_size is not None and size > args.max_size:
                    continue
                n_seeds = args.seeds
                if size > args.heavy_size or n * p * size > args.heavy_cost:
                    n_seeds = min(args.seeds, args.heavy_seeds)
                for estimator in args.estimators:
                    for seed in range(n_seeds):
                        cost = n * p * size + size**3
                        plan.append((cost, generator, n, width, estimator, seed))
    # Cheapest first: an interrupted run has kept the most cells (the JSON is
    # rewritten after each one).
    plan.sort(key=lambda item: item[0])

    start = time.perf_counter()
    cells = []
    for _, generator, n, width, estimator, seed in plan:
        cell = run_cell(
            estimator,
            generator,
            n,
            width,
            seed,
            args.n_test,
            args.c,
            args.estimator_default,
        )
        cells.append(cell)
        ratios = " ".join(
            f"{k}={v['ratio']:.3f}" for k, v in cell["candidates"].items()
        )
        print(
            f"{estimator:9s} {generator:15s} n={n:5d} M={width:4d} s={seed} "
            f"best={cell['best_mse']:.3g} a*/tau=1e{cell['best_exponent']:g} "
            f"{ratios} ({cell['path_seconds']:.1f} s)",
            file=sys.stderr,
            flush=True,
        )
        report = _report(cells, candidates, args, time.perf_counter() - start)
        report["complete"] = len(cells) == len(plan)
        out.write_text(json.dumps(report, indent=1) + "\n")
    wall = time.perf_counter() - start
    report = _report(cells, candidates, args, wall)
    report["complete"] = True
    out.write_text(json.dumps(report, indent=1) + "\n")
    rows = report["table"]
    print(markdown_table(rows, candidates))
    print(
        json.dumps(
            {
                "wall_seconds": wall,
                "cells_above_threshold": report["cells_above_threshold"],
                "single_c": {
                    k: v
                    for k, v in report["single_c"].items()
                    if k != "worst_ratio_per_c"
                },
            },
            indent=1,
        )
    )
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
