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
  products over the blocks in three ways (two float32 column panels added to
  a float64 matrix; float32 products summed in float32; one symmetric
  rank-2k update, SciPy's ``ssyr2k``, accumulated in float32, on one thread
  as a fit runs SciPy's BLAS and on all), in the package's blocks and in
  blocks of 2,048 rows, the pull-back to the parameter vector and the
  penalty; the rest of the data term (softmax, log-sum-exp, gradient
  assembly) by difference;
* a fit of ``max_iter`` iterations (``tol=0``): seconds per iteration, per
  evaluation, evaluations per iteration, the time outside the objective (the
  optimiser's vector work) and the final objective, with ``--compare FILE``
  the relative difference of that objective to a previous run's;
* with ``--baseline FILE`` (an earlier ``_model.py``), its objective and this
  one's timed in turn with the reference, and their values and gradients at
  the same point, against each other and against float64 products;
* the memory one evaluation allocates (its peak, from tracemalloc);
* the load average before and after, since the machine may be shared;
* with ``--plmc BINARY``, plmc (``-le 16 -lh 0.01 -m 100 -t 0.2 -n 2``) and
  ``python -m sklearn_attn contacts`` (``--max-iter 100 --alpha-couplings 16
  --alpha-fields 0.01 --identity 0.8``) on PF00014 and on a synthetic L = 100
  family written as FASTA: wall time and peak memory of each.

Usage::

    python benchmarks/bench_potts_full_fit.py            # L = 100 and 202
    python benchmarks/bench_potts_full_fit.py --quick    # a smoke run
    python benchmarks/bench_potts_full_fit.py --out results/x.json \\
        --compare benchmarks/results/potts_full_fit_before.json \\
        --baseline /tmp/old/sklearn_attn/potts/_model.py
    python benchmarks/bench_potts_full_fit.py --plmc /tmp/plmc/bin/plmc \\
        --plmc-only --out benchmarks/results/potts_full_fit_plmc.json
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
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
    grad_couplings = grad_fields = grad = None  # not counted below
    # NumPy reports its allocations to tracemalloc: the arrays one evaluation
    # adds to those the fit holds anyway (parameters, one-hot codes).
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    objective(theta, model, rows, 0.01, 16.0, scale=scale)
    out["evaluation_peak_mb"] = (tracemalloc.get_traced_memory()[1] - before) / 1e6
    tracemalloc.stop()
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


def _load_baseline(path):
    """A previous version of ``sklearn_attn/potts/_model.py`` as a module of its
    own (its relative imports read from this package)."""
    import types

    source = Path(path).read_text()
    source = source.replace(
        "from .._backend import", "from sklearn_attn._backend import"
    )
    module = types.ModuleType("baseline_model")
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


def _baseline_comparison(codes, weights, baseline, repeats):
    """The baseline's objective and this one's, timed in turn with the
    reference products, and their values and gradients at the same point
    against each other and against float64 products."""
    from sklearn_attn.potts import _model
    from sklearn_attn.potts._model import one_hot

    n, n_sites = codes.shape
    rng = np.random.default_rng(1)
    models = {"baseline": baseline, "current": _model}
    theta = 0.01 * rng.standard_normal(_model.FullCouplings(n_sites, N_STATES).n_params)
    scale = (1.0 + rng.random(theta.size)).astype(np.float32)

    def evaluate(module, dtype=np.float32):
        rows = module.OneHotRows(codes, weights, N_STATES, dtype=dtype)
        parametrization = module.FullCouplings(n_sites, N_STATES)
        return module.objective(theta, parametrization, rows, 0.01, 16.0, scale=scale)

    couplings_mat, _ = _model.FullCouplings(n_sites, N_STATES).couplings(
        theta, dtype=np.float32, scale=scale
    )
    onehot = one_hot(codes, N_STATES, dtype=np.float32)
    residual = rng.standard_normal(onehot.shape).astype(np.float32)
    turns = []
    for _ in range(repeats):
        turn = [
            _median_time(lambda: onehot @ couplings_mat, 1)
            + _median_time(lambda: residual.T @ onehot, 1)
        ]
        for module in models.values():
            turn.append(_median_time(lambda m=module: evaluate(m), 1))
        turns.append(turn)
    onehot = residual = None  # freed before the float64 evaluation
    turns = np.array(turns)
    out = {
        "reference_two_products_s": float(np.median(turns[:, 0])),
        "baseline_evaluation_s": float(np.median(turns[:, 1])),
        "current_evaluation_s": float(np.median(turns[:, 2])),
        "baseline_ratio_to_reference": float(np.median(turns[:, 1] / turns[:, 0])),
        "current_ratio_to_reference": float(np.median(turns[:, 2] / turns[:, 0])),
        "speedup": float(np.median(turns[:, 1] / turns[:, 2])),
    }
    old_value, old_grad = evaluate(baseline)
    new_value, new_grad = evaluate(_model)
    exact_value, exact_grad = evaluate(baseline, np.float64)

    def gap(grad, other):
        return float(np.abs(grad - other).max() / np.abs(other).max())

    out["agreement"] = {
        "value_current_vs_baseline": new_value / old_value - 1.0,
        "value_baseline_vs_float64": old_value / exact_value - 1.0,
        "value_current_vs_float64": new_value / exact_value - 1.0,
        "gradient_current_vs_baseline": gap(new_grad, old_grad),
        "gradient_baseline_vs_float64": gap(old_grad, exact_grad),
        "gradient_current_vs_float64": gap(new_grad, exact_grad),
    }
    return out


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


_TIME = "/usr/bin/time"
_LETTERS = "-ACDEFGHIKLMNPQRSTVWY"  # plmc's protein alphabet, gap first


def _timed(command, **kwargs):
    """Wall seconds and peak resident memory (MB) of a command.

    The peak is GNU time's ``%M`` where it exists, else ``wait4``'s
    ``ru_maxrss`` of the child.
    """
    with tempfile.TemporaryDirectory() as tmp:
        peak_file = Path(tmp) / "peak"
        use_time = os.access(_TIME, os.X_OK)
        full = [_TIME, "-f", "%M", "-o", str(peak_file), *command]
        start = time.perf_counter()
        child = subprocess.Popen(
            full if use_time else command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            **kwargs,
        )
        _, stderr = child.communicate()
        seconds = time.perf_counter() - start
        if child.returncode:
            raise RuntimeError(f"{command} failed: {stderr.decode()[-2000:]}")
        if use_time:
            peak_kb = int(peak_file.read_text().split()[-1])
        else:
            peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, peak_kb / 1e3


def _plmc_side_by_side(binary, workdir):
    """plmc and the contacts command on PF00014 and on a synthetic L = 100
    family, with plmc's protein settings and 100 iterations at most."""
    import gzip
    from importlib import resources

    folder = resources.files("sklearn_attn.datasets") / "data" / "PF00014"
    alignments = {"PF00014": Path(workdir) / "PF00014.fasta"}
    alignments["PF00014"].write_bytes(
        gzip.decompress((folder / "PF00014_mgap6.fasta.gz").read_bytes())
    )
    codes = markov_family(5000, 100, seed=4)
    alignments["synthetic_L100"] = Path(workdir) / "synthetic_L100.fasta"
    alignments["synthetic_L100"].write_text(
        "".join(
            f">s{k}\n{''.join(_LETTERS[c] for c in row)}\n"
            for k, row in enumerate(codes)
        )
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    results = []
    for name, path in alignments.items():
        scores = Path(workdir) / f"{name}.ec"
        plmc = [binary, "-le", "16", "-lh", "0.01", "-m", "100", "-t", "0.2"]
        plmc += ["-n", "2", "-c", str(scores), str(path)]
        out = Path(workdir) / f"contacts_{name}"
        ours = [sys.executable, "-m", "sklearn_attn", "contacts", str(path)]
        ours += ["--max-iter", "100", "--alpha-couplings", "16"]
        ours += ["--alpha-fields", "0.01", "--identity", "0.8"]
        ours += ["--output-dir", str(out), "--quiet"]
        for tool, command in (("plmc", plmc), ("sklearn_attn contacts", ours)):
            load = os.getloadavg()
            seconds, peak = _timed(command, env=env, cwd=workdir)
            row = {
                "alignment": name,
                "tool": tool,
                "command": " ".join(command),
                "wall_seconds": seconds,
                "peak_memory_mb": peak,
                "load_before": load,
            }
            if tool != "plmc":
                summary = json.loads((out / "summary.json").read_text())
                row.update(
                    iterations=summary["iterations"],
                    objective=summary["objective"],
                    timings_s=summary["timings_s"],
                )
            results.append(row)
            print(json.dumps(row), file=sys.stderr)
    return results


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
    parser.add_argument(
        "--baseline",
        help="a previous sklearn_attn/potts/_model.py, timed in turn with this one",
    )
    parser.add_argument("--plmc", help="a plmc binary: time it beside the command")
    parser.add_argument(
        "--plmc-only", action="store_true", help="with --plmc, only that comparison"
    )
    args = parser.parse_args(argv)
    sizes = [(40, 1000)] if args.quick else [(100, 5000), (202, 7500)]
    if args.plmc_only:
        sizes = []
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
        if args.baseline:
            run["baseline"] = _baseline_comparison(
                codes, weights, _load_baseline(args.baseline), args.repeats
            )
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
    if args.plmc:
        with tempfile.TemporaryDirectory() as workdir:
            report["plmc_side_by_side"] = _plmc_side_by_side(args.plmc, workdir)
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
