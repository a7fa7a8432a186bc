"""The studies of the random-feature attention reproduction: tasks and tables.

A *curve* is one model with its parameters on one target and setting (token
dimension, number of keys, width), fitted on nested prefixes of a training pool
and scored on a fixed test set, for each repetition. The tables name the
curves they need; every distinct curve is fitted once, at the union of the
sizes asked for, so tables that share a model and setting share its fits.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
from threadpoolctl import threadpool_limits

from ...datasets import make_token_regression
from ...random_features import RFMLP, BiasedRFA, RandomFeatureAttentionRegressor
from .._common import (
    Progress,
    _mean_spread,
    merge_config,
    run_tasks,
    seed_pair,
    summarize,
)
from ._config import MODELS, default_config, target_spec

__all__ = ["TABLES", "run_rfa", "smallest_n"]

TABLES = (
    "degree",
    "degree_thresholds",
    "scaling",
    "scaling_slopes",
    "biased",
    "biased_thresholds",
    "mean_scale",
    "softmax",
    "softmax_temperature",
)


def smallest_n(train_sizes, errors, threshold):
    """The smallest ``n`` of the grid whose error is at most ``threshold``.

    Parameters
    ----------
    train_sizes : sequence of int
        The grid, increasing.
    errors : sequence of float
        The error at each size (NaN where the size was not fitted).
    threshold : float
        The error to reach.

    Returns
    -------
    n : int or None
        ``None`` when no size of the grid reaches it.

    Examples
    --------
    >>> from sklearn_attn.experiments._rfa import smallest_n
    >>> smallest_n([100, 300, 1000], [0.9, 0.2, 0.1], 0.25)
    300
    >>> smallest_n([100, 300, 1000], [0.9, 0.8, 0.7], 0.25) is None
    True
    """
    for n, error in zip(train_sizes, errors, strict=True):
        if error <= threshold:
            return int(n)
    return None


# -- one task ------------------------------------------------------------------
def _make_model(name, *, width, token_dim, random_state, **params):
    """RFA, BiasedRFA or RFMLP with ``width`` trained weights, ``alpha="auto"``."""
    if name == "RFA":
        heads = math.ceil(width / (token_dim + 1))
        return RandomFeatureAttentionRegressor(
            heads, random_state=random_state, **params
        )
    if name == "BiasedRFA":
        heads = math.ceil(width / (token_dim + 1))
        return BiasedRFA(heads, random_state=random_state, **params)
    if name == "RFMLP":
        return RFMLP(width, random_state=random_state, **params)
    raise ValueError(f"Unknown model {name!r}; expected one of {list(MODELS)}.")


def _n_params(model, width, token_dim):
    if model == "RFMLP":
        return int(width)
    return math.ceil(width / (token_dim + 1)) * (token_dim + 1)


def _one_curve(model, params, curve, sizes, n_test, seeds, stop_below):
    """One task: the test errors ``MSE / Var(y_test)`` of one model on one
    draw at ``sizes`` (fresh fits on nested prefixes of one pool, as
    ``learning_curve`` makes them), NaN after the first size whose error is
    at most ``stop_below`` (None: every size)."""
    target, token_dim, n_keys, width = curve
    pool_seed, test_seed, weight_seed = seeds
    errors = np.full(len(sizes), np.nan)
    # One BLAS thread per task: tasks run side by side on the cores.
    with threadpool_limits(1):
        # The training pool and the test set of a target and setting, the
        # same for every model and repetition seed: comparisons are paired.
        # make_token_regression draws sample after sample, so a smaller pool
        # is a prefix of a larger one: every curve draws what it needs.
        common = dict(n_keys=n_keys, token_dim=token_dim, **target_spec(target))
        X, y = make_token_regression(max(sizes), random_state=pool_seed, **common)
        X_test, y_test = make_token_regression(n_test, random_state=test_seed, **common)
        variance = np.var(y_test)
        for k, n in enumerate(sizes):
            estimator = _make_model(
                model,
                width=width,
                token_dim=token_dim,
                random_state=weight_seed,
                **dict(params),
            )
            estimator.fit(X[:n], y[:n])
            errors[k] = np.mean((estimator.predict(X_test) - y_test) ** 2) / variance
            if stop_below is not None and errors[k] <= stop_below:
                break
    return errors


class _Curves:
    """The distinct curves the tables ask for, each fitted once."""

    def __init__(self, n_seeds):
        self.n_seeds = n_seeds
        self.sizes = {}  # key -> set of sizes
        self.origin = {}  # key -> the table that asked first
        self.errors = {}  # key -> {size: errors per seed}

    @staticmethod
    def _key(model, params, target, token_dim, n_keys, width, stop_below=None):
        curve = (target, int(token_dim), int(n_keys), int(width))
        return model, tuple(sorted(params.items())), curve, stop_below

    def need(self, table, sizes, *key):
        key = self._key(*key)
        self.sizes.setdefault(key, set()).update(int(n) for n in sizes)
        self.origin.setdefault(key, table)

    def get(self, sizes, *key):
        """Errors of shape ``(n_seeds, len(sizes))`` (NaN: not fitted)."""
        by_size = self.errors[self._key(*key)]
        return np.array([by_size[int(n)] for n in sizes]).T

    def tasks(self, random_state, n_test):
        tasks = []
        for key, sizes in self.sizes.items():
            model, params, curve, stop_below = key
            # Data seeds from the target and setting (so that a table's numbers
            # do not depend on which other tables run), weight seeds from the
            # repetition alone: RFA, BiasedRFA(mu) and the softmax share the
            # data and the random part of the weights.
            data_key = zlib.crc32(repr(curve[:3]).encode())
            for seed in range(self.n_seeds):
                seeds = (
                    *seed_pair(random_state, data_key, seed),
                    seed_pair(random_state, seed)[1],
                )
                args = (model, params, curve, tuple(sorted(sizes)), n_test, seeds)
                tasks.append((key, (_one_curve, *args, stop_below)))
        return tasks

    def store(self, key, errors_per_seed):
        sizes = sorted(self.sizes[key])
        errors = np.asarray(errors_per_seed)
        self.errors[key] = {n: errors[:, j] for j, n in enumerate(sizes)}


def _label(key):
    model, params, (target, d, n_keys, width), _ = key
    extra = "".join(f" {k}={v}" for k, v in params)
    return f"{target} d={d} N={n_keys} width={width} {model}{extra}"


# -- requests ------------------------------------------------------------------
def _degree_variants(cfg):
    """(model, params) of the degree table: the paper's models, and the
    contrast models without the constant in the scores."""
    variants = [(model, {}) for model in cfg["models"]]
    variants += [(model, {"qk_bias": False}) for model in cfg["contrast_models"]]
    return variants


def _mean_scale_model(mu):
    # BiasedRFA(qk_mean_scale=0) draws RFA's weights exactly and mu = 1 is its
    # default: named so, they are the other tables' fits.
    if mu == 0:
        return "RFA", {}
    return "BiasedRFA", ({} if mu == 1 else {"qk_mean_scale": float(mu)})


def _softmax_params(c, token_dim):
    # c = 1 is the default qk_std = 1 / sqrt(d): the softmax table's fits.
    if c == 1:
        return {"activation": "softmax"}
    return {"activation": "softmax", "qk_std": float(c) / math.sqrt(token_dim)}


def _biased_settings(cfg):
    """(target, d) of the BiasedRFA study: the correlation targets at every
    dimension, the gamma targets at the first."""
    settings = [(t, d) for d in cfg["token_dims"] for t in cfg["targets"]]
    settings += [(t, cfg["token_dims"][0]) for t in cfg["gamma_targets"]]
    return settings


def _request_curves(curves, cfg):
    """Name every curve the tables of ``cfg`` need (each study may be None)."""
    threshold = float(cfg["threshold"])
    degree = cfg.get("degree")
    if degree:
        for target in degree["targets"]:
            for model, params in _degree_variants(degree):
                curves.need(
                    "degree",
                    degree["train_sizes"],
                    model,
                    params,
                    target,
                    degree["token_dim"],
                    degree["n_keys"],
                    degree["width"],
                )
    scaling = cfg.get("scaling")
    if scaling:
        for d in scaling["token_dims"]:
            for n_keys in scaling["n_keys"]:
                for model in scaling["models"]:
                    curves.need(
                        "scaling",
                        scaling["train_sizes"],
                        model,
                        {},
                        scaling["target"],
                        d,
                        n_keys,
                        scaling["width"],
                        threshold,
                    )
    biased = cfg.get("biased")
    if biased:
        for target, d in _biased_settings(biased):
            for model in ("RFA", "BiasedRFA"):
                curves.need(
                    "biased",
                    biased["train_sizes"],
                    model,
                    {},
                    target,
                    d,
                    biased["n_keys"],
                    biased["width"],
                )
    mean_scale = cfg.get("mean_scale")
    if mean_scale:
        for mu in (0.0, *mean_scale["mean_scales"]):
            curves.need(
                "mean_scale",
                mean_scale["train_sizes"],
                *_mean_scale_model(mu),
                mean_scale["target"],
                mean_scale["token_dim"],
                mean_scale["n_keys"],
                mean_scale["width"],
            )
    softmax = cfg.get("softmax")
    if softmax:
        d, n_keys, width = softmax["token_dim"], softmax["n_keys"], softmax["width"]
        for target in softmax["targets"]:
            for params in ({}, _softmax_params(1, d)):
                curves.need(
                    "softmax",
                    softmax["train_sizes"],
                    "RFA",
                    params,
                    target,
                    d,
                    n_keys,
                    width,
                )
        for target in softmax["temperature_targets"]:
            for c in softmax["inverse_temperatures"]:
                curves.need(
                    "softmax_temperature",
                    softmax["temperature_train_sizes"],
                    "RFA",
                    _softmax_params(c, d),
                    target,
                    d,
                    n_keys,
                    width,
                )


# -- tables --------------------------------------------------------------------
def _setting(model, d, n_keys, width):
    return {
        "d": int(d),
        "N": int(n_keys),
        "n_params": _n_params(model, width, d),
    }


def _qk_bias(model, params):
    """The ``qk_bias`` of an attention model (None for RFMLP)."""
    return None if model == "RFMLP" else bool(dict(params).get("qk_bias", True))


def _degree_rows(curves, cfg):
    rows = []
    sizes = tuple(cfg["train_sizes"])
    d, n_keys, width = cfg["token_dim"], cfg["n_keys"], cfg["width"]
    for target in cfg["targets"]:
        for model, params in _degree_variants(cfg):
            errors = curves.get(sizes, model, params, target, d, n_keys, width)
            for j, n in enumerate(sizes):
                mean, std = summarize(errors[:, j])
                rows.append(
                    {
                        "model": model,
                        "qk_bias": _qk_bias(model, params),
                        "target": target,
                        **_setting(model, d, n_keys, width),
                        "n_train": int(n),
                        "error_mean": mean,
                        "error_std": std,
                        "n_seeds": int(np.isfinite(errors[:, j]).sum()),
                    }
                )
    return rows


def _threshold_row(errors, sizes, threshold):
    """n* from the mean curve, its range over the seeds that reach it, and the
    error at the largest size."""
    per_seed = [smallest_n(sizes, e, threshold) for e in errors]
    reached = [n for n in per_seed if n is not None]
    mean, std = summarize(errors[:, -1])
    return {
        "threshold": threshold,
        "n_needed": smallest_n(sizes, errors.mean(axis=0), threshold),
        "n_needed_min": min(reached, default=None),
        "n_needed_max": max(reached, default=None),
        "n_reached": len(reached),
        "n_seeds": len(per_seed),
        "largest_n": int(sizes[-1]),
        "error_at_largest_n_mean": mean,
        "error_at_largest_n_std": std,
    }


def _degree_threshold_rows(curves, cfg, threshold):
    sizes = tuple(cfg["train_sizes"])
    d, n_keys, width = cfg["token_dim"], cfg["n_keys"], cfg["width"]
    rows = []
    for target in cfg["targets"]:
        for model, params in _degree_variants(cfg):
            errors = curves.get(sizes, model, params, target, d, n_keys, width)
            rows.append(
                {
                    "model": model,
                    "qk_bias": _qk_bias(model, params),
                    "target": target,
                    **_setting(model, d, n_keys, width),
                    **_threshold_row(errors, sizes, threshold),
                }
            )
    return rows


def _scaling_n_star(curves, cfg, threshold):
    """``{(model, d, N): [n* per seed, None where not reached]}``."""
    sizes = tuple(cfg["train_sizes"])
    out = {}
    for model in cfg["models"]:
        for d in cfg["token_dims"]:
            for n_keys in cfg["n_keys"]:
                errors = curves.get(
                    sizes, model, {}, cfg["target"], d, n_keys, cfg["width"], threshold
                )
                out[model, d, n_keys] = [
                    smallest_n(sizes, e, threshold) for e in errors
                ]
    return out


def _scaling_rows(n_star, cfg, threshold):
    rows = []
    largest = int(max(cfg["train_sizes"]))
    for (model, d, n_keys), per_seed in n_star.items():
        reached = [n for n in per_seed if n is not None]
        rows.append(
            {
                "model": model,
                "target": cfg["target"],
                **_setting(model, d, n_keys, cfg["width"]),
                "threshold": threshold,
                # Over the seeds; a seed that does not reach the threshold
                # counts as above the largest size (so the median may be
                # censored too: None).
                "n_star_median": _censored_median(per_seed),
                "n_star_min": min(reached, default=None),
                "n_star_max": None if len(reached) < len(per_seed) else max(reached),
                "n_reached": len(reached),
                "n_seeds": len(per_seed),
                "largest_n": largest,
            }
        )
    return rows


def _censored_median(values):
    """Median with None as +infinity; None when the median is censored."""
    ordered = sorted(values, key=lambda v: math.inf if v is None else v)
    k = len(ordered)
    middle = ordered[(k - 1) // 2 : k // 2 + 1]
    if any(v is None for v in middle):
        return None
    return float(np.mean(middle))


def _slope_fit(points, axes):
    """Least-squares slopes of log2 n* on the log2 of ``axes`` (columns of
    ``points``, a list of (n*, *values)); None when the points do not
    determine them."""
    if len(points) < len(axes) + 1:
        return None
    data = np.log2(np.asarray(points, dtype=float))
    design = np.column_stack([np.ones(len(data)), data[:, 1:]])
    if np.linalg.matrix_rank(design) < design.shape[1]:
        return None
    coef, *_ = np.linalg.lstsq(design, data[:, 0], rcond=None)
    return coef[1:]


def _scaling_slope_rows(n_star, cfg):
    """Slopes of log n* against log N and log d, per seed, then mean and std.

    ``fit="joint"`` fits ``log n* = a + b log N + c log d`` over every cell;
    ``fit="N"`` (``"d"``) the slope in N (d) at each d (N). Cells not reached
    are left out (``slope_*``), or counted at twice the largest size, the next
    size of the grid and a lower bound of their n* (``*_censored_at_2n``):
    when those cells are the large ones, the second slope is a lower bound of
    the one the full grid would give.
    """
    twice = 2 * int(max(cfg["train_sizes"]))
    n_seeds = len(next(iter(n_star.values()), []))
    rows = []
    fits = [("joint", None, ("N", "d"))]
    fits += [("N", d, ("N",)) for d in cfg["token_dims"]]
    fits += [("d", n_keys, ("d",)) for n_keys in cfg["n_keys"]]
    for model in cfg["models"]:
        for fit, fixed, axes in fits:
            cells = [
                (d, n_keys)
                for d in cfg["token_dims"]
                for n_keys in cfg["n_keys"]
                if fixed is None
                or (fit == "N" and d == fixed)
                or (fit == "d" and n_keys == fixed)
            ]
            slopes, bounds, censored = [], [], 0
            for seed in range(n_seeds):
                observed, capped = [], []
                for d, n_keys in cells:
                    value = n_star[model, d, n_keys][seed]
                    coordinates = {"N": n_keys, "d": d}
                    point = [coordinates[a] for a in axes]
                    if value is None:
                        censored += 1
                        capped.append([twice, *point])
                    else:
                        observed.append([value, *point])
                        capped.append([value, *point])
                slope = _slope_fit(observed, axes)
                if slope is not None:
                    slopes.append(slope)
                bound = _slope_fit(capped, axes)
                if bound is not None:
                    bounds.append(bound)
            for k, axis in enumerate(axes):
                mean, std = summarize([s[k] for s in slopes])
                low_mean, low_std = summarize([b[k] for b in bounds])
                rows.append(
                    {
                        "model": model,
                        "fit": fit,
                        "axis": axis,
                        "fixed": (
                            None
                            if fixed is None
                            else f"{'d' if fit == 'N' else 'N'}={fixed}"
                        ),
                        "slope_mean": mean,
                        "slope_std": std,
                        "n_seeds_fitted": len(slopes),
                        "slope_censored_at_2n_mean": low_mean,
                        "slope_censored_at_2n_std": low_std,
                        "n_cells": len(cells) * n_seeds,
                        "n_censored": censored,
                    }
                )
    return rows


def _biased_rows(curves, cfg):
    sizes = tuple(cfg["train_sizes"])
    n_keys, width = cfg["n_keys"], cfg["width"]
    rows = []
    for target, d in _biased_settings(cfg):
        rfa = curves.get(sizes, "RFA", {}, target, d, n_keys, width)
        biased = curves.get(sizes, "BiasedRFA", {}, target, d, n_keys, width)
        for j, n in enumerate(sizes):
            rfa_mean, rfa_std = summarize(rfa[:, j])
            biased_mean, biased_std = summarize(biased[:, j])
            # Paired: the same data and random part of the weights.
            ratio_mean, ratio_std = summarize(biased[:, j] / rfa[:, j])
            rows.append(
                {
                    "target": target,
                    **_setting("RFA", d, n_keys, width),
                    "n_train": int(n),
                    "rfa_mean": rfa_mean,
                    "rfa_std": rfa_std,
                    "biased_mean": biased_mean,
                    "biased_std": biased_std,
                    "ratio_mean": ratio_mean,
                    "ratio_std": ratio_std,
                    "n_seeds": int(np.isfinite(rfa[:, j] + biased[:, j]).sum()),
                }
            )
    return rows


def _biased_threshold_rows(curves, cfg, threshold):
    sizes = tuple(cfg["train_sizes"])
    rows = []
    for target, d in _biased_settings(cfg):
        for model in ("RFA", "BiasedRFA"):
            errors = curves.get(
                sizes, model, {}, target, d, cfg["n_keys"], cfg["width"]
            )
            rows.append(
                {
                    "model": model,
                    "target": target,
                    **_setting(model, d, cfg["n_keys"], cfg["width"]),
                    **_threshold_row(errors, sizes, threshold),
                }
            )
    return rows


def _mean_scale_rows(curves, cfg):
    sizes = tuple(cfg["train_sizes"])
    key = (cfg["target"], cfg["token_dim"], cfg["n_keys"], cfg["width"])
    reference = curves.get(sizes, "RFA", {}, *key)
    rows = []
    for mu in cfg["mean_scales"]:
        errors = curves.get(sizes, *_mean_scale_model(mu), *key)
        for j, n in enumerate(sizes):
            mean, std = summarize(errors[:, j])
            ratio_mean, ratio_std = summarize(errors[:, j] / reference[:, j])
            rows.append(
                {
                    "target": cfg["target"],
                    "mean_scale": float(mu),
                    **_setting("RFA", *key[1:]),
                    "n_train": int(n),
                    "error_mean": mean,
                    "error_std": std,
                    # Paired: the same data and random weights as RFA's fit.
                    "ratio_to_rfa_mean": ratio_mean,
                    "ratio_to_rfa_std": ratio_std,
                    "n_seeds": int(np.isfinite(errors[:, j]).sum()),
                }
            )
    return rows


def _softmax_rows(curves, cfg):
    sizes = tuple(cfg["train_sizes"])
    d, n_keys, width = cfg["token_dim"], cfg["n_keys"], cfg["width"]
    rows = []
    for target in cfg["targets"]:
        relu = curves.get(sizes, "RFA", {}, target, d, n_keys, width)
        soft = curves.get(sizes, "RFA", _softmax_params(1, d), target, d, n_keys, width)
        for j, n in enumerate(sizes):
            relu_mean, relu_std = summarize(relu[:, j])
            soft_mean, soft_std = summarize(soft[:, j])
            ratio_mean, ratio_std = summarize(soft[:, j] / relu[:, j])
            rows.append(
                {
                    "target": target,
                    **_setting("RFA", d, n_keys, width),
                    "n_train": int(n),
                    "relu_mean": relu_mean,
                    "relu_std": relu_std,
                    "softmax_mean": soft_mean,
                    "softmax_std": soft_std,
                    "ratio_softmax_to_relu_mean": ratio_mean,
                    "ratio_softmax_to_relu_std": ratio_std,
                    "n_seeds": int(np.isfinite(relu[:, j] + soft[:, j]).sum()),
                }
            )
    return rows


def _temperature_rows(curves, cfg):
    sizes = tuple(cfg["temperature_train_sizes"])
    d, n_keys, width = int(cfg["token_dim"]), cfg["n_keys"], cfg["width"]
    rows = []
    for target in cfg["temperature_targets"]:
        for c in cfg["inverse_temperatures"]:
            errors = curves.get(
                sizes, "RFA", _softmax_params(c, d), target, d, n_keys, width
            )
            for j, n in enumerate(sizes):
                mean, std = summarize(errors[:, j])
                rows.append(
                    {
                        "target": target,
                        "inverse_temperature": float(c),
                        "qk_std": float(c) / math.sqrt(d),
                        **_setting("RFA", d, n_keys, width),
                        "n_train": int(n),
                        "error_mean": mean,
                        "error_std": std,
                        "n_seeds": int(np.isfinite(errors[:, j]).sum()),
                    }
                )
    return rows


# -- the run -------------------------------------------------------------------
def _check_targets(cfg):
    """Unknown target names fail before any fit."""
    for part in ("degree", "biased", "softmax"):
        study = cfg.get(part) or {}
        for key in ("targets", "gamma_targets", "temperature_targets"):
            for target in study.get(key, ()):
                target_spec(target)
    for part in ("scaling", "mean_scale"):
        if cfg.get(part):
            target_spec(cfg[part]["target"])


def run_rfa(
    *,
    quick=False,
    n_seeds=None,
    random_state=0,
    progress=None,
    n_jobs=None,
    config=None,
):
    """Run the random-feature attention studies of Fu et al. (2023).

    Measures the normalised test error ``MSE / Var(y_test)`` of
    :class:`~sklearn_attn.RandomFeatureAttentionRegressor` (RFA),
    :class:`~sklearn_attn.BiasedRFA` and :class:`~sklearn_attn.RFMLP`, every
    model of a study with the same number of trained weights (its ``width``,
    at least four times the study's largest training size), against the
    number of training samples ``n``, on key-averaged targets of the
    correlations ``t_i = <x_0, x_i> / sqrt(d)``:

    * **degree**: targets ``mean_i Q_p(t_i)`` of exactly degree ``p`` = 1 to 4
      (``Q_p`` the orthogonal polynomial of degree ``p``) and ``mean_i
      t_i**3``, for the three models and, as a contrast, RFA and BiasedRFA
      without the constant in the scores (``qk_bias=False``); and the smallest
      ``n`` reaching an error threshold;
    * **scaling**: that smallest ``n``, ``n*``, of RFA and RFMLP on the
      degree-1 target against the token dimension ``d`` and the number of keys
      ``N``, per seed, with the slopes of ``log n*`` against ``log N`` and
      ``log d``;
    * **biased**: BiasedRFA against RFA (paired error ratios and ``n*``) on the
      correlation targets against ``d``, and on ``mean_i exp(gamma t_i)``
      against ``gamma``;
    * **mean_scale**: BiasedRFA's ``qk_mean_scale`` on the degree-2 target,
      with its error ratio to RFA on the same data and random weights;
    * **softmax**: RFA with ``activation="relu"`` against ``"softmax"``, and
      the softmax's inverse temperature ``c`` (``qk_std = c / sqrt(d)``).

    Each point of a curve is a fresh fit on a prefix of one training pool,
    scored on a fixed set of fresh test samples, as
    :func:`sklearn.model_selection.learning_curve` makes them; in the scaling
    study a curve stops at the first size that reaches the threshold. Every
    fit chooses its ridge penalty by generalized cross-validation
    (``alpha="auto"``). Every repetition draws new data and new random
    weights; within a repetition the models share the data of a target and
    setting and the random part of the weights, and a curve that several
    tables use is fitted once.

    Parameters
    ----------
    quick : bool, default=False
        Use the reduced settings (fewer targets, dimensions, sizes and
        repetitions, narrower models). Measured times are in the reproduction
        guide.
    n_seeds : int, default=None
        Number of repetitions; ``None`` uses the setting's default (3, or 2
        with ``quick``).
    random_state : int, default=0
        Master seed; all data and weight seeds are derived from it.
    progress : callable, None or False, default=None
        Where the progress lines go (one per distinct curve, with the elapsed
        time): ``None`` prints them to standard error, ``False`` drops them, a
        callable receives each line.
    n_jobs : int, default=None
        Curves computed at once by :class:`sklearn.utils.parallel.Parallel`,
        one task per curve and repetition (each with its own seeds and one
        BLAS thread, so the tables do not depend on ``n_jobs`` or on the
        joblib backend: under ``joblib.parallel_config(backend="dask")`` the
        tasks run on a Dask cluster). ``None`` runs them one after another.
    config : dict, default=None
        Overrides of the settings returned by ``default_config(quick)``, e.g.
        ``{"degree": {"train_sizes": (100, 1000)}}`` (nested dicts are merged,
        unknown names are an error); a study set to ``None`` is left out, and
        its tables are empty.

    Returns
    -------
    tables : dict
        Lists of dict rows, by name (the columns are described in the
        reproduction guide):

        - ``"degree"``: ``model``, ``qk_bias``, ``target``, ``d``, ``N``,
          ``n_params``, ``n_train``, ``error_mean``, ``error_std``,
          ``n_seeds``;
        - ``"degree_thresholds"``, ``"biased_thresholds"``: per model and
          target, ``n_needed`` (from the mean curve; ``None`` if not reached),
          its range over the seeds that reach it and their number, and the
          error at the largest size;
        - ``"scaling"``: per model, ``d`` and ``N``, the median, smallest and
          largest ``n*`` over the seeds;
        - ``"scaling_slopes"``: per model and fit, the slopes of ``log n*``
          (mean and std over seeds);
        - ``"biased"``: per target, ``d`` and ``n_train``, the errors of RFA
          and BiasedRFA and their paired ratio;
        - ``"mean_scale"``: per ``mean_scale`` and ``n_train``, the error and
          the paired ratio ``error(BiasedRFA) / error(RFA)``;
        - ``"softmax"``, ``"softmax_temperature"``: the ReLU and softmax
          errors per target, and the softmax's per inverse temperature.

    See Also
    --------
    plot_rfa : Draw the tables.
    write_csv : Save a table.

    Examples
    --------
    >>> from sklearn_attn.experiments import run_rfa
    >>> tables = run_rfa(quick=True, progress=False)  # doctest: +SKIP
    >>> sorted(tables)  # doctest: +SKIP
    ['biased', 'biased_thresholds', 'degree', 'degree_thresholds', ...]
    """
    cfg = merge_config(default_config(quick), config)
    n_seeds = cfg["n_seeds"] if n_seeds is None else n_seeds
    if isinstance(n_seeds, bool) or int(n_seeds) != n_seeds or n_seeds < 1:
        raise ValueError(f"n_seeds must be a positive integer; got {n_seeds!r}.")
    n_seeds = int(n_seeds)
    _check_targets(cfg)
    threshold = float(cfg["threshold"])
    report = Progress(progress, prefix="[rfa] ")

    curves = _Curves(n_seeds)
    _request_curves(curves, cfg)
    tasks = curves.tasks(random_state, cfg["n_test"])
    n_curves = len(curves.sizes)
    report(f"{len(tasks)} tasks: {n_curves} distinct curves x {n_seeds} seeds")
    results = run_tasks([task for _, task in tasks], n_jobs=n_jobs)
    errors = []
    for count, ((key, _), result) in enumerate(zip(tasks, results, strict=True), 1):
        errors.append(result)
        if count % n_seeds:
            continue
        # The last repetition of a curve: store it, say where it ended.
        curves.store(key, errors)
        last = np.asarray(errors)
        fitted = np.isfinite(last)
        reached = [row[ok][-1] for row, ok in zip(last, fitted, strict=True)]
        mean, std = summarize(reached)
        report(
            f"[{count // n_seeds}/{n_curves}] {curves.origin[key]}: "
            f"{_label(key)}: error {_mean_spread(mean, std, n_seeds)} "
            f"at the last size fitted"
        )
        errors = []
    report("done")

    tables = {name: [] for name in TABLES}
    if cfg.get("degree"):
        tables["degree"] = _degree_rows(curves, cfg["degree"])
        tables["degree_thresholds"] = _degree_threshold_rows(
            curves, cfg["degree"], threshold
        )
    if cfg.get("scaling"):
        n_star = _scaling_n_star(curves, cfg["scaling"], threshold)
        tables["scaling"] = _scaling_rows(n_star, cfg["scaling"], threshold)
        tables["scaling_slopes"] = _scaling_slope_rows(n_star, cfg["scaling"])
    if cfg.get("biased"):
        tables["biased"] = _biased_rows(curves, cfg["biased"])
        tables["biased_thresholds"] = _biased_threshold_rows(
            curves, cfg["biased"], threshold
        )
    if cfg.get("mean_scale"):
        tables["mean_scale"] = _mean_scale_rows(curves, cfg["mean_scale"])
    if cfg.get("softmax"):
        tables["softmax"] = _softmax_rows(curves, cfg["softmax"])
        tables["softmax_temperature"] = _temperature_rows(curves, cfg["softmax"])
    return tables
