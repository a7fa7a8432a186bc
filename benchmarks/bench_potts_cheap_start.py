"""Does a cheap start save full-data iterations of the full Potts fit?

On a planted family (``make_potts_sequences``, q = 21, couplings on a random
regular graph of degree 3, plmc's reweighting at identity 0.8) and the
contacts command's settings (``alpha_couplings=16``, ``alpha_fields=0.01``, at
most 100 iterations, ``tol=1e-7``), measured in one process:

* the reference: the fit from plmc's start (zero couplings);
* for each fraction ``f``: a fit on a random ``f`` of the sequences with the
  penalties scaled by ``f`` (so that data and penalty keep their balance), to a
  loose tolerance, then the full-data fit warm-started from it; its
  iterations on the full data, its total time, and its final objective
  relative to the reference's.

Usage::

    python benchmarks/bench_potts_cheap_start.py            # L = 100
    python benchmarks/bench_potts_cheap_start.py --sizes 100 200
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info  # noqa: E402

from sklearn_attn import PottsPseudoLikelihood  # noqa: E402
from sklearn_attn.datasets import make_potts_sequences  # noqa: E402
from sklearn_attn.potts import sequence_weights  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "potts_cheap_start.json"
SETTINGS = dict(alpha_couplings=16.0, alpha_fields=0.01, max_iter=100, tol=1e-7)


def _fit(model, codes, weights):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(codes, sample_weight=weights)
    return time.perf_counter() - start


def run(n_sites, n_sequences, fractions, seed=0):
    codes, _ = make_potts_sequences(
        n_samples=n_sequences,
        n_sites=n_sites,
        n_states=21,
        graph="random_regular",
        degree=3,
        random_state=seed,
    )
    weights = sequence_weights(codes, identity_threshold=0.8, n_states=21)
    options = dict(parametrization="full", states=range(21))
    reference = PottsPseudoLikelihood(**options, **SETTINGS)
    seconds = _fit(reference, codes, weights)
    row = {
        "n_sites": n_sites,
        "n_sequences": n_sequences,
        "reference": {
            "seconds": seconds,
            "n_iter": reference.n_iter_,
            "objective": reference.objective_,
        },
        "subsample_starts": [],
    }
    rng = np.random.default_rng(seed)
    for fraction in fractions:
        kept = rng.choice(n_sequences, int(fraction * n_sequences), replace=False)
        model = PottsPseudoLikelihood(
            **options,
            **{
                **SETTINGS,
                "alpha_couplings": SETTINGS["alpha_couplings"] * fraction,
                "alpha_fields": SETTINGS["alpha_fields"] * fraction,
                "tol": 1e-5,
            },
            warm_start=True,
        )
        start_seconds = _fit(model, codes[kept], weights[kept])
        start_iter = model.n_iter_
        model.set_params(**SETTINGS)
        full_seconds = _fit(model, codes, weights)
        row["subsample_starts"].append(
            {
                "fraction": fraction,
                "start_seconds": start_seconds,
                "start_n_iter": start_iter,
                "full_n_iter": model.n_iter_,
                "total_seconds": start_seconds + full_seconds,
                "time_ratio_to_reference": (start_seconds + full_seconds) / seconds,
                "objective_relative_to_reference": (
                    model.objective_ - reference.objective_
                )
                / reference.objective_,
            }
        )
        print(json.dumps(row["subsample_starts"][-1]), flush=True)
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100])
    parser.add_argument("--n-sequences", type=int, default=5000)
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.1, 0.25])
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    record = {"machine": machine_info(), "settings": SETTINGS, "runs": []}
    for n_sites in args.sizes:
        record["runs"].append(run(n_sites, args.n_sequences, args.fractions))
    record["machine"]["load_average_after"] = machine_info()["load_average_1_5_15"]
    args.output.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
