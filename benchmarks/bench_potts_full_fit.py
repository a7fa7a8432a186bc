"""Where an evaluation of the full Potts model's objective spends its time.

On a synthetic family (``n`` sequences of a Markov chain along ``L`` sites,
``q = 21``) and the issue's settings (``alpha_couplings=16``,
``alpha_fields=0.01``), measured in one process:

* the reference: the two float32 one-hot products of one evaluation done
  alone, as one product each over all rows (``X @ J`` and ``D^T X``);
* one evaluation of :func:`sklearn_attn.potts._model.objective` (median of
  repeats) and its ratio to the reference;
* its parts, each timed alone: forming ``J_mat`` from the parameters, the
  one-hot blocks, the logits products over the blocks, the gradient
  products over the blocks in two ways (two float32 column panels added to a
  float64 matrix, and one symmetric rank-2k update accumulated in float32),
  the pull-back to the parameter vector and the penalty; the rest of the data
  term (softmax, log-sum-exp, gradient assembly) by difference;
* a fit of ``max_iter`` iterations (``tol=0``): seconds per iteration, per
  evaluation, evaluations per iteration, the time outside the objective (the
  optimiser's vector work) and the final objective, with ``--compare FILE``
  the relative difference of that objective to a previous run's;
* the load average before and after, since the machine may be shared.

Usage::

    python benchmarks/bench_potts_full_fit.py            # L = 100 and 202
    python benchmarks/bench_potts_full_fit.py --quick    # a smoke run
    python benchmarks/bench_potts_full_fit.py --out results/x.json \\
        --compare benchmarks/results/potts_full_fit_before.json
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import machine_info, peak_memory_bytes  # noqa: E402

N_STATES = 21


def markov_family(n, n_sites, n_states=N_STATES, seed=0):
    """Codes of a Markov chain along the sites: neighbours correlate, the sites
    have unequal state frequencies (as in an alignment), and it is quick."""
    rng = np.random.default_rng(seed)
    transition = rng.dirichlet(np.full(n_states, 0.3), size=(n_sites, n_states))
    codes = np.empty((n, n_sites), dtype=np.int64)
    codes[:, 0] = rng.integers(0, n_states, n)
    for i in range(1, n_sites):
        cumulative = transition[i, codes[:, i - 1]].cumsum(axis=1)
        codes[:, i] = (rng.random((n, 1)) < cumulative).argmax(axis=1)
    return codes


def _median_time(f, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _evaluation_parts(codes, weights, repeats):
    """The reference products, one evaluation, and its parts, in seconds.

    The reference and the evaluation are timed in turn, ``repeats`` times, and
    their ratio is the median of the ratios of each turn: a change of the
    machine's load between the two then matters less.
    """
    from scipy.linalg import blas
    from threadpoolctl import threadpool_limits

    from sklearn_attn._backend import limit_optimizer_blas
    from sklearn_attn.potts import _model
    from sklearn_attn.potts._model import FullCouplings, OneHotRows, objective, one_hot

    n, n_sites = codes.shape
    width = n_sites * N_STATES
    rng = np.random.default_rng(1)
    model = FullCouplings(n_sites, N_STATES)
    theta = 0.01 * rng.standard_normal(model.n_params)
    scale = (1.0 + rng.random(model.n_params)).astype(np.float32)
    rows = OneHotRows(codes, weights, N_STATES, dtype=np.float32)
    couplings_mat, fields = model.couplings(theta, dtype=np.float32, scale=scale)
    # The blocks of the products: larger ones where the package asks for them.
    product_rows = max(rows.block_rows, getattr(_model, "_PRODUCT_ROWS", 0))
    out = {
        "block_rows": rows.block_rows,
        "product_block_rows": min(product_rows, n),
        "n_product_blocks": -(-n // product_rows),
    }

    onehot = one_hot(codes, N_STATES, dtype=np.float32)
    residual = rng.standard_normal(onehot.shape).astype(np.float32)
    turns = []
    for _ in range(repeats):
        reference = (
            _median_time(lambda: onehot @ couplings_mat, 1),
            _median_time(lambda: residual.T @ onehot, 1),
        )
        evaluation = _median_time(
            lambda: objective(theta, model, rows, 0.01, 16.0, scale=scale), 1
        )
        turns.append((*reference, evaluation))
    turns = np.array(turns)
    out["reference_logits_product"] = float(np.median(turns[:, 0]))
    out["reference_gradient_product"] = float(np.median(turns[:, 1]))
    out["reference_two_products"] = float(np.median(turns[:, 0] + turns[:, 1]))
    out["evaluation"] = float(np.median(turns[:, 2]))
    out["ratio_evaluation_to_reference"] = float(
        np.median(turns[:, 2] / (turns[:, 0] + turns[:, 1]))
    )
    onehot = residual = None  # freed before the parts are timed

    def part(name, f):
        out[name] = _median_time(f, repeats)

    part(
        "forming_couplings",
        lambda: model.couplings(theta, dtype=np.float32, scale=scale),
    )
    if hasattr(_model, "data_term_and_products_gradient"):
        data_term = _model.data_term_and_products_gradient
    else:
        data_term = functools.partial(_model.data_term_and_gradient, symmetric=True)
    part("data_term", lambda: data_term(rows, couplings_mat, fields, np))
    part("one_hot_blocks", lambda: list(rows.blocks()))

    def logits_products(block_rows):
        buffer = np.empty((min(block_rows, n), width), np.float32)
        for start in range(0, n, block_rows):
            block = next(iter(_rows_from(rows, start, block_rows).blocks()))[0]
            np.matmul(block, couplings_mat, out=buffer[: len(block)])

    def panels_float64(block_rows):
        grad = np.zeros((width, width))
        half = width // 2
        for start in range(0, n, block_rows):
            block = next(iter(_rows_from(rows, start, block_rows).blocks()))[0]
            grad[:, :half] += block.T @ block[:, :half]
            grad[:, half:] += block.T @ block[:, half:]

    def products_float32(block_rows):
        grad = scratch = None
        for start in range(0, n, block_rows):
            block = next(iter(_rows_from(rows, start, block_rows).blocks()))[0]
            if grad is None:
                grad = block.T @ block
                scratch = np.empty_like(grad)
            else:
                grad += np.matmul(block.T, block, out=scratch)

    def rank_2k_float32(block_rows):
        grad = np.zeros((width, width), dtype=np.float32, order="F")
        for start in range(0, n, block_rows):
            block = next(iter(_rows_from(rows, start, block_rows).blocks()))[0]
            blas.ssyr2k(1.0, block.T, block.T, beta=1.0, c=grad, overwrite_c=1)

    # One-hot blocks are rebuilt inside each timed part, as the data term does.
    for label, block_rows in (("blocks", rows.block_rows), ("product_blocks", 2048)):
        part(f"logits_products_{label}", lambda b=block_rows: logits_products(b))
        part(
            f"gradient_panels_float64_{label}",
            lambda b=block_rows: panels_float64(b),
        )
        part(
            f"gradient_products_float32_{label}",
            lambda b=block_rows: products_float32(b),
        )
        # SciPy's BLAS as a fit runs it (one thread), and with all threads.
        with limit_optimizer_blas():
            part(
                f"gradient_syr2k_float32_{label}_in_fit_threads",
                lambda b=block_rows: rank_2k_float32(b),
            )
        with threadpool_limits(limits=os.cpu_count(), user_api="blas"):
            part(
                f"gradient_syr2k_float32_{label}_all_threads",
                lambda b=block_rows: rank_2k_float32(b),
            )
    _, grad_couplings, grad_fields = data_term(rows, couplings_mat, fields, np)
    part(
        "pull_back",
        lambda: model.pull_back(theta, grad_couplings, grad_fields, np),
    )
    grad = np.zeros(model.n_params)
    part(
        "penalty",
        lambda: model.add_penalty(theta, grad, 0.01, 16.0, np, scale=scale),
    )
    return out


def _rows_from(rows, start, block_rows):
    """The rows ``[start, start + block_rows)`` as one block."""
    from sklearn_attn.potts._model import OneHotRows

    part = slice(start, start + block_rows)
    return OneHotRows(
        rows.codes[part],
        rows.weights[part],
        rows.n_states,
        dtype=rows.dtype,
        block_rows=block_rows,
    )


def _fit(codes, weights, max_iter):
    """A fit of ``max_iter`` iterations with every evaluation counted and timed."""
    from sklearn_attn import PottsPseudoLikelihood
    from sklearn_attn.potts import _estimator, _sequence_model

    evaluations = []
    original = _estimator.objective

    def counted(*args, **kwargs):
        start = time.perf_counter()
        result = original(*args, **kwargs)
        evaluations.append(time.perf_counter() - start)
        return result

    model = PottsPseudoLikelihood(
        "full",
        states=range(N_STATES),
        alpha_couplings=16.0,
        alpha_fields=0.01,
        max_iter=max_iter,
        tol=0,
    )
    optimiser = []
    original_lbfgs = _sequence_model.minimize_lbfgs

    def timed_lbfgs(*args, **kwargs):
        start = time.perf_counter()
        result = original_lbfgs(*args, **kwargs)
        optimiser.append(time.perf_counter() - start)
        return result

    _estimator.objective = counted
    _sequence_model.minimize_lbfgs = timed_lbfgs
    try:
        start = time.perf_counter()
        model.fit(codes, sample_weight=weights)
        seconds = time.perf_counter() - start
    finally:
        _estimator.objective = original
        _sequence_model.minimize_lbfgs = original_lbfgs
    return {
        "seconds": seconds,
        "n_iter": int(model.n_iter_),
        "n_evaluations": len(evaluations),
        "evaluations_per_iteration": len(evaluations) / max(model.n_iter_, 1),
        "seconds_per_iteration": seconds / max(model.n_iter_, 1),
        "seconds_per_evaluation": float(np.median(evaluations)),
        "seconds_outside_objective": seconds - float(np.sum(evaluations)),
        # The optimiser's vector work and the scaling of each gradient.
        "seconds_in_lbfgs_outside_objective": float(np.sum(optimiser))
        - float(np.sum(evaluations)),
        "objective": float(model.objective_),
        "loss_curve": [float(v) for v in model.loss_curve_],
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small, fast run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-iter", type=int, default=10)
    parser.add_argument(
        "--out",
        default=str(ROOT / "benchmarks" / "results" / "potts_full_fit.json"),
    )
    parser.add_argument("--compare", help="a previous run's JSON, for the objective")
    args = parser.parse_args(argv)
    sizes = [(40, 1000)] if args.quick else [(100, 5000), (202, 7500)]
    report = {
        "machine": machine_info(),
        "settings": {
            "n_states": N_STATES,
            "alpha_couplings": 16.0,
            "alpha_fields": 0.01,
            "max_iter": args.max_iter,
            "repeats": args.repeats,
        },
        "runs": [],
    }
    previous = {}
    if args.compare:
        for run in json.loads(Path(args.compare).read_text())["runs"]:
            previous[(run["n_sites"], run["n_sequences"])] = run
    for n_sites, n in sizes:
        codes = markov_family(n, n_sites)
        weights = np.random.default_rng(2).uniform(0.2, 1.0, n)
        run = {"n_sites": n_sites, "n_sequences": n, "load_before": os.getloadavg()}
        run["evaluation_s"] = _evaluation_parts(codes, weights, args.repeats)
        run["fit"] = _fit(codes, weights, args.max_iter)
        run["fit"]["ratio_evaluation_to_reference"] = (
            run["fit"]["seconds_per_evaluation"]
            / run["evaluation_s"]["reference_two_products"]
        )
        old = previous.get((n_sites, n))
        if old is not None:
            run["fit"]["objective_relative_difference_to_compared"] = (
                run["fit"]["objective"] / old["fit"]["objective"] - 1.0
            )
        run["load_after"] = os.getloadavg()
        report["runs"].append(run)
        print(json.dumps(run, indent=1), file=sys.stderr)
    report["peak_memory_mb"] = peak_memory_bytes() / 1e6
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
