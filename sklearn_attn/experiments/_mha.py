"""Reproduction: learning planted multi-head attention layers (Chen and Li, 2024).

Planted layers ``F(X) = sum_i softmax(X Theta_i X^T) X W_i`` with ``m`` in
{1, 2, 3} heads label Boolean token sequences
(:func:`~sklearn_attn.datasets.make_attention_layer_regression`). For each
``m`` and number of training samples ``n`` three models are compared on a fresh
test set by the relative error ``||F_hat - F||^2 / ||F||^2``:

* ``learner``: :class:`~sklearn_attn.MultiHeadAttentionLearner` with ``m`` heads
  (its default settings: L-BFGS, several starts, exact refit of the ``W_i``);
* ``too_few_heads``: the same with ``m - 1`` heads (for ``m >= 2``);
* ``uniform_linear``: uniform attention, ``Y_a = mean_b(x_b) B``, ``B`` fitted by
  least squares.

Every repetition plants a new layer; the training sets of one repetition are
nested prefixes of one pool and the test set is shared by all ``n``.
"""

from __future__ import annotations

import copy
import math
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from ..attention import MultiHeadAttentionLearner, match_heads
from ..datasets import make_attention_layer_regression
from ._common import (
    Progress,
    _caption,
    _curve,
    _figure,
    _figure_legend,
    _log_axis,
    _save,
    _seeds_text,
    format_table,
    run_tasks,
    seed_pair,
    summarize,
)

__all__ = ["default_mha_config", "format_mha_summary", "plot_mha", "run_mha"]

MODELS = ("learner", "too_few_heads", "uniform_linear")
INPUTS = ("boolean", "gaussian")
CRITERIA = ("function", "parameters")
# sqrt(2)-spaced training sizes of the recovery thresholds.
GRID = (2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64, 91, 128, 181, 256, 362, 512, 724, 1024)

# A start counts as a success below this test relative error (noiseless data:
# recovered layers reach 1e-15 and below, failures stay above 1e-3).
_SUCCESS = 1e-6
# The thresholds' criteria: the function (test relative error, as above) and
# the parameters (relative errors of the matched Theta_i and W_i).
FUNCTION_TOL = _SUCCESS
PARAMETER_TOL = 1e-3

# Defaults from pilot runs on a 2-core machine. d = k = 6 (sizes of the paper
# notes' pilots) give 2 m d^2 = 72 m parameters and k d = 36 equations per
# sample, so n = 2 m samples are needed to pin the parameters down. With
# ||Theta_i||_F = 2 and noiseless labels the pilot recovered the layer exactly
# (test error ~1e-15) from n = 8 for m = 1, 2 and n = 16 for m = 3, so the
# sizes start at 2 to show the threshold; the default run took ~70 s.
_DEFAULT_CONFIG = {
    "n_seeds": 3,
    "n_test": 2000,
    "token_dim": 6,
    "n_tokens": 6,
    "n_heads": (1, 2, 3),
    "theta_norm": 2.0,
    "noise": 0.0,
    "train_sizes": (2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256, 512, 1024),
    # Where recovery fails (benchmarks/bench_mha_threshold.py has the longer
    # study): the smallest n that recovers the layer, by bisection over
    # GRID, against m and d for both inputs, and for two heads at distance
    # delta. Every threshold of the benchmark's grid up to 512 was at most
    # 32 (near-degenerate heads: 16, or none for the parameters), so the
    # grid stops at 128, which keeps the default under ten minutes. ``None``
    # leaves a study out.
    "thresholds": {
        "n_heads": (1, 2, 3, 4),
        "token_dims": (4, 8),
        "n_tokens": 6,
        "inputs": INPUTS,
        "grid": tuple(n for n in GRID if n <= 128),
        "n_seeds": 3,
        "n_test": 1000,
    },
    "degenerate": {
        "n_heads": 2,
        "token_dim": 6,
        "n_tokens": 6,
        "inputs": "boolean",
        "distances": (None, 1.0, 0.3, 0.1, 0.03, 0.01),
        "grid": tuple(n for n in GRID if n <= 128),
        "n_seeds": 3,
        "n_test": 1000,
    },
    "learner": {},  # keyword arguments of the thresholds' learner
}

_QUICK_CONFIG = {
    "n_seeds": 2,
    "n_test": 1000,
    "token_dim": 4,
    "n_tokens": 4,
    "n_heads": (1, 2),
    "theta_norm": 2.0,
    "noise": 0.0,
    "train_sizes": (2, 4, 8, 32, 128, 512),
    "thresholds": {
        "n_heads": (1, 2),
        "token_dims": (4,),
        "n_tokens": 4,
        "inputs": INPUTS,
        "grid": tuple(n for n in GRID if n <= 32),
        "n_seeds": 2,
        "n_test": 500,
    },
    "degenerate": None,  # the default run's sweep only
    "learner": {},
}


def default_mha_config(quick=False):
    """A deep copy of the default (or ``quick``) settings of :func:`run_mha`."""
    return copy.deepcopy(_QUICK_CONFIG if quick else _DEFAULT_CONFIG)


def _relative_error(pred, target):
    return float(np.sum((pred - target) ** 2) / np.sum(target**2))


def _seeds(random_state, *keys):
    """Three independent integer seeds (data, test, starts) from SeedSequence."""
    entropy = [int(random_state), *(int(k) for k in keys)]
    return [int(s) for s in np.random.SeedSequence(entropy).generate_state(3)]


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
            spec["n_test"], **shape, layer=self.layer, random_state=test_seed
        )
        self.fits = {}

    def fit(self, n):
        """Errors of the learner on the first ``n`` samples (cached)."""
        if n in self.fits:
            return self.fits[n]
        model = MultiHeadAttentionLearner(
            self.spec["m"], random_state=self.start_seed, **self.cfg.get("learner", {})
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


def _threshold_instance(spec, cfg, random_state):
    """Thresholds of one instance under both criteria, and every fit run."""
    with threadpool_limits(1):
        instance = _Instance(spec, cfg, random_state)
        grid = sorted(int(n) for n in spec["grid"])
        start = time.perf_counter()
        out = {k: v for k, v in spec.items() if k not in ("keys", "grid", "n_test")}
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


def _instance_row(out):
    """A CSV row of one instance: its thresholds, and its fits in brief."""
    row = {k: v for k, v in out.items() if k != "fits"}
    row.setdefault("delta", None)
    row["n_fits"] = len(out["fits"])
    row["fitted_sizes"] = " ".join(str(f["n"]) for f in out["fits"])
    largest = max(out["fits"], key=lambda f: f["n"])
    for name in ("test_error", "theta_error", "values_error"):
        row[f"{name}_at_max"] = largest[name]
    row["n_max"] = largest["n"]
    return row


def _specs(cfg):
    """The instances of the threshold studies (those not ``None`` in ``cfg``)."""
    th, dg = cfg.get("thresholds"), cfg.get("degenerate")
    specs = []
    for inputs in th["inputs"] if th else ():
        for d in th["token_dims"]:
            for m in th["n_heads"]:
                for seed in range(th["n_seeds"]):
                    specs.append(
                        {
                            "study": "thresholds",
                            "inputs": inputs,
                            "m": int(m),
                            "d": int(d),
                            "k": int(th["n_tokens"]),
                            "keys": (0, INPUTS.index(inputs), d, m, seed),
                            "grid": tuple(th["grid"]),
                            "n_test": int(th["n_test"]),
                            "theta_norm": float(cfg["theta_norm"]),
                        }
                    )
    for delta in dg["distances"] if dg else ():
        for seed in range(dg["n_seeds"]):
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
                    "grid": tuple(dg["grid"]),
                    "n_test": int(dg["n_test"]),
                    "theta_norm": float(cfg["theta_norm"]),
                }
            )
    return specs


def _stats(values):
    values = np.asarray(values, dtype=float)
    return float(np.median(values)), float(np.min(values)), float(np.max(values))


def _threshold_summary(rows):
    """One row per cell: thresholds over the seeds (median, min, max)."""
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
            "theta_norm": sel[0]["theta_norm"],
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


def _uniform_linear(X, Y, X_test):
    """Least squares for ``Y_a = mean_b(x_b) B``: every token gets the same output,
    so this is least squares of the token-averaged targets on the averaged inputs."""
    B = np.linalg.lstsq(X.mean(axis=1), Y.mean(axis=1), rcond=None)[0]
    return np.repeat((X_test.mean(axis=1) @ B)[:, None, :], X_test.shape[1], axis=1)


def _one_instance(m, seed, cfg, random_state):
    """Errors of every model at every n on one planted layer; a list of dicts."""
    data_seed, weight_seed = seed_pair(random_state, m, seed)
    test_seed, _ = seed_pair(random_state, m, seed, 1)
    sizes = sorted(int(s) for s in cfg["train_sizes"])
    shape = dict(n_heads=m, n_tokens=cfg["n_tokens"], token_dim=cfg["token_dim"])
    X_pool, Y_pool, layer = make_attention_layer_regression(
        sizes[-1],
        **shape,
        theta_norm=cfg["theta_norm"],
        noise=cfg["noise"],
        random_state=data_seed,
    )
    X_test, Y_test, _ = make_attention_layer_regression(
        cfg["n_test"], **shape, layer=layer, random_state=test_seed
    )
    results = []
    for n in sizes:
        X, Y = X_pool[:n], Y_pool[:n]
        for name, n_heads in (("learner", m), ("too_few_heads", m - 1)):
            if n_heads < 1:
                continue
            start = time.perf_counter()
            model = MultiHeadAttentionLearner(n_heads, random_state=weight_seed)
            with warnings.catch_warnings():
                # Tiny n and too few heads may stop at max_iter; the error says
                # how good the fit is.
                warnings.simplefilter("ignore", ConvergenceWarning)
                model.fit(X, Y)
            seconds = time.perf_counter() - start
            error = _relative_error(model.predict(X_test), Y_test)
            theta_error = np.nan
            if name == "learner":
                theta_error = match_heads(
                    model.theta_, model.values_, layer.theta, layer.values
                ).theta_error
            results.append(
                {
                    "model": name,
                    "m": m,
                    "n_train": n,
                    "error": error,
                    "theta_error": theta_error,
                    "seconds": seconds,
                    "n_fit_heads": n_heads,
                }
            )
        start = time.perf_counter()
        error = _relative_error(_uniform_linear(X, Y, X_test), Y_test)
        results.append(
            {
                "model": "uniform_linear",
                "m": m,
                "n_train": n,
                "error": error,
                "theta_error": np.nan,
                "seconds": time.perf_counter() - start,
                "n_fit_heads": 0,
            }
        )
    return results


def run_mha(
    *,
    quick=False,
    n_seeds=None,
    random_state=0,
    progress=None,
    n_jobs=None,
    config=None,
):
    """Learn planted multi-head attention layers: test error against ``n``.

    For ``m`` in ``config["n_heads"]`` (default 1, 2, 3) and every training
    size ``n``, fits :class:`~sklearn_attn.MultiHeadAttentionLearner` with
    ``m`` heads, the same with ``m - 1`` heads, and a uniform-attention linear
    baseline ``Y_a = mean_b(x_b) B`` on noiseless Boolean data from a planted
    layer (``||Theta_i||_F = 2``, ``W_i`` with ``N(0, 1/d)`` entries), and
    measures the test relative error ``||F_hat - F||^2 / ||F||^2`` on fresh
    samples. Then maps where recovery fails: the smallest ``n`` that recovers
    the layer against ``m`` (1 to 4) and ``d`` (4 and 8), for Boolean and
    Gaussian inputs, and for two nearly degenerate heads against their
    distance (``make_attention_layer_regression(head_distance=delta)``).

    Parameters
    ----------
    quick : bool, default=False
        Reduced settings (``d = k = 4``, ``m`` in {1, 2}, six sizes, two
        repetitions; thresholds for ``d = k = 4``, ``m`` in {1, 2}, ``n`` up
        to 32, two seeds, no near-degenerate sweep). The measured times are
        in the user guide (:ref:`reproducing`).
    n_seeds : int, default=None
        Repetitions (new planted layer, data and starts each); ``None`` uses
        the setting's default (3, or 2 with ``quick``).
    random_state : int, default=0
        Master seed; all data and start seeds are derived from it.
    progress : callable, None or False, default=None
        Where progress lines go: ``None`` prints them to standard error,
        ``False`` drops them, a callable receives each line.
    n_jobs : int, default=None
        Repetitions run in parallel with
        :class:`sklearn.utils.parallel.Parallel` (``None``: one at a time,
        each fit using all cores).
    config : dict, default=None
        Overrides of ``default_mha_config(quick)``, e.g. ``{"n_heads": (2,)}``;
        the nested ``"thresholds"``, ``"degenerate"`` and ``"learner"`` (the
        thresholds' learner's keyword arguments) are merged, and ``None``
        for ``"thresholds"`` or ``"degenerate"`` leaves that study out.
        ``n_seeds`` counts the learning curves' repetitions; the thresholds
        have their own (``config["thresholds"]["n_seeds"]``, 3).

    Returns
    -------
    tables : dict
        ``"learning_curves"``: a list of dict rows with keys ``model``
        ({"learner", "too_few_heads", "uniform_linear"}), ``m``, ``d``, ``k``,
        ``n_train``, ``n_fit_heads``, ``error_mean``, ``error_std``,
        ``error_median``, ``error_min``, ``error_max`` (test relative errors
        over the repetitions), ``success_rate`` (share of repetitions with
        error at most 1e-6), ``theta_error_median`` (relative error of the
        attention matrices after matching heads; learner only),
        ``fit_seconds_mean`` and ``n_seeds``.
        ``"thresholds"``: where recovery fails, one row per cell (``inputs``
        Boolean or Gaussian, ``m``, ``d``, ``k``), over ``n_seeds`` instances
        (new layer, data and starts each): the smallest training size of the
        grid that recovers the layer, found by bisection (assuming success
        is monotone in ``n``), under two criteria, ``function`` (test
        relative error at most 1e-6) and ``parameters`` (matched ``Theta_i``
        and ``W_i`` relative errors at most 1e-3): ``threshold_*_median``,
        ``_min``, ``_max`` (``inf`` above the grid), ``recovered_*``
        (instances with a finite threshold), ``starts_*_median`` (starts
        the learner ran at the threshold, ``n_init_run_``) and
        ``seconds_*_median`` (that fit's time), ``violations_*`` (fits above
        the threshold that failed: non-zero means it is not sharp), the
        counting bound ``n_count = ceil(2 m d / k)``, the median errors at
        the largest size ``n_max``, and the cell's ``fits`` and ``seconds``.
        ``"degenerate"``: the same for two heads at Frobenius distance
        ``delta`` (``None``: independent heads). ``"threshold_instances"``:
        one row per instance, with its thresholds, ``n_fits`` and the
        ``fitted_sizes``.

    See Also
    --------
    plot_mha : Draw the table.

    Examples
    --------
    >>> from sklearn_attn.experiments import run_mha
    >>> tables = run_mha(quick=True, progress=False)  # doctest: +SKIP
    >>> sorted(tables)  # doctest: +SKIP
    ['degenerate', 'learning_curves', 'threshold_instances', 'thresholds']
    """
    cfg = default_mha_config(quick)
    for key, value in (config or {}).items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key].update(value)
        else:
            cfg[key] = value
    n_seeds = cfg["n_seeds"] if n_seeds is None else n_seeds
    if int(n_seeds) < 1:
        raise ValueError(f"n_seeds must be a positive integer; got {n_seeds!r}.")
    n_seeds = int(n_seeds)
    report = Progress(progress, prefix="[mha] ")
    report(
        f"planted layers, d={cfg['token_dim']}, k={cfg['n_tokens']}, m in "
        f"{list(cfg['n_heads'])}, n in {list(cfg['train_sizes'])}, {n_seeds} seeds"
    )
    jobs = [(int(m), seed) for m in cfg["n_heads"] for seed in range(n_seeds)]
    specs = _specs(cfg)
    # One grid: the learning curves' repetitions, then the thresholds'
    # instances (each carries its own seeds).
    outputs = run_tasks(
        [(_one_instance, m, seed, cfg, random_state) for m, seed in jobs]
        + [(_threshold_instance, spec, cfg, random_state) for spec in specs],
        n_jobs=n_jobs,
    )
    collected = []
    for count, (m, seed) in enumerate(jobs, 1):
        results = next(outputs)
        collected.extend(results)
        largest = max(r["n_train"] for r in results)
        final = {r["model"]: r["error"] for r in results if r["n_train"] == largest}
        report(
            f"[{count}/{len(jobs)}] m={m} seed {seed}: error at n={largest} "
            + ", ".join(f"{k} {v:.2g}" for k, v in final.items())
        )
    instances = []
    for count, spec in enumerate(specs, 1):
        out = next(outputs)
        instances.append(out)
        delta = "" if spec.get("delta") is None else f" delta={spec['delta']:g}"
        report(
            f"[{count}/{len(specs)}] {spec['study']} {spec['inputs']} m={spec['m']} "
            f"d={spec['d']} k={spec['k']}{delta} seed {spec['keys'][-1]}: n* "
            f"function {out['threshold_function']}, parameters "
            f"{out['threshold_parameters']} ({len(out['fits'])} fits, "
            f"{out['seconds']:.1f} s)"
        )
    summary = _threshold_summary(instances)
    report("done")
    return {
        "learning_curves": _aggregate(collected, cfg),
        "thresholds": [r for r in summary if r["study"] == "thresholds"],
        "degenerate": [r for r in summary if r["study"] == "degenerate"],
        "threshold_instances": [_instance_row(out) for out in instances],
    }


def _aggregate(results, cfg):
    rows = []
    keys = list(dict.fromkeys((r["m"], r["model"], r["n_train"]) for r in results))
    for m, model, n in sorted(
        keys, key=lambda key: (key[0], MODELS.index(key[1]), key[2])
    ):
        sel = [
            r for r in results if (r["m"], r["model"], r["n_train"]) == (m, model, n)
        ]
        errors = np.array([r["error"] for r in sel])
        mean, std = summarize(errors)
        theta = np.array([r["theta_error"] for r in sel])
        rows.append(
            {
                "model": model,
                "m": m,
                "d": cfg["token_dim"],
                "k": cfg["n_tokens"],
                "n_train": n,
                "n_fit_heads": sel[0]["n_fit_heads"],
                "error_mean": mean,
                "error_std": std,
                "error_median": float(np.median(errors)),
                "error_min": float(np.min(errors)),
                "error_max": float(np.max(errors)),
                "success_rate": float(np.mean(errors <= _SUCCESS)),
                "theta_error_median": (
                    float(np.median(theta)) if np.all(np.isfinite(theta)) else None
                ),
                "fit_seconds_mean": float(np.mean([r["seconds"] for r in sel])),
                "n_seeds": len(sel),
            }
        )
    return rows


def format_mha_summary(tables):
    """Plain-text table of the median test errors at every ``n``.

    Parameters
    ----------
    tables : dict
        The output of :func:`run_mha`.

    Returns
    -------
    text : str
        A line per ``m`` and ``n``, a column per model (median test relative
        error over the repetitions) and the learner's success rate.
    """
    rows = tables.get("learning_curves") or []
    if not rows:
        return ""
    cells = {(r["m"], r["n_train"], r["model"]): r for r in rows}
    lines = []
    for m, n in dict.fromkeys((r["m"], r["n_train"]) for r in rows):
        line = [str(m), str(n)]
        for model in MODELS:
            row = cells.get((m, n, model))
            line.append("-" if row is None else f"{row['error_median']:.2g}")
        learner = cells.get((m, n, "learner"))
        line.append(f"{learner['success_rate']:.2f}" if learner else "-")
        lines.append(line)
    first = rows[0]
    text = (
        f"Planted multi-head attention, d={first['d']}, k={first['k']}: median "
        f"test ||F_hat - F||^2 / ||F||^2 over "
        f"{_seeds_text(r['n_seeds'] for r in rows)}\n"
        + format_table(["m", "n", *MODELS, "learner recovered"], lines)
    )
    blocks = [text, _format_thresholds(tables), _format_degenerate(tables)]
    return "\n\n".join(block for block in blocks if block)


def _n(value):
    return ">max" if not np.isfinite(value) else f"{value:g}"


def _threshold_cell(row, criterion):
    """``median [min, max]`` over several seeds, the value alone over one."""
    med = _n(row[f"threshold_{criterion}_median"])
    if row["n_seeds"] == 1:
        return med
    low = _n(row[f"threshold_{criterion}_min"])
    high = _n(row[f"threshold_{criterion}_max"])
    return f"{med} [{low}, {high}]"


def _at_threshold(row, criterion):
    starts = row[f"starts_{criterion}_median"]
    secs = row[f"seconds_{criterion}_median"]
    return (
        "-" if starts is None else f"{starts:g}",
        "-" if secs is None else f"{secs:.2f}",
    )


def _format_thresholds(tables):
    rows = tables.get("thresholds") or []
    if not rows:
        return ""
    lines = [
        [
            r["inputs"],
            str(r["d"]),
            str(r["m"]),
            str(r["n_count"]),
            _threshold_cell(r, "function"),
            f"{r['recovered_function']}/{r['n_seeds']}",
            *_at_threshold(r, "function"),
            _threshold_cell(r, "parameters"),
            str(r["violations_function"] + r["violations_parameters"]),
            f"{r['seconds']:.0f}",
        ]
        for r in rows
    ]
    header = [
        "inputs",
        "d",
        "m",
        "n_count",
        "n* function",
        "recovered",
        "starts at n*",
        "s at n*",
        "n* parameters",
        "violations",
        "cell s",
    ]
    grid = max(r["n_max"] for r in rows)
    return (
        f"Recovery thresholds n* (k = {rows[0]['k']} tokens, n <= {grid}; "
        "median [min, max] over "
        f"{_seeds_text(r['n_seeds'] for r in rows)} per cell; function: test "
        f"rel. error <= {FUNCTION_TOL:g}; parameters: matched Theta and W errors "
        f"<= {PARAMETER_TOL:g}; starts and seconds: medians at n*)\n"
        + format_table(header, lines)
    )


def _format_degenerate(tables):
    rows = tables.get("degenerate") or []
    if not rows:
        return ""
    lines = []
    for r in rows:
        lines.append(
            [
                "independent" if r["delta"] is None else f"{r['delta']:g}",
                _threshold_cell(r, "function"),
                f"{r['recovered_function']}/{r['n_seeds']}",
                _threshold_cell(r, "parameters"),
                f"{r['recovered_parameters']}/{r['n_seeds']}",
                *_at_threshold(r, "parameters"),
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
    return (
        f"Near-degenerate heads (m = {r0['m']}, d = {r0['d']}, k = {r0['k']}, "
        f"{r0['inputs']}; ||Theta_2 - Theta_1||_F = delta, ||Theta_i||_F = "
        f"{r0['theta_norm']:g}; errors at n = {r0['n_max']}, medians over "
        f"{_seeds_text(r['n_seeds'] for r in rows)})\n" + format_table(header, lines)
    )


_COLORS = {
    "learner": "tab:blue",
    "too_few_heads": "tab:orange",
    "uniform_linear": "tab:green",
}
_LABELS = {
    "learner": "learner, $m$ heads",
    "too_few_heads": "learner, $m - 1$ heads",
    "uniform_linear": "uniform attention, linear",
}


def plot_mha(tables, path=None):
    r"""Draw :func:`run_mha`'s table: test error against ``n``, a panel per ``m``.

    Lines are medians of the test relative error
    :math:`\|\hat F - F\|^2 / \|F\|^2` over the repetitions; bands span the
    smallest to the largest error when there are several repetitions (log
    scales; errors are floored at 1e-18 for display). The dotted line is the
    success threshold 1e-6. One legend for the figure, below the panels; the
    title states the sizes and the number of seeds. matplotlib is imported
    here, not with the module.

    Parameters
    ----------
    tables : dict
        The output of :func:`run_mha`.
    path : str or path-like, default=None
        If given, the figure is saved there.

    Returns
    -------
    fig : matplotlib.figure.Figure
        The figure.
    """
    rows = tables.get("learning_curves") or []
    heads = sorted({r["m"] for r in rows})
    fig = _figure(3.6 * max(len(heads), 1) + 0.4, 3.9)
    axes = fig.subplots(1, max(len(heads), 1), squeeze=False, sharey=True)[0]
    floor = 1e-18
    for ax, m in zip(axes, heads, strict=False):
        ax.set_yscale("log")
        ax.axhline(
            _SUCCESS,
            color="k",
            linewidth=0.6,
            linestyle=":",
            label=f"success threshold ($10^{{{int(np.log10(_SUCCESS))}}}$)",
        )
        for model in MODELS:
            sel = sorted(
                (r for r in rows if r["m"] == m and r["model"] == model),
                key=lambda r: r["n_train"],
            )
            if not sel:
                continue
            _curve(
                ax,
                [r["n_train"] for r in sel],
                np.maximum([r["error_median"] for r in sel], floor),
                low=np.maximum([r["error_min"] for r in sel], floor),
                high=np.maximum([r["error_max"] for r in sel], floor),
                n_seeds=min(r["n_seeds"] for r in sel),
                color=_COLORS[model],
                label=_LABELS[model],
            )
        ax.set_ylim(floor / 10, 10)
        _log_axis(ax, "x", ticks=[r["n_train"] for r in rows if r["m"] == m])
        _log_axis(ax, "y")
        ax.set_title(f"$m = {m}$ planted head{'s' if m > 1 else ''}", fontsize=9)
        ax.set_xlabel("$n$ (training sequences)")
        ax.grid(True, which="major", alpha=0.3)
    if heads:
        axes[0].set_ylabel(r"test $\|\hat F - F\|^2 / \|F\|^2$")
    if rows:
        several = any(r["n_seeds"] > 1 for r in rows)
        _caption(
            fig,
            "Learning planted multi-head attention layers (Chen and Li, 2024)",
            f"$d = {rows[0]['d']}$, $k = {rows[0]['k']}$ tokens, Boolean inputs, "
            f"noiseless; median over {_seeds_text(r['n_seeds'] for r in rows)}"
            + (", bands from the smallest to the largest error" if several else ""),
        )
    _figure_legend(fig, ncols=4, order=list(_LABELS.values()))
    _save(fig, path)
    return fig
