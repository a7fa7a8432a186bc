"""What random-feature attention learns, against the claims of Fu et al. (2023).

The study is that of ``python -m sklearn_attn reproduce rfa``
(:func:`sklearn_attn.experiments.run_rfa`, one implementation); this script
runs it with longer settings: 5 seeds, training sizes up to 10,000 in the
degree, mean-scale and softmax tables, and ``N = 32`` keys besides 4 and 16.
Its tables, each cell a mean and standard deviation over seeds (every seed
draws new data and new random weights; models compared in one cell share
both):

1. **degree**: test error against ``n`` of RFA, BiasedRFA and RFMLP (the same
   number of trained weights, ``M (d + 1)``) on key-averaged targets of degree
   1, 2 and 3 in the correlations ``t_i = <x_0, x_i> / sqrt(d)``, and
   (**degree_thresholds**) for each model and degree the smallest ``n`` of the
   grid with mean error at most the threshold. The targets are
   ``mean_i Q_p(t_i)`` with ``Q_p`` the orthogonal (Gegenbauer) polynomial of
   degree ``p`` (``make_token_regression(polynomial="gegenbauer")``), so that
   degree ``p`` means exactly degree ``p``; ``t^3`` (``polynomial="power"``),
   mostly linear, is the fourth target.
2. **keys**: the degree-1 correlation and value targets for several ``N``.
3. **mean_scale**: BiasedRFA's mean scale ``mu`` (``qk_mean_scale``; ``mu = 0``
   is RFA itself) on the degree-2 target: its error and its paired ratio to
   RFA's (same data, same random part of the weights).
4. **softmax**: RFA with ``activation="relu"`` against ``"softmax"`` on the
   correlation and value targets of degree 1 to 3 and the ``"gamma"`` target;
   and (**softmax_temperature**) the softmax's inverse temperature ``c``
   (``qk_std = c / sqrt(d)``) on the value targets.

Two exact facts frame the tables. (a) With ReLU, every attention feature is,
for fixed keys, ``relu(<x_0, v>)`` times a constant, ``v = W_m x_i`` (also for
BiasedRFA's ``W_m``); ``relu(u) = u / 2 + |u| / 2`` has no spherical
harmonic of odd degree above 1, so the degree-3 target, a degree-3 harmonic
in ``x_0``, is orthogonal to every feature: RFA and BiasedRFA cannot beat the
mean on it at any ``n`` or width (RFMLP's ReLUs see ``x_0`` with an offset and
can, in principle). ``t^3`` is learned only through its linear part (80% of
its variance at ``d = 4``), so its error cannot go below 0.2. (b) Softmax
weights do not change under ``X -> -X`` while the values ``x_i`` flip: the
softmax predictor is a constant plus an odd function, and every correlation
(and ``"gamma"``) target is even: it cannot beat the mean on them either.
The ``"value"`` targets are odd; there the softmax's normalisation over the
keys mixes the keys, which a key-averaged target does not.

Usage::

    python benchmarks/bench_rfa_claims.py --n-jobs 2   # the long settings
    python benchmarks/bench_rfa_claims.py --quick      # reproduce rfa --quick

Results go to ``benchmarks/results/rfa_claims.json`` (``--out``): the
settings, the tables, the machine, the matrix-multiply rate of the same run
and the wall time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import machine_info, matmul_rate  # noqa: E402

from sklearn_attn.experiments import (  # noqa: E402
    default_config,
    format_rfa_summary,
    run_rfa,
)

# The longer settings, as overrides of reproduce rfa's defaults.
LONG = {
    "n_seeds": 5,
    "degree": {"train_sizes": (100, 200, 400, 800, 1600, 3200, 6400, 10000)},
    "keys": {"n_keys": (4, 16, 32)},
    "mean_scale": {"train_sizes": (200, 800, 3200, 10000)},
    "softmax": {"train_sizes": (400, 3200, 10000)},
}


def settings(quick=False):
    """The settings of this run: ``reproduce rfa --quick``'s, or the long ones."""
    config = default_config(quick)
    if not quick:
        for key, value in LONG.items():
            config[key] = {**config[key], **value} if isinstance(value, dict) else value
    return config


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="the settings of reproduce rfa --quick"
    )
    parser.add_argument("--n-jobs", type=int, default=None, help="joblib workers")
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "benchmarks" / "results" / "rfa_claims.json",
    )
    args = parser.parse_args(argv)
    config = settings(args.quick)
    load_before = machine_info()["load_average_1_5_15"]
    start = time.perf_counter()
    tables = run_rfa(quick=args.quick, config=config, n_jobs=args.n_jobs)
    seconds = time.perf_counter() - start
    results = {
        "config": config,
        "n_jobs": args.n_jobs,
        "total_seconds": seconds,
        "load_average_before": load_before,
        "machine": machine_info(),
        "matmul_flops": matmul_rate(),
        "tables": tables,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(format_rfa_summary(tables))
    print(f"total {seconds:.0f} s; written to {args.out}")


if __name__ == "__main__":
    main()
