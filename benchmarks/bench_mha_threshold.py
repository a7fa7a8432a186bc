"""Where learning a planted multi-head attention layer fails (issue 13).

Chen and Li (2024) learn ``F(X) = sum_i softmax(X Theta_i X^T) X W_i`` with a
cost that grows with the number of heads ``m``, under non-degeneracy
conditions; random planted instances are recovered to 1e-15 by L-BFGS from a
moderate number of samples (``reproduce mha``). This study maps the smallest
training size ``n`` at which :class:`~sklearn_attn.MultiHeadAttentionLearner`
(its defaults: L-BFGS, ``max_iter=1000``, ``n_init=4`` starts, stopping at the
first exact fit, ``alpha=0``) recovers the layer:

* **thresholds**: against ``m`` = 1..4 and two token dimensions ``d`` (4 and
  8, ``k = 6`` tokens), for Boolean and Gaussian inputs;
* **near-degenerate heads**: ``m = 2``, ``d = k = 6`` (the reproduction's
  sizes), the second head at Frobenius distance ``delta`` from the first
  (``make_attention_layer_regression(head_distance=delta)``, both heads of
  norm 2), ``delta`` in 1, 0.3, 0.1, 0.03, 0.01, against independent heads.

Recovery, at each ``n`` (the training sets of an instance are nested prefixes
of one pool, the test set is 1000 fresh sequences of the same layer):

* ``function``: test relative error ``||F_hat - F||^2 / ||F||^2 <= 1e-6``,
  the success criterion of ``reproduce mha``;
* ``parameters``: after matching heads (:func:`~sklearn_attn.attention.match_heads`),
  the relative errors of the stacked ``Theta_i`` and of the stacked ``W_i``
  both ``<= 1e-3``.

Each threshold is found by bisection over the log grid 2, 3, 4, 6, 8, 11, 16,
..., 512 (ratio ~sqrt(2); up to 256 for the near-degenerate heads), assuming
success is monotone in ``n``; every fit
is cached and reused by both criteria, and the fits evaluated above a
threshold that failed anyway are counted (``violations``: a non-zero count
means the threshold is not sharp). A threshold above the grid is reported as
``inf`` (censored). ``n_count = ceil(2 m d / k)`` is the counting bound (the
``2 m d^2`` parameters over the ``k d`` equations of a sample). Each cell has
``n_seeds`` instances (new layer, data and starts); the table gives the
median, min and max threshold, the starts the learner ran at the threshold
(``n_init_run_``: 1 means the first start fitted exactly) and the seconds of
that fit.

Results go to ``benchmarks/results/mha_threshold.json``.

Usage::

    python benchmarks/bench_mha_threshold.py --n-jobs 2    # default, 66 instances
    python benchmarks/bench_mha_threshold.py --quick       # under a minute
    # near-degenerate heads with a longer budget (mha_threshold_long.json):
    python benchmarks/bench_mha_threshold.py --study degenerate --n-jobs 2 \
        --distances 0.1 0.03 0.01 --max-iter 10000 --grid 16 64 256 \
        --out benchmarks/results/mha_threshold_long.json

The default took 8.5 minutes with ``--n-jobs 2`` on two cores shared with
other jobs (load average 8-10; 990 s of instance time, 570 s of it the
thresholds); ``--grid 2 3 4 6 8 11 16 23 32 45 64 91 128 181 256 362 512 724
1024`` (both studies up to 1024, mha_threshold_n1024.json) took 13 minutes.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import machine_info  # noqa: E402

from sklearn_attn.attention._learner import (  # noqa: E402
    MultiHeadAttentionLearner,
    match_heads,
)
from sklearn_attn.datasets._attention import (  # noqa: E402
    make_attention_layer_regression,
)

INPUTS = ("boolean", "gaussian")
CRITERIA = ("function", "parameters")
# reproduce mha's success criterion (noiseless data: recovered layers reach
# 1e-15 and below).
FUNCTION_TOL = 1e-6
PARAMETER_TOL = 1e-3
# sqrt(2)-spaced sizes.
GRID = (2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64, 91, 128, 181, 256, 362, 512, 724, 1024)

_DEFAULT_CONFIG = {
    "studies": ("thresholds", "degenerate"),
    "n_seeds": 3,
    "n_test": 1000,
    "theta_norm": 2.0,
    # sqrt(2)-spaced sizes up to 512 for the thresholds (all below 64 in our
    # runs); up to 256 for the near-degenerate heads, whose failing fits run
    # every start to max_iter and cost most (n = 1024 there: see the results
    # notes).
    "grid": tuple(n for n in GRID if n <= 512),
    "learner": {},  # MultiHeadAttentionLearner defaults, overridable
    "thresholds": {
        "n_heads": (1, 2, 3, 4),
        "token_dims": (4, 8),
        "n_tokens": 6,
        "inputs": INPUTS,
    },
    "degenerate": {
        "n_heads": 2,
        "token_dim": 6,
        "n_tokens": 6,
        "inputs": "boolean",
        "distances": (None, 1.0, 0.3, 0.1, 0.03, 0.01),
        "grid": tuple(n for n in GRID if n <= 256),
    },
}
_QUICK_CONFIG = {
    **_DEFAULT_CONFIG,
    "n_seeds": 2,
    "n_test": 500,
    "grid": tuple(n for n in GRID if n <= 128),
    "thresholds": {
        "n_heads": (1, 2),
        "token_dims": (4,),
        "n_tokens": 4,
        "inputs": INPUTS,
    },
    "degenerate": {
        "n_heads": 2,
        "token_dim": 4,
        "n_tokens": 4,
        "inputs": "boolean",
        "distances": (None, 0.1),
        "grid": tuple(n for n in GRID if n <= 64),
    },
}


def default_mha_threshold_config(quick=False):
    """A deep copy of the default (or quick) settings of :func:`run_mha_threshold`."""
    return copy.deepcopy(_QUICK_CONFIG if quick else _DEFAULT_CONFIG)


def _seeds(random_state, *keys):
    """Three independent integer seeds (data, test, starts) from SeedSequence."""
    entropy = [int(random_state), *(int(k) for k in keys)]
    return [int(s) for s in np.random.SeedSequence(entropy).generate_state(3)]


def _relative_error(pred, target):
    return float(np.sum((pred - target) ** 2) / np.sum(target**2))


class _Instance:
    """One planted layer, its pool of training data, its test set and fits."""

    def __init__(self, spec, cfg, random_state):
        self.spec, self.cfg = spec, cfg
        data_seed, test_seed, self.start_seed = _seeds(random_state, *spec["keys"])
        shape = dict(
            n_heads=spec["m"],
            n_tokens=spec["k"],
            token_dim=spec["d"],
            inputs=spec["inputs"],
        )
        self.X, self.Y, self.layer = make_attention_layer_regression(
            max(spec["grid"]),
            **shape,
            theta_norm=cfg["theta_norm"],
            head_distance=spec.get("delta"),
            random_state=data_seed,
        )
        self.X_test, self.Y_test, _ = make_attention_layer_regression(
            cfg["n_test"], **shape, layer=self.layer, random_state=test_seed
        )
        self.fits = {}

    def fit(self, n):
        """Errors of the learner on the first ``n`` samples (cached)."""
        if n in self.fits:
            return self.fits[n]
        model = MultiHeadAttentionLearner(
            self.spec["m"], random_state=self.start_seed, **self.cfg["learner"]
        )
        start = time.perf_counter()
        with warnings.catch_warnings():
            # Below the threshold fits may stop at max_iter; the errors say
            # how good they are.
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(self.X[:n], self.Y[:n])
        seconds = time.perf_counter() - start
        match = match_heads(
            model.theta_, model.values_, self.layer.theta, self.layer.values
        )
        error = _relative_error(model.predict(self.X_test), self.Y_test)
        self.fits[n] = row = {
            "n": int(n),
            "test_error": error,
            "theta_error": float(match.theta_error),
            "values_error": float(match.values_error),
            "n_init_run": int(model.n_init_run_),
            "n_iter": [int(i) for i in model.init_n_iter_],
            "seconds": seconds,
            "function": bool(error <= FUNCTION_TOL),
            "parameters": bool(
                max(match.theta_error, match.values_error) <= PARAMETER_TOL
            ),
        }
        return row


def _bisect(instance, grid, criterion):
    """Index of the smallest grid size that succeeds (len(grid) if none),
    assuming success is monotone in ``n``."""
    if not instance.fit(grid[-1])[criterion]:
        return len(grid)
    lo, hi = -1, len(grid) - 1  # grid[lo] fails (virtually for -1), grid[hi] succeeds
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if instance.fit(grid[mid])[criterion]:
            hi = mid
        else:
            lo = mid
    return hi


def _one_instance(spec, cfg, random_state):
    """Thresholds of one instance under both criteria, and every fit run."""
    with threadpool_limits(1):
        instance = _Instance(spec, cfg, random_state)
        grid = sorted(int(n) for n in spec["grid"])
        start = time.perf_counter()
        out = {k: v for k, v in spec.items() if k not in ("keys", "grid")}
        out["seed"] = spec["keys"][-1]
        for criterion in CRITERIA:
            index = _bisect(instance, grid, criterion)
            threshold = grid[index] if index < len(grid) else math.inf
            at = instance.fits.get(threshold)
            out[f"threshold_{criterion}"] = threshold
            out[f"starts_{criterion}"] = at["n_init_run"] if at else None
            out[f"seconds_{criterion}"] = at["seconds"] if at else None
            out[f"violations_{criterion}"] = sum(
                1
                for row in instance.fits.values()
                if row["n"] > threshold and not row[criterion]
            )
        out["fits"] = [instance.fits[n] for n in sorted(instance.fits)]
        out["seconds"] = time.perf_counter() - start
    return out


def _specs(cfg):
    th, dg = cfg["thresholds"], cfg["degenerate"]
    specs = []
    studies = cfg["studies"]
    for inputs in th["inputs"] if "thresholds" in studies else ():
        for d in th["token_dims"]:
            for m in th["n_heads"]:
                for seed in range(cfg["n_seeds"]):
                    specs.append(
                        {
                            "study": "thresholds",
                            "inputs": inputs,
                            "m": int(m),
                            "d": int(d),
                            "k": int(th["n_tokens"]),
                            "keys": (0, INPUTS.index(inputs), d, m, seed),
                            "grid": tuple(cfg["grid"]),
                        }
                    )
    for delta in dg["distances"] if "degenerate" in studies else ():
        for seed in range(cfg["n_seeds"]):
            # The same keys for every delta: one layer, pool and starts per
            # seed, with only Theta_2 moved (head_distance draws nothing).
            specs.append(
                {
                    "study": "degenerate",
                    "inputs": dg["inputs"],
                    "m": int(dg["n_heads"]),
                    "d": int(dg["token_dim"]),
                    "k": int(dg["n_tokens"]),
                    "delta": None if delta is None else float(delta),
                    "keys": (1, INPUTS.index(dg["inputs"]), seed),
                    "grid": tuple(dg.get("grid", cfg["grid"])),
                }
            )
    return specs


def _stats(values):
    values = np.asarray(values, dtype=float)
    return float(np.median(values)), float(np.min(values)), float(np.max(values))


def _summary(rows):
    cells = {}
    for row in rows:
        key = (row["study"], row["inputs"], row["d"], row["k"], row["m"])
        key += (row.get("delta", "-"),)
        cells.setdefault(key, []).append(row)
    out = []
    for (study, inputs, d, k, m, delta), sel in cells.items():
        line = {
            "study": study,
            "inputs": inputs,
            "m": m,
            "d": d,
            "k": k,
            "n_count": math.ceil(2 * m * d / k),
            "n_seeds": len(sel),
            "fits": int(sum(len(r["fits"]) for r in sel)),
            "seconds": float(sum(r["seconds"] for r in sel)),
        }
        if study == "degenerate":
            line["delta"] = delta
        for criterion in CRITERIA:
            values = [r[f"threshold_{criterion}"] for r in sel]
            med, lo, hi = _stats(values)
            line[f"threshold_{criterion}_median"] = med
            line[f"threshold_{criterion}_min"] = lo
            line[f"threshold_{criterion}_max"] = hi
            line[f"recovered_{criterion}"] = int(sum(np.isfinite(values)))
            starts = [r[f"starts_{criterion}"] for r in sel if r[f"starts_{criterion}"]]
            secs = [r[f"seconds_{criterion}"] for r in sel if r[f"seconds_{criterion}"]]
            line[f"starts_{criterion}_median"] = (
                float(np.median(starts)) if starts else None
            )
            line[f"seconds_{criterion}_median"] = (
                float(np.median(secs)) if secs else None
            )
            line[f"violations_{criterion}"] = int(
                sum(r[f"violations_{criterion}"] for r in sel)
            )
        # Errors at the largest size, where every instance was fitted.
        largest = [max(r["fits"], key=lambda f: f["n"]) for r in sel]
        for name in ("test_error", "theta_error", "values_error"):
            line[f"{name}_at_max_median"] = float(np.median([f[name] for f in largest]))
        line["n_max"] = int(largest[0]["n"])
        out.append(line)
    return out


def run_mha_threshold(
    config=None, *, quick=False, random_state=0, n_jobs=None, progress=None
):
    """Recovery thresholds of planted multi-head attention layers.

    Parameters
    ----------
    config : dict, default=None
        Overrides of ``default_mha_threshold_config(quick)``; the nested dicts
        ``"thresholds"``, ``"degenerate"`` and ``"learner"`` (keyword
        arguments of the learner, e.g. ``{"max_iter": 10000}``) are merged;
        ``"studies"`` (default both) selects ``"thresholds"`` and/or
        ``"degenerate"``.
    quick : bool, default=False
        Reduced settings (``d = k = 4``, ``m`` in {1, 2}, sizes up to 128, two
        seeds, ``delta`` in {None, 0.1}): about a minute.
    random_state : int, default=0
        Master seed; every instance's seeds derive from it and its keys.
    n_jobs : int, default=None
        Joblib workers over the instances (each fit on one BLAS thread); the
        results do not depend on it.
    progress : callable, default=None
        Receives a line per instance; ``None`` prints to standard error.

    Returns
    -------
    tables : dict
        ``"instances"``: one row per instance (study, inputs, ``m``, ``d``,
        ``k``, ``delta``, seed) with both thresholds, the starts and seconds of
        the fit at each, the violations and every fit run (``n``, test,
        ``Theta`` and ``W`` errors, starts, iterations, seconds).
        ``"summary"``: one row per cell, median / min / max thresholds over
        the seeds, ``recovered_*`` (instances with a finite threshold), median
        starts and seconds at the threshold, the counting bound ``n_count``,
        the median errors at the largest size, and the cell's fits and seconds.
    """
    cfg = default_mha_threshold_config(quick)
    for key, value in (config or {}).items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key].update(value)
        else:
            cfg[key] = value
    report = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    specs = _specs(cfg)
    outputs = Parallel(n_jobs=n_jobs, return_as="generator")(
        delayed(_one_instance)(spec, cfg, random_state) for spec in specs
    )
    rows = []
    for count, row in enumerate(outputs, 1):
        rows.append(row)
        report(
            f"[{count}/{len(specs)}] {row['study']} {row['inputs']} m={row['m']} "
            f"d={row['d']} k={row['k']} delta={row.get('delta', '-')} seed "
            f"{row['seed']}: n* function {row['threshold_function']}, parameters "
            f"{row['threshold_parameters']} ({len(row['fits'])} fits, "
            f"{row['seconds']:.1f} s)"
        )
    return {"instances": rows, "summary": _summary(rows)}


def _n(value):
    return ">max" if not np.isfinite(value) else f"{value:g}"


def format_mha_threshold_tables(tables):
    """Plain-text tables: thresholds against ``m`` and ``d``; against ``delta``."""

    def table(header, lines):
        widths = [
            max(len(str(x)) for x in col) for col in zip(header, *lines, strict=True)
        ]
        text = [
            " | ".join(str(s).ljust(w) for s, w in zip(header, widths, strict=True))
        ]
        text.append("-+-".join("-" * w for w in widths))
        text += [
            " | ".join(str(s).ljust(w) for s, w in zip(li, widths, strict=True))
            for li in lines
        ]
        return "\n".join(text)

    def thr(row, criterion):
        return (
            f"{_n(row[f'threshold_{criterion}_median'])} "
            f"[{_n(row[f'threshold_{criterion}_min'])}, "
            f"{_n(row[f'threshold_{criterion}_max'])}]"
        )

    def extra(row, criterion):
        starts = row[f"starts_{criterion}_median"]
        secs = row[f"seconds_{criterion}_median"]
        return (
            "-" if starts is None else f"{starts:g}",
            "-" if secs is None else f"{secs:.2f}",
        )

    summary = tables["summary"]
    blocks = []
    rows = [r for r in summary if r["study"] == "thresholds"]
    if rows:
        lines = []
        for r in rows:
            lines.append(
                [
                    r["inputs"],
                    r["d"],
                    r["m"],
                    r["n_count"],
                    thr(r, "function"),
                    *extra(r, "function"),
                    thr(r, "parameters"),
                    r["violations_function"] + r["violations_parameters"],
                    f"{r['seconds']:.0f}",
                ]
            )
        header = [
            "inputs",
            "d",
            "m",
            "n_count",
            "n* function med [min, max]",
            "starts at n*",
            "s at n*",
            "n* parameters med [min, max]",
            "violations",
            "cell s",
        ]
        k = rows[0]["k"]
        blocks.append(
            f"Recovery thresholds (k = {k} tokens, {rows[0]['n_seeds']} seeds per "
            "cell; function: test rel. error <= 1e-6; parameters: matched Theta "
            "and W errors <= 1e-3)\n" + table(header, lines)
        )
    rows = [r for r in summary if r["study"] == "degenerate"]
    if rows:
        lines = []
        for r in rows:
            delta = "independent" if r["delta"] is None else f"{r['delta']:g}"
            lines.append(
                [
                    delta,
                    thr(r, "function"),
                    f"{r['recovered_function']}/{r['n_seeds']}",
                    thr(r, "parameters"),
                    f"{r['recovered_parameters']}/{r['n_seeds']}",
                    *extra(r, "parameters"),
                    f"{r['theta_error_at_max_median']:.1e}",
                    f"{r['values_error_at_max_median']:.1e}",
                    f"{r['test_error_at_max_median']:.1e}",
                    f"{r['seconds']:.0f}",
                ]
            )
        header = [
            "delta",
            "n* function",
            "recovered",
            "n* parameters",
            "recovered",
            "starts at n*",
            "s at n*",
            "Theta err @max",
            "W err @max",
            "test err @max",
            "cell s",
        ]
        r0 = rows[0]
        blocks.append(
            f"Near-degenerate heads (m = {r0['m']}, d = {r0['d']}, k = {r0['k']}, "
            f"{r0['inputs']}; ||Theta_2 - Theta_1||_F = delta, ||Theta_i||_F = 2; "
            f"errors at n = {r0['n_max']}, medians over {r0['n_seeds']} seeds)\n"
            + table(header, lines)
        )
    return "\n\n".join(blocks)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--n-seeds", type=int, default=None)
    parser.add_argument("--n-jobs", type=int, default=None)
    parser.add_argument("--random-state", type=int, default=0)
    parser.add_argument(
        "--study", choices=("thresholds", "degenerate"), nargs="+", default=None
    )
    parser.add_argument("--max-iter", type=int, default=None, help="of the learner")
    parser.add_argument("--tol", type=float, default=None, help="of the learner")
    parser.add_argument("--grid", type=int, nargs="+", default=None, help="sizes n")
    parser.add_argument("--distances", type=float, nargs="+", default=None)
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "benchmarks" / "results" / "mha_threshold.json",
    )
    args = parser.parse_args(argv)
    config = {} if args.n_seeds is None else {"n_seeds": args.n_seeds}
    if args.study is not None:
        config["studies"] = tuple(args.study)
    learner = {"max_iter": args.max_iter, "tol": args.tol}
    learner = {key: value for key, value in learner.items() if value is not None}
    if learner:
        config["learner"] = learner
    if args.grid is not None:  # for both studies
        config["grid"] = tuple(args.grid)
        config["degenerate"] = {"grid": tuple(args.grid)}
    if args.distances is not None:
        config.setdefault("degenerate", {})["distances"] = tuple(args.distances)
    start = time.perf_counter()
    tables = run_mha_threshold(
        config, quick=args.quick, random_state=args.random_state, n_jobs=args.n_jobs
    )
    total = time.perf_counter() - start
    print(format_mha_threshold_tables(tables))
    cfg = default_mha_threshold_config(args.quick)
    for key, value in config.items():
        if isinstance(value, dict):
            cfg[key].update(value)
        else:
            cfg[key] = value
    out = {
        "benchmark": "recovery thresholds of planted attention layers (issue 13)",
        "machine": machine_info(),
        "settings": {
            **cfg,
            "random_state": args.random_state,
            "n_jobs": args.n_jobs,
            "quick": args.quick,
            "function_tol": FUNCTION_TOL,
            "parameter_tol": PARAMETER_TOL,
        },
        **tables,
        "total_seconds": total,
    }
    if not args.quick:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1, default=float) + "\n")
        print(f"wrote {args.out}")
    print(f"total {total:.0f} s")


if __name__ == "__main__":
    main()
