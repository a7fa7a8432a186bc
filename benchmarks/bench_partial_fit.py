"""Fitting random-feature attention beyond memory: ``partial_fit`` in batches
against NumPy features and ``sklearn.linear_model.Ridge``.

Measured (defaults: n = 1,000,000 samples, N = 16 keys, so 17 tokens with the
query, d = 16, 256 heads, hence 256 (d + 1) = 4,352 features, float64):

* ``partial_fit`` of :class:`RandomFeatureAttentionRegressor` over batches of
  50,000 samples, each generated when it is needed from a seeded generator
  (the data set never exists at once), then the solve: wall time and peak
  resident memory of the process (``VmHWM``), which must stay under 2 GB;
* the route a user would otherwise write, ``AttentionRandomFeatures`` and then
  ``Ridge`` on the full ``(n, 4352)`` feature matrix (35 GB at n = 1e6), at
  increasing n, each in a child process whose address space is limited
  (``RLIMIT_AS``) so that a size that does not fit fails with ``MemoryError``
  instead of waking the OOM killer: the largest n that runs, its time and
  memory, and the error where it stops;
* at the smallest n of that ladder, ``partial_fit`` against the ``Ridge``
  route: the same coefficients.

Every fit runs in a fresh child process, so its peak memory is its own. Results
go to ``benchmarks/results/partial_fit.json``.

Usage::

    python benchmarks/bench_partial_fit.py            # the issue's sizes
    python benchmarks/bench_partial_fit.py --quick    # a smoke run (~1 minute)
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

from _common import (  # noqa: E402
    machine_info,
    matmul_rate,
    peak_memory_bytes,
    stream_batch,
)

# -- the routes, each in its own child process ----------------------------------------


def _ours(args):
    from sklearn_attn import RandomFeatureAttentionRegressor

    model = RandomFeatureAttentionRegressor(
        n_heads=args.heads, alpha=args.alpha, random_state=0
    )
    baseline = peak_memory_bytes()
    batch_seconds = []
    start = time.perf_counter()
    for index in range(args.n // args.batch):
        X, y = stream_batch(index, args)
        tic = time.perf_counter()
        model.partial_fit(X, y)
        batch_seconds.append(time.perf_counter() - tic)
        del X, y
    tic = time.perf_counter()
    coef = model.coef_  # the solve happens here
    solve_seconds = time.perf_counter() - tic
    seconds = time.perf_counter() - start
    return {
        "route": "partial_fit",
        "n_samples": args.n,
        "seconds": seconds,
        "partial_fit_seconds_per_batch_mean": float(np.mean(batch_seconds)),
        "solve_seconds": solve_seconds,
        "peak_bytes": peak_memory_bytes(),
        "peak_bytes_before_fit": baseline,
        "coef_head": [float(c) for c in coef[:5]],
        "intercept": float(model.intercept_),
    }


def _ridge_route(args):
    from sklearn.linear_model import Ridge

    from sklearn_attn import AttentionRandomFeatures

    limit = int(args.address_limit_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    baseline = peak_memory_bytes()
    start = time.perf_counter()
    try:
        parts = [stream_batch(index, args) for index in range(args.n // args.batch)]
        X = np.concatenate([p[0] for p in parts])
        y = np.concatenate([p[1] for p in parts])
        del parts
        features = AttentionRandomFeatures(n_heads=args.heads, random_state=0)
        features = features.fit_transform(X)
        ridge = Ridge(alpha=args.alpha).fit(features, y)
    except MemoryError as exc:
        return {
            "route": "features_and_sklearn_ridge",
            "n_samples": args.n,
            "ok": False,
            "error": f"MemoryError: {exc}",
            "seconds_until_error": time.perf_counter() - start,
            "peak_bytes": peak_memory_bytes(),
            "address_limit_bytes": limit,
        }
    return {
        "route": "features_and_sklearn_ridge",
        "n_samples": args.n,
        "ok": True,
        "seconds": time.perf_counter() - start,
        "peak_bytes": peak_memory_bytes(),
        "peak_bytes_before_fit": baseline,
        "address_limit_bytes": limit,
        "feature_matrix_bytes": features.nbytes,
        "coef_head": [float(c) for c in ridge.coef_[:5]],
        "intercept": float(ridge.intercept_),
    }


def _child(route, n, args):
    cmd = [sys.executable, __file__, "--_child", route, "--n", str(n)]
    for name in ("keys", "dim", "heads", "batch", "alpha", "seed", "address_limit_gb"):
        cmd += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        # Killed (e.g. by a signal) or crashed: report how, do not retry.
        return {
            "route": {"ours": "partial_fit", "ridge": "features_and_sklearn_ridge"}[
                route
            ],
            "n_samples": n,
            "ok": False,
            "error": f"exit status {out.returncode}: {out.stderr.strip()[-500:]}",
        }
    return json.loads(lines[-1])


def _gib(value):
    return f"{value / 2**30:.2f} GiB"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=16)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--heads", type=int, default=256)
    parser.add_argument("--batch", type=int, default=50_000)
    parser.add_argument("--alpha", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--ladder",
        default="50000,100000,200000,400000,1000000",
        help="sample counts of the Ridge route, comma-separated (multiples of "
        "--batch); empty to skip it",
    )
    parser.add_argument(
        "--address-limit-gb",
        type=float,
        default=20.0,
        help="address-space limit of the Ridge route's child processes",
    )
    parser.add_argument(
        "--quick", action="store_true", help="small sizes, for a smoke test"
    )
    parser.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "partial_fit.json")
    )
    parser.add_argument("--_child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._child:
        route = {"ours": _ours, "ridge": _ridge_route}[args._child]
        print(json.dumps(route(args)))
        return 0
    if args.quick:
        args.n, args.heads, args.batch = 40_000, 64, 10_000
        args.ladder, args.address_limit_gb = "10000,20000,40000,80000", 1.5

    ladder = [int(n) for n in args.ladder.split(",") if n.strip()]
    if any(n % args.batch for n in [args.n, *ladder]):
        parser.error("--n and the --ladder sizes must be multiples of --batch")
    n_features = args.heads * (args.dim + 1)
    report = {
        "benchmark": "partial_fit",
        "machine": machine_info(),
        "sizes": {
            "n_samples": args.n,
            "n_keys": args.keys,
            "n_tokens": args.keys + 1,
            "token_dim": args.dim,
            "n_heads": args.heads,
            "n_features": n_features,
            "batch": args.batch,
            "alpha": args.alpha,
            "dtype": "float64",
            "full_feature_matrix_bytes": 8 * args.n * n_features,
            "quick": args.quick,
        },
        "matmul_flops_per_s": matmul_rate(),
    }
    ours = _child("ours", args.n, args)
    report["partial_fit"] = ours
    if "seconds" in ours:
        print(
            f"partial_fit, n={args.n}: {ours['seconds']:.1f} s, "
            f"peak {_gib(ours['peak_bytes'])}",
            file=sys.stderr,
        )
    else:
        print(f"partial_fit failed: {ours['error']}", file=sys.stderr)

    ladder_results = []
    for n in ladder:
        result = _child("ridge", n, args)
        ladder_results.append(result)
        status = (
            f"{result['seconds']:.1f} s, peak {_gib(result['peak_bytes'])}"
            if result["ok"]
            else result["error"][:120]
        )
        print(f"features + Ridge, n={n}: {status}", file=sys.stderr)
        if not result["ok"]:
            break
    report["features_and_sklearn_ridge"] = ladder_results
    fitted = [r for r in ladder_results if r["ok"]]
    failed = [r for r in ladder_results if not r["ok"]]
    report["ridge_route_largest_n"] = fitted[-1]["n_samples"] if fitted else None
    report["ridge_route_stops_at"] = (
        {"n_samples": failed[0]["n_samples"], "error": failed[0]["error"]}
        if failed
        else None
    )

    # The same model: partial_fit against the Ridge route where both run.
    if fitted:
        small = _child("ours", fitted[0]["n_samples"], args)
        report["agreement_at_n"] = fitted[0]["n_samples"]
        report["coef_agree_with_ridge"] = bool(
            np.allclose(small["coef_head"], fitted[0]["coef_head"], rtol=1e-6)
            and np.isclose(small["intercept"], fitted[0]["intercept"], rtol=1e-6)
        )
    report["targets"] = {"partial_fit_peak_bytes_at_most": 2 * 10**9}
    if "peak_bytes" in ours:
        report["partial_fit_peak_under_target"] = ours["peak_bytes"] < 2 * 10**9
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    summary = {
        k: report.get(k)
        for k in (
            "ridge_route_largest_n",
            "ridge_route_stops_at",
            "coef_agree_with_ridge",
            "partial_fit_peak_under_target",
        )
    }
    print(json.dumps(summary, indent=2))
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
