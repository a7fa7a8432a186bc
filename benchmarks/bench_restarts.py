"""Cost of the restarts of MultiHeadAttentionLearner, against one start, same run.

On planted problems (``make_attention_layer_regression``: Boolean inputs, noiseless
targets, ``m`` heads, ``k`` tokens of dimension ``d``), each timed as the median of
``--repeats`` fits:

* one start (``n_init=1``);
* the default fit (``n_init=4``) with ``n_jobs=1``: starts one after another, no
  further start once one reaches an exact fit;
* the default fit with ``n_jobs=2``: starts two at a time (threads), later batches
  skipped after an exact fit;
* for reference, four single starts from four seeds one after another: what the
  default cost when every start ran.

Each fit's relative test error ``||F_hat - F||^2 / ||F||^2`` on a fresh test set is
reported beside its time, with the number of starts that ran. Target: the default
within 1.5 times one start.

Problems: m = 2, d = k = 8, n = 2,000 and m = 3, d = k = 16, n = 4,000 (the sizes of
issue 11; the first is also bench_attention.py's planted problem).

Usage::

    python benchmarks/bench_restarts.py            # the issue's sizes
    python benchmarks/bench_restarts.py --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import machine_info  # noqa: E402

from sklearn_attn.attention import MultiHeadAttentionLearner  # noqa: E402
from sklearn_attn.datasets import make_attention_layer_regression  # noqa: E402

PROBLEMS = [
    {"m": 2, "d": 8, "k": 8, "n_train": 2000, "n_test": 4000},
    {"m": 3, "d": 16, "k": 16, "n_train": 4000, "n_test": 4000},
]
QUICK_PROBLEMS = [
    {"m": 2, "d": 4, "k": 4, "n_train": 300, "n_test": 500},
    {"m": 2, "d": 6, "k": 6, "n_train": 400, "n_test": 500},
]


def _relative_error(pred, target):
    return float(np.sum((pred - target) ** 2) / np.sum(target**2))


def _timed_fit(make_model, X, Y, X_test, Y_test, repeats):
    """Median time of ``repeats`` fits; the last fit's test error and starts."""
    times, caught = [], []
    for _ in range(repeats):
        model = make_model()
        with warnings.catch_warnings(record=True) as records:
            warnings.simplefilter("always")
            start = time.perf_counter()
            model.fit(X, Y)
            times.append(time.perf_counter() - start)
        caught.extend(str(w.message) for w in records)
    return {
        "warnings": sorted(set(caught)),
        "seconds_median": float(np.median(times)),
        "seconds_all": [float(t) for t in times],
        "test_relative_error": _relative_error(model.predict(X_test), Y_test),
        "starts_run": int(model.n_init_run_),
        "iterations_per_start": [int(i) for i in model.init_n_iter_],
    }


def problem_row(sizes, seed, repeats):
    m, d, k = sizes["m"], sizes["d"], sizes["k"]
    shape = dict(n_heads=m, n_tokens=k, token_dim=d)
    X, Y, layer = make_attention_layer_regression(
        sizes["n_train"], **shape, random_state=seed
    )
    X_test, Y_test, _ = make_attention_layer_regression(
        sizes["n_test"], **shape, layer=layer, random_state=seed + 1000
    )
    # Starts from another stream than the planted layer's (bench_attention.py).
    start_seed = seed + 2000

    def learner(**params):
        return lambda: MultiHeadAttentionLearner(m, random_state=start_seed, **params)

    # Warm up (imports, thread pools) on a small fit, not timed.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        MultiHeadAttentionLearner(m, n_init=2, n_jobs=2, max_iter=5).fit(
            X[:100], Y[:100]
        )
    row = {"sizes": sizes, "seed": seed}
    row["one_start"] = _timed_fit(learner(n_init=1), X, Y, X_test, Y_test, repeats)
    row["default_n_jobs_1"] = _timed_fit(
        learner(n_jobs=1), X, Y, X_test, Y_test, repeats
    )
    row["default_n_jobs_2"] = _timed_fit(
        learner(n_jobs=2), X, Y, X_test, Y_test, repeats
    )
    every = []
    for offset in range(4):
        model = MultiHeadAttentionLearner(m, n_init=1, random_state=start_seed + offset)
        start = time.perf_counter()
        model.fit(X, Y)
        every.append(time.perf_counter() - start)
    row["four_single_starts_seconds"] = float(np.sum(every))
    one = row["one_start"]["seconds_median"]
    for name in ("default_n_jobs_1", "default_n_jobs_2"):
        row[name]["ratio_to_one_start"] = row[name]["seconds_median"] / one
    row["four_single_starts_ratio_to_one_start"] = (
        row["four_single_starts_seconds"] / one
    )
    print(
        f"m={m} d=k={d} n={sizes['n_train']}: one start {one:.2f} s; default "
        f"n_jobs=1 {row['default_n_jobs_1']['ratio_to_one_start']:.2f} x "
        f"({row['default_n_jobs_1']['starts_run']} start(s) ran), n_jobs=2 "
        f"{row['default_n_jobs_2']['ratio_to_one_start']:.2f} x "
        f"({row['default_n_jobs_2']['starts_run']} ran); four single starts "
        f"{row['four_single_starts_ratio_to_one_start']:.2f} x; test errors "
        f"{row['one_start']['test_relative_error']:.1e}, "
        f"{row['default_n_jobs_1']['test_relative_error']:.1e}, "
        f"{row['default_n_jobs_2']['test_relative_error']:.1e}",
        file=sys.stderr,
    )
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a smoke run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "restarts.json")
    )
    args = parser.parse_args(argv)
    problems = PROBLEMS
    if args.quick:
        problems, args.repeats = QUICK_PROBLEMS, 1

    report = {
        "benchmark": "restarts",
        "machine": machine_info(),
        "defaults": {
            k: v
            for k, v in MultiHeadAttentionLearner().get_params().items()
            if k in ("n_init", "max_iter", "tol", "init_scale", "solver", "alpha")
        },
        "settings": (
            "MultiHeadAttentionLearner(n_heads=m, random_state=seed + 2000), "
            "Boolean inputs, noiseless targets; n_jobs=2 runs threads"
        ),
        "target_default_ratio_to_one_start_at_most": 1.5,
        "quick": bool(args.quick),
        "problems": [problem_row(p, args.seed, args.repeats) for p in problems],
    }
    report["machine"]["load_average_after"] = list(os.getloadavg())
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    summary = [
        {
            "sizes": row["sizes"],
            "one_start_seconds": row["one_start"]["seconds_median"],
            "default_n_jobs_1_ratio": row["default_n_jobs_1"]["ratio_to_one_start"],
            "default_n_jobs_2_ratio": row["default_n_jobs_2"]["ratio_to_one_start"],
            "test_relative_errors": [
                row[name]["test_relative_error"]
                for name in ("one_start", "default_n_jobs_1", "default_n_jobs_2")
            ],
        }
        for row in report["problems"]
    ]
    print(json.dumps(summary, indent=2))
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
