r"""Dense signed Potts teachers: factored attention's starts, and four models against n.

The teachers are ``make_potts_sequences(graph="dense", beta=BETA)`` with
``L = 20``, ``q = 10`` and one channel: Gaussian position couplings
``N(0, 1) / sqrt(L)`` (symmetric, zero diagonal) and Gaussian colour
embeddings ``U = E E^T / q``, at an inverse temperature where the conditional
entropy is about one nat. One free factored head represents them exactly; one
softmax head and one layer of vanilla self-attention do not. Each teacher ``t``
draws its training sequences with ``random_state=t`` and a test set of
``--n-test`` sequences from an independent Gibbs run (``random_state=10000 +
t``); the true conditional entropy is measured on that test set. A third run,
from the all-zero sequence, checks the sampler: the RMS z-score of the
differences of its state frequencies from the test set's is about one when
both runs are stationary (``mixing_z_rms`` in each row).

The teacher, the models and the fit are those of ``reproduce potts``'s dense
study (``draw_dense_teacher``, ``dense_model`` and ``fit_dense``, public in
``sklearn_attn.experiments._potts``); this script keeps the longer settings:
10 teachers (and 6 harder ones) with two kinds of start at ``n = 25,600``, the
random start and the softmax head besides the reproduction's three models, the
teachers' own seeds (``random_state=t``), no teacher skipped for its mixing
check (it is recorded), and the estimators' default tolerances (``tol=1e-7``,
500 iterations for every model).

Two parts, each row written as soon as it is measured to ``OUT.jsonl`` (so a
stopped run continues with ``--resume``), and the whole to ``OUT``:

* ``starts``: at ``n = --n-train`` (25,600), the relative excess test loss
  ``loss / entropy - 1`` of one free factored head from the default start
  (``init="auto"``, the mean-field start) and from random starts
  (``init="random"``, the start before this option), for each teacher and fit
  seed, with the training excess, the iterations and the time;
* ``curve``: for the first ``--curve-teachers`` teachers, the relative excess
  test loss against ``n`` of the factored head, of
  :class:`~sklearn_attn.potts.VanillaAttentionPseudoLikelihood` (default width
  ``L + q``), of one factored softmax head (``softmax``: positive attention
  rows, the factored counterpart of the vanilla layer's constraint) and of the
  full plmDCA model, each on the first ``n`` training sequences.

The stored results came from (on the shared 2-core machine, under load)::

    python benchmarks/bench_potts_dense.py --part starts \
        --out benchmarks/results/potts_dense_starts.json           # 40 min
    python benchmarks/bench_potts_dense.py --part starts \
        --teacher-ids 15 36 53 59 82 90 --fit-seeds 0 --random-seeds 0 1 2 \
        --out benchmarks/results/potts_dense_hard.json             # 19 min
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_potts_dense.py --part curve \
        --out benchmarks/results/potts_dense_curve.json            # 51 min

(the second set: all the teachers of seeds 10-99 with a conditional entropy
below 0.91 nats whose sampler passed the mixing check on 2,000 samples).

Usage::

    python benchmarks/bench_potts_dense.py      # both parts: results/potts_dense.json
    python benchmarks/bench_potts_dense.py --part curve --curve-teachers 1
    python benchmarks/bench_potts_dense.py --quick    # a smoke run (about a minute)
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

from _common import machine_info, matmul_rate  # noqa: E402

from sklearn_attn.experiments._potts import (  # noqa: E402
    draw_dense_teacher,
    fit_dense,
)
from sklearn_attn.potts import conditional_log_probs  # noqa: E402

N_SITES, N_STATES = 20, 10
BETA = 3.0


def _teacher(teacher, n_train, n_test, beta):
    """Teacher ``teacher``: its training and test sequences and mixing check.

    The seeds of the stored results: ``teacher`` for the teacher and its
    training sequences, ``10000 + teacher`` for the test run and
    ``20000 + teacher`` for the run from the all-zero sequence.
    """
    return draw_dense_teacher(
        n_train,
        n_test,
        n_sites=N_SITES,
        n_states=N_STATES,
        beta=beta,
        train_seed=teacher,
        test_seed=10_000 + teacher,
        mixing_seed=20_000 + teacher,
    )


def _conditional_entropy(codes, params):
    """The teacher's masked-token loss on ``codes``: its conditional entropy there."""
    log_p = conditional_log_probs(codes, params.couplings, params.fields, params.beta)
    return -float(np.take_along_axis(log_p, codes[:, :, None], axis=2).mean())


def _fit(name, seed, X, X_test, params):
    # The estimators' own defaults (tol=1e-7, max_iter=500), as in the stored
    # results; the reproduction stops earlier (see default_config).
    fitted = fit_dense(name, seed, X, X_test, params)
    return {
        "test_loss": fitted["test_loss"],
        "relative_excess": fitted["relative_excess_loss"],
        "train_relative_excess": fitted["train_relative_excess_loss"],
        "objective": fitted["objective"],
        "n_iter": fitted["n_iter"],
        "converged": fitted["converged"],
        "fit_seconds": fitted["fit_seconds"],
    }


def _tasks(args):
    """(part, teacher, n, model, seed) of every row, in the order they run."""
    tasks = []
    if args.part in ("starts", "all"):
        teachers = args.teacher_ids or range(args.teachers)
        for teacher in teachers:
            for seed in args.fit_seeds:
                tasks.append(("starts", teacher, args.n_train, "factored", seed))
            for seed in args.random_seeds:
                tasks.append(("starts", teacher, args.n_train, "factored-random", seed))
    if args.part in ("curve", "all"):
        for teacher in range(args.curve_teachers):
            for n in args.curve_n:
                for name in args.curve_models:
                    tasks.append(("curve", teacher, n, name, 0))
    return tasks


def _summary(rows):
    """Per part, model and n: the worst, median and best relative excess."""
    groups = {}
    for row in rows:
        key = (row["part"], row["model"], row["n_train"])
        groups.setdefault(key, []).append(row)
    out = []
    for (part, model, n), members in sorted(groups.items()):
        excess = np.array([m["relative_excess"] for m in members])
        seconds = np.array([m["fit_seconds"] for m in members])
        out.append(
            {
                "part": part,
                "model": model,
                "n_train": n,
                "fits": len(members),
                "relative_excess_max": float(excess.max()),
                "relative_excess_median": float(np.median(excess)),
                "relative_excess_min": float(excess.min()),
                "fits_within_2_percent": int((excess <= 0.02).sum()),
                "fit_seconds_median": float(np.median(seconds)),
            }
        )
    return out


def _print_tables(rows):
    starts = [r for r in rows if r["part"] == "starts"]
    if starts:
        print("\nstarts: relative excess test loss at n =", starts[0]["n_train"])
        print(
            "teacher  entropy  mixing z  model            seed  excess   train"
            "    iter  seconds"
        )
        for r in starts:
            print(
                f"{r['teacher']:7d}  {r['true_conditional_entropy']:7.3f}  "
                f"{r['mixing_z_rms']:8.2f}  {r['model']:15s}  {r['seed']:4d}  "
                f"{r['relative_excess']:7.2%}  "
                f"{r['train_relative_excess']:7.2%}  {r['n_iter']:5d}  "
                f"{r['fit_seconds']:7.1f}"
            )
    curve = [r for r in rows if r["part"] == "curve"]
    if curve:
        print("\ncurve: relative excess test loss against n (teacher: model)")
        models = sorted({r["model"] for r in curve})
        ns = sorted({r["n_train"] for r in curve})
        print("teacher  model      " + "".join(f"{n:>10d}" for n in ns))
        for teacher in sorted({r["teacher"] for r in curve}):
            for model in models:
                cells = {
                    r["n_train"]: r["relative_excess"]
                    for r in curve
                    if r["teacher"] == teacher and r["model"] == model
                }
                line = "".join(
                    f"{cells[n]:10.2%}" if n in cells else " " * 10 for n in ns
                )
                print(f"{teacher:7d}  {model:9s}  {line}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["starts", "curve", "all"], default="all")
    parser.add_argument("--beta", type=float, default=BETA)
    parser.add_argument("--teachers", type=int, default=10)
    parser.add_argument(
        "--teacher-ids",
        type=int,
        nargs="+",
        default=None,
        help="teachers of the starts part (default: 0 to --teachers - 1)",
    )
    parser.add_argument("--n-train", type=int, default=25_600)
    parser.add_argument("--n-test", type=int, default=10_000)
    parser.add_argument("--fit-seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--random-seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--curve-teachers", type=int, default=3)
    parser.add_argument(
        "--curve-n", type=int, nargs="+", default=[400, 1600, 6400, 25_600]
    )
    parser.add_argument(
        "--curve-models",
        nargs="+",
        default=["factored", "softmax", "vanilla", "full"],
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "potts_dense.json"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.teachers, args.n_train, args.n_test = 1, 1600, 2000
        args.fit_seeds, args.random_seeds = [0], [0]
        args.curve_teachers, args.curve_n = 1, [400, 1600]
    partial = args.out.with_suffix(".jsonl")
    rows = []
    if args.resume and partial.exists():
        rows = [json.loads(line) for line in partial.read_text().splitlines()]
    done = {
        (r["part"], r["teacher"], r["n_train"], r["model"], r["seed"]) for r in rows
    }
    started = time.perf_counter()
    # Every part draws the same sequences of a teacher: the longest set needed.
    n_max = max([args.n_train] + args.curve_n)
    current = None
    with partial.open("a" if args.resume else "w") as log:
        for task in _tasks(args):
            if task in done:
                continue
            part, teacher, n, name, seed = task
            if current != teacher:
                X_all, X_test, params, mixing = _teacher(
                    teacher, n_max, args.n_test, args.beta
                )
                entropy_test = _conditional_entropy(X_test, params)
                current = teacher
            X = X_all[:n]
            row = {
                "part": part,
                "teacher": teacher,
                "n_train": n,
                "model": name,
                "seed": seed,
                "beta": args.beta,
                "true_conditional_entropy": entropy_test,
                "mixing_z_rms": mixing["rms"],
                "mixing_z_max": mixing["max"],
                **_fit(name, seed, X, X_test, params),
            }
            rows.append(row)
            log.write(json.dumps(row) + "\n")
            log.flush()
            print(json.dumps(row), file=sys.stderr, flush=True)
    report = {
        "script": "benchmarks/bench_potts_dense.py",
        "arguments": {
            k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()
        },
        "machine": machine_info(),
        # The same-run reference: every time above scales with this rate.
        "float64_matmul_gflops": matmul_rate() / 1e9,
        "seconds": time.perf_counter() - started,
        "summary": _summary(rows),
        "rows": rows,
    }
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    _print_tables(rows)


if __name__ == "__main__":
    main()
