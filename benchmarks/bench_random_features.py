"""Speed and memory of the random-feature attention estimators, as same-run ratios.

Measured in one run (defaults: n = 8000 samples, N = 16 keys, d = 16, 1024
heads, float64):

* the feature map's time against its useful floating-point work,
  ``2 n M (d^2 + N d + N (d + 1))``, at the float64 matrix-multiply rate
  measured in the same run (and the same for a direct ``einsum`` version,
  timed on a subsample and scaled linearly in n);
* a one-alpha fit of :class:`RandomFeatureAttentionRegressor` against the
  routes a user would otherwise write: features with NumPy, then
  ``sklearn.linear_model.Ridge`` (features from our transformer, and features
  from a direct ``einsum``), wall time and peak memory;
* a fit with 20 alphas and leave-one-out selection against the one-alpha fit.

Each fit runs in a fresh subprocess so that its peak resident memory
(``ru_maxrss``, minus the process's high-water mark before the fit) is its own.
Results are written as JSON with the machine, versions and sizes.

Usage::

    python benchmarks/bench_random_features.py            # the issue's sizes
    python benchmarks/bench_random_features.py --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import machine_info, matmul_rate, token_regression  # noqa: E402


def _median_time(func, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), [float(t) for t in times]


def einsum_features(X, W):
    """The direct formulation (paper notes, section 9): correct but slow."""
    n, n_tokens, d = X.shape
    keys = X[:, 1:]
    tilde = np.concatenate([keys, np.ones(keys.shape[:2] + (1,))], axis=2)
    Q = np.einsum("nd,mde->nme", X[:, 0], W)
    P = np.maximum(np.einsum("nme,nie->nmi", Q, keys), 0) / (n_tokens - 1)
    return np.einsum("nmi,nij->nmj", P, tilde).reshape(n, -1) / np.sqrt(W.shape[0])


# -- one fit per subprocess ---------------------------------------------------------


def _fit_in_this_process(route, n, n_keys, d, heads, alpha, n_alphas):
    from sklearn.linear_model import Ridge

    from sklearn_attn import AttentionRandomFeatures, RandomFeatureAttentionRegressor

    X, y = token_regression(n, n_keys, d)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    if route == "ours":
        model = RandomFeatureAttentionRegressor(
            n_heads=heads, alpha=alpha, random_state=0
        )
        model.fit(X, y)
        coef = model.coef_
    elif route == "ours_loo":
        alphas = np.logspace(-6, 1, n_alphas)
        model = RandomFeatureAttentionRegressor(
            n_heads=heads, alpha=alphas, random_state=0
        )
        model.fit(X, y)
        coef = model.coef_
    elif route in ("numpy_features_ridge", "einsum_features_ridge"):
        transformer = AttentionRandomFeatures(n_heads=heads, random_state=0).fit(X)
        if route == "numpy_features_ridge":
            features = transformer.transform(X)
        else:
            features = einsum_features(X, transformer.qk_weights_)
        coef = Ridge(alpha=alpha).fit(features, y).coef_
    else:
        raise ValueError(route)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "route": route,
        "seconds": seconds,
        "peak_extra_bytes": (after - before) * 1024,  # ru_maxrss is in KiB on Linux
        "coef_head": [float(c) for c in np.ravel(coef)[:5]],
    }


def _fit_subprocess(route, args):
    cmd = [
        sys.executable,
        __file__,
        "--_child",
        route,
        "--n",
        str(args.n),
        "--keys",
        str(args.keys),
        "--dim",
        str(args.dim),
        "--heads",
        str(args.heads),
        "--alpha",
        str(args.alpha),
        "--n-alphas",
        str(args.n_alphas),
    ]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _feature_map_report(n, N, d, M, rate, args):
    """Transform time against its useful flops at the measured matmul rate."""
    from sklearn_attn import AttentionRandomFeatures

    X, _ = token_regression(n, N, d)
    transformer = AttentionRandomFeatures(n_heads=M, random_state=0).fit(X)
    transformer.transform(X[:64])  # warm up
    useful_flops = 2 * n * M * (d * d + N * d + N * (d + 1))
    seconds, all_times = _median_time(lambda: transformer.transform(X), args.repeats)
    ideal = useful_flops / rate
    sub = X[: args.einsum_samples]
    einsum_seconds, _ = _median_time(
        lambda: einsum_features(sub, transformer.qk_weights_), max(1, args.repeats - 1)
    )
    einsum_scaled = einsum_seconds * n / len(sub)
    same = np.allclose(
        einsum_features(sub[:50], transformer.qk_weights_),
        transformer.transform(sub[:50]),
    )
    return {
        "useful_flops": useful_flops,
        "ideal_seconds_at_matmul_rate": ideal,
        "seconds_median": seconds,
        "seconds_all": all_times,
        "ratio_to_ideal": seconds / ideal,
        "target_ratio_at_most": 4.0,
        "einsum_seconds_scaled_from_subsample": einsum_scaled,
        "einsum_subsample": len(sub),
        "einsum_ratio_to_ideal": einsum_scaled / ideal,
        "einsum_matches": bool(same),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8000)
    parser.add_argument("--keys", type=int, default=16)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--heads", type=int, default=1024)
    parser.add_argument("--alpha", type=float, default=1e-3)
    parser.add_argument("--n-alphas", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--einsum-samples", type=int, default=500)
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes, for a smoke test"
    )
    parser.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "random_features.json")
    )
    parser.add_argument("--_child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._child:
        result = _fit_in_this_process(
            args._child,
            args.n,
            args.keys,
            args.dim,
            args.heads,
            args.alpha,
            args.n_alphas,
        )
        print(json.dumps(result))
        return 0
    if args.quick:
        args.n, args.keys, args.dim, args.heads = 400, 4, 4, 64
        args.repeats, args.einsum_samples = 1, 100

    n, N, d, M = args.n, args.keys, args.dim, args.heads
    report = {
        "benchmark": "random_features",
        "machine": machine_info(),
        "sizes": {
            "n_samples": n,
            "n_keys": N,
            "token_dim": d,
            "n_heads": M,
            "dtype": "float64",
            "alpha": args.alpha,
            "n_alphas": args.n_alphas,
        },
    }
    rate = matmul_rate(repeats=args.repeats + 2)
    report["matmul_flops_per_s"] = rate
    print(f"float64 matmul: {rate / 1e9:.1f} GFLOP/s", file=sys.stderr)

    report["feature_map"] = _feature_map_report(n, N, d, M, rate, args)
    ratio = report["feature_map"]["ratio_to_ideal"]
    print(
        f"feature map: {ratio:.2f} x ideal (einsum "
        f"{report['feature_map']['einsum_ratio_to_ideal']:.0f} x)",
        file=sys.stderr,
    )

    fits = {}
    for route in ("ours", "ours_loo", "numpy_features_ridge", "einsum_features_ridge"):
        fits[route] = _fit_subprocess(route, args)
        print(
            f"{route}: {fits[route]['seconds']:.2f} s, "
            f"peak +{fits[route]['peak_extra_bytes'] / 2**20:.0f} MiB",
            file=sys.stderr,
        )
    ours = fits["ours"]
    report["fits"] = fits
    report["ratios"] = {
        "fit_time_vs_numpy_features_ridge": ours["seconds"]
        / fits["numpy_features_ridge"]["seconds"],
        "fit_memory_vs_numpy_features_ridge": max(ours["peak_extra_bytes"], 1)
        / max(fits["numpy_features_ridge"]["peak_extra_bytes"], 1),
        "fit_time_vs_einsum_features_ridge": ours["seconds"]
        / fits["einsum_features_ridge"]["seconds"],
        "fit_memory_vs_einsum_features_ridge": max(ours["peak_extra_bytes"], 1)
        / max(fits["einsum_features_ridge"]["peak_extra_bytes"], 1),
        "loo_fit_time_vs_one_alpha_fit": fits["ours_loo"]["seconds"] / ours["seconds"],
        "targets": {
            "fit_time_at_most": 0.6,
            "fit_memory_at_most": 0.6,
            "loo_at_most": 1.5,
        },
    }
    report["coef_agree_with_ridge"] = bool(
        np.allclose(
            ours["coef_head"],
            fits["numpy_features_ridge"]["coef_head"],
            rtol=1e-5,
            atol=1e-8,
        )
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["ratios"], indent=2))
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
