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


def _reference_products(codes, couplings_mat, repeats):
    """The two float32 products of an evaluation, each over all rows at once."""
    from sklearn_attn.potts._model import one_hot

    onehot = one_hot(codes, N_STATES, dtype=np.float32)
    residual = np.random.default_rng(3).standard_normal(onehot.shape)
    residual = residual.astype(np.float32)
    return {
        "reference_logits_product": _median_time(
            lambda: onehot @ couplings_mat, repeats
        ),
        "reference_gradient_product": _median_time(
            lambda: residual.T @ onehot, repeats
        ),
    }


def _evaluation_parts(codes, weights, repeats):
    """The reference products, one evaluation, and its parts, in seconds."""
    from scipy.linalg import blas

    from sklearn_attn.potts._model import (
        FullCouplings,
        OneHotRows,
        data_term_and_gradient,
        objective,
    )

    n, n_sites = codes.shape
    width = n_sites * N_STATES
    rng = np.random.default_rng(1)
    model = FullCouplings(n_sites, N_STATES)
    theta = 0.01 * rng.standard_normal(model.n_params)
    scale = (1.0 + rng.random(model.n_params)).astype(np.float32)
    rows = OneHotRows(codes, weights, N_STATES, dtype=np.float32)
    couplings_mat, fields = model.couplings(theta, dtype=np.float32, scale=scale)

    out = {"block_rows": rows.block_rows, "n_blocks": -(-n // rows.block_rows)}
    out.update(_reference_products(codes, couplings_mat, repeats))
    reference = out["reference_logits_product"] + out["reference_gradient_product"]
    out["reference_two_products"] = reference

    out["evaluation"] = _median_time(
        lambda: objective(theta, model, rows, 0.01, 16.0, scale=scale), repeats
    )
    out["forming_couplings"] = _median_time(
        lambda: model.couplings(theta, dtype=np.float32, scale=scale), repeats
    )
    out["data_term"] = _median_time(
        lambda: data_term_and_gradient(rows, couplings_mat, fields, np, symmetric=True),
        repeats,
    )
    out["one_hot_blocks"] = _median_time(lambda: list(rows.blocks()), repeats)

    def logits_products():
        for block, _, _ in rows.blocks():
            block @ couplings_mat

    def panels_float64():
        grad = np.zeros((width, width))
        half = width // 2
        for block, _, _ in rows.blocks():
            grad[:, :half] += block.T @ block[:, :half]
            grad[:, half:] += block.T @ block[:, half:]

    def rank_2k_float32():
        grad = np.zeros((width, width), dtype=np.float32, order="F")
        for block, _, _ in rows.blocks():
            blas.ssyr2k(1.0, block.T, block.T, beta=1.0, c=grad, trans=0, overwrite_c=1)

    out["logits_products_blocks"] = _median_time(logits_products, repeats)
    out["gradient_panels_float64_blocks"] = _median_time(panels_float64, repeats)
    out["gradient_syr2k_float32_blocks"] = _median_time(rank_2k_float32, repeats)
    _, grad_couplings, grad_fields = data_term_and_gradient(
        rows, couplings_mat, fields, np, symmetric=True
    )
    out["pull_back"] = _median_time(
        lambda: model.pull_back(theta, grad_couplings, grad_fields, np), repeats
    )
    grad = np.zeros(model.n_params)
    out["penalty"] = _median_time(
        lambda: model.add_penalty(theta, grad, 0.01, 16.0, np, scale=scale), repeats
    )
    out["ratio_evaluation_to_reference"] = out["evaluation"] / reference
    return out


def _fit(codes, weights, max_iter):
    """A fit of ``max_iter`` iterations with every evaluation counted and timed."""
    from sklearn_attn import PottsPseudoLikelihood
    from sklearn_attn.potts import _estimator

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
    _estimator.objective = counted
    try:
        start = time.perf_counter()
        model.fit(codes, sample_weight=weights)
        seconds = time.perf_counter() - start
    finally:
        _estimator.objective = original
    return {
        "seconds": seconds,
        "n_iter": int(model.n_iter_),
        "n_evaluations": len(evaluations),
        "evaluations_per_iteration": len(evaluations) / max(model.n_iter_, 1),
        "seconds_per_iteration": seconds / max(model.n_iter_, 1),
        "seconds_per_evaluation": float(np.median(evaluations)),
        "seconds_outside_objective": seconds - float(np.sum(evaluations)),
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
