"""Does the vanilla layer's gap to the truth close with more L-BFGS iterations?

One layer of vanilla self-attention
(:class:`~sklearn_attn.potts.VanillaAttentionPseudoLikelihood`, default width
``L + q``) on the dense signed teachers of ``bench_potts_dense.py`` (the same
draws: training sequences with ``random_state=t``, test sequences from an
independent Gibbs run with ``10000 + t``), fitted from the same start with
increasing ``max_iter``. ``reproduce potts`` stops it at 200 iterations and
``bench_potts_dense.py`` at 500, where it had converged on no teacher; if its
excess over the true conditional entropy kept falling with more iterations,
the plateau would be the optimiser's, not the layer's.

Usage::

    python benchmarks/bench_vanilla_iterations.py                 # 2 teachers
    python benchmarks/bench_vanilla_iterations.py --quick         # a smoke run

Each row (teacher, ``max_iter``) has the test and training excess, the
objective, the iterations run, whether ``tol`` was reached, and the seconds.
Results go to ``benchmarks/results/vanilla_iterations.json`` (``--out``), with
the machine and the total time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from joblib import Parallel, delayed

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import machine_info  # noqa: E402

from sklearn_attn.experiments._potts import (  # noqa: E402
    draw_dense_teacher,
    fit_dense,
)

BETA = 3.0


def run_one(teacher, max_iter, n_train, n_test):
    """Fit the vanilla layer on one teacher with ``max_iter`` iterations."""
    X, X_test, params, mixing = draw_dense_teacher(
        n_train,
        n_test,
        beta=BETA,
        train_seed=teacher,
        test_seed=10_000 + teacher,
        mixing_seed=20_000 + teacher,
    )
    row = fit_dense("vanilla", 0, X, X_test, params, max_iter=max_iter)
    return {
        "teacher": teacher,
        "n_train": n_train,
        "mixing_z_rms": mixing["rms"],
        **{k: v for k, v in row.items() if not isinstance(v, (list, dict))},
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teachers", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--max-iter", type=int, nargs="+", default=[500, 2000, 10_000])
    parser.add_argument("--n-train", type=int, default=6400)
    parser.add_argument("--n-test", type=int, default=10_000)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument(
        "--out",
        default=str(ROOT / "benchmarks" / "results" / "vanilla_iterations.json"),
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.teachers, args.max_iter, args.n_train, args.n_test = (
            [0],
            [20, 50],
            400,
            1000,
        )
    start = time.perf_counter()
    tasks = [(t, m) for m in args.max_iter for t in args.teachers]
    # One BLAS thread per fit: the fits run side by side.
    rows = Parallel(n_jobs=args.n_jobs)(
        delayed(run_one)(t, m, args.n_train, args.n_test) for t, m in tasks
    )
    for row in rows:
        print(
            f"teacher {row['teacher']} max_iter {row['max_iter']}: test excess "
            f"{100 * row['relative_excess_loss']:.2f}%, train excess "
            f"{100 * row['train_relative_excess_loss']:.2f}%, {row['n_iter']} "
            f"iterations, converged {row['converged']}, {row['fit_seconds']:.0f} s"
        )
    result = {
        "script": "benchmarks/bench_vanilla_iterations.py",
        "arguments": vars(args),
        "machine": machine_info(),
        "total_seconds": time.perf_counter() - start,
        "rows": rows,
    }
    if not args.quick:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
