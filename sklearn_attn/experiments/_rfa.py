"""Reproduction of the random-feature attention claims (Fu et al., 2023).

Five tables, all on the simulated key-averaged targets of
:func:`~sklearn_attn.datasets.make_token_regression`, each cell a mean and a
standard deviation over repetitions (every repetition draws new data and new
random weights; the models compared within a repetition share both):

``degree`` and ``degree_thresholds``
    The test error against the number of training samples ``n`` of RFA,
    BiasedRFA and RFMLP (the same number ``M (d + 1)`` of trained weights) on
    targets of degree 1, 2 and 3 in the correlations
    ``t_i = <x_0, x_i> / sqrt(d)``, and for each model and degree the smallest
    ``n`` of the grid whose error is at most a threshold.
``keys``
    The same three models on the degree-1 ``"correlation"`` and ``"value"``
    targets for several numbers of keys ``N``.
``mean_scale``
    BiasedRFA's mean scale ``mu`` (``qk_mean_scale``; ``mu = 0`` is RFA) on
    the degree-2 target: its error and its paired ratio to RFA's.
``softmax`` and ``softmax_temperature``
    RFA with ReLU against softmax attention weights (``activation``), and the
    softmax's inverse temperature.

Errors are normalised test errors ``MSE / Var(y_test)`` on fresh samples (1
means "no better than predicting the mean"). Every fit selects its ridge
penalty by generalized cross-validation (``alpha="auto"``).
"""

from __future__ import annotations

import copy
import math
import zlib

import numpy as np
from sklearn.model_selection import learning_curve
from threadpoolctl import threadpool_limits

from ..datasets import make_token_regression
from ..random_features import RFMLP, BiasedRFA, RandomFeatureAttentionRegressor
from ._common import (
    Progress,
    _caption,
    _curve,
    _figure,
    _figure_legend,
    _log_axis,
    _mean_spread,
    _save,
    _seeds_text,
    format_table,
    run_tasks,
    seed_pair,
    summarize,
)

__all__ = [
    "default_config",
    "format_rfa_summary",
    "plot_rfa",
    "run_rfa",
    "smallest_n",
]

MODELS = ("RFA", "BiasedRFA", "RFMLP")
TABLES = (
    "degree",
    "degree_thresholds",
    "keys",
    "mean_scale",
    "softmax",
    "softmax_temperature",
)

# Settings, chosen from the first run of benchmarks/bench_rfa_claims.py
# (results/rfa_claims.json; it now runs this study with n up to 10,000, N up
# to 32 and 5 seeds):
#
# * d = 4 and N = 4, 200 heads (p = 1000 trained weights, RFMLP 1000 hidden
#   units): 0.6 s per curve of six sizes up to n = 3200 on average (122 s of
#   fitting for 195, load 3). n = 10,000 is left to the benchmark: no
#   threshold moved there (those above 3200 stayed above 10,000), and one RFA
#   fit at n = 10,000 took as long as its fits at 100 to 3000 together (1.4 s
#   against 1.3 s).
# * threshold 0.25 (three quarters of the variance explained): with 200 heads
#   the degree-2 errors of RFA and BiasedRFA level off near 0.15 (a floor of
#   the width, not of n), so a threshold of 0.1 would measure the width.
# * the mean-scale and softmax tables reuse the degree table's fits where they
#   coincide (mu = 0 is RFA, mu = 1 BiasedRFA's default, ReLU RFA's default):
#   every distinct curve is fitted once (50 of them, 250 tasks with 5 seeds).
#
# Run time of ``python -m sklearn_attn reproduce rfa`` on a 2-core machine:
# 160 s at a load average of 0.7 to 1.0 with the gamma targets (127 s without
# them at 3.0 to 3.3, 5 minutes beside a two-worker benchmark at 3.1 to 3.9);
# --quick 10.6 s at 0.7 (10 s without gamma at 3.0, 5.6 s of it fitting, the
# rest imports and the figure; 28 s beside the benchmark).
# Each curve runs on one BLAS thread: at these sizes two threads were twice as
# slow on two busy cores (5.8 s against 2.9 s for four curves, load average
# 3.5 to 4.5). The settings before these (fixed penalties, 500 heads, two
# BLAS threads per fit) took 5 minutes on free cores, 7 to 14 under load.
_DEFAULT_CONFIG = {
    "n_seeds": 5,
    "n_test": 2000,
    "degree": {
        "token_dim": 4,
        "n_keys": 4,
        "n_heads": 200,
        "models": MODELS,
        "targets": (
            "correlation-1",
            "correlation-2",
            "correlation-3",
            "correlation-3-power",
            # exp(gamma t) of growing gamma: the paper's "natural" correlation
            # targets, more of their variance at high degree as gamma grows
            # (about 40 s more on two cores).
            "gamma-0.5",
            "gamma-1",
            "gamma-2",
            "gamma-3",
        ),
        "train_sizes": (100, 200, 400, 800, 1600, 3200),
        "threshold": 0.25,
    },
    "keys": {
        "token_dim": 4,
        "n_keys": (4, 16),
        "n_heads": 200,
        "models": MODELS,
        "targets": ("correlation-1", "value-1"),
        "train_sizes": (100, 200, 400, 800, 1600, 3200),
    },
    "mean_scale": {
        "token_dim": 4,
        "n_keys": 4,
        "n_heads": 200,
        "target": "correlation-2",
        "mean_scales": (0.0, 0.25, 0.5, 1.0, 2.0, 4.0),
        "train_sizes": (200, 800, 3200),
    },
    "softmax": {
        "token_dim": 4,
        "n_keys": 4,
        "n_heads": 200,
        "targets": (
            "correlation-1",
            "correlation-2",
            "correlation-3",
            "value-1",
            "value-2",
            "value-3",
            "gamma-1",
        ),
        "train_sizes": (400, 3200),
        # The inverse temperature c, as qk_std = c / sqrt(d) (c = 1 is the
        # default), on the targets softmax weights can represent.
        "inverse_temperatures": (0.25, 1.0, 4.0),
        "temperature_targets": ("value-1", "value-2"),
        "temperature_train_sizes": (3200,),
    },
}

# 100 heads, 2 seeds, fewer targets and sizes: the same orderings, noisier.
_QUICK_CONFIG = {
    "n_seeds": 2,
    "n_test": 1000,
    "degree": {
        **_DEFAULT_CONFIG["degree"],
        "n_heads": 100,
        "targets": (
            "correlation-1",
            "correlation-2",
            "correlation-3",
            "gamma-1",
            "gamma-3",
        ),
        "train_sizes": (100, 200, 400, 800, 1600),
    },
    "keys": {
        **_DEFAULT_CONFIG["keys"],
        "n_heads": 100,
        "targets": ("correlation-1",),
        "train_sizes": (100, 200, 400, 800, 1600),
    },
    "mean_scale": {
        **_DEFAULT_CONFIG["mean_scale"],
        "n_heads": 100,
        "mean_scales": (0.0, 0.5, 1.0, 2.0),
        "train_sizes": (200, 800, 1600),
    },
    "softmax": {
        **_DEFAULT_CONFIG["softmax"],
        "n_heads": 100,
        "targets": ("correlation-1", "correlation-2", "value-1", "gamma-1"),
        "train_sizes": (1600,),
        "inverse_temperatures": (),
        "temperature_targets": (),
    },
}


def default_config(quick=False):
    """The default (or ``--quick``) settings of :func:`run_rfa`.

    Parameters
    ----------
    quick : bool, default=False
        Return the reduced settings.

    Returns
    -------
    config : dict
        A deep copy (safe to modify): ``n_seeds``, ``n_test`` and one dict per
        study (``"degree"``, ``"keys"``, ``"mean_scale"``, ``"softmax"``) with
        its ``token_dim``, ``n_keys``, ``n_heads``, targets and
        ``train_sizes``. Targets are named as in the tables:
        ``"correlation-2"`` is ``make_token_regression(target="correlation",
        degree=2, polynomial="gegenbauer")``, ``"correlation-3-power"`` the
        power ``t**3`` (``polynomial="power"``), ``"gamma-1"`` the target
        ``mean_i exp(t_i)``.

    Examples
    --------
    >>> from sklearn_attn.experiments import default_config
    >>> default_config()["degree"]["targets"][:4]
    ('correlation-1', 'correlation-2', 'correlation-3', 'correlation-3-power')
    >>> default_config()["degree"]["targets"][4:]
    ('gamma-0.5', 'gamma-1', 'gamma-2', 'gamma-3')
    >>> default_config(quick=True)["n_seeds"]
    2
    """
    return copy.deepcopy(_QUICK_CONFIG if quick else _DEFAULT_CONFIG)


def _target_spec(label):
    """The keywords of ``make_token_regression`` for a target name."""
    kind, _, rest = label.partition("-")
    if kind == "gamma" and rest:
        return {"target": "gamma", "gamma": float(rest)}
    degree, _, polynomial = rest.partition("-")
    if kind in ("correlation", "value") and degree.isdigit():
        polynomial = polynomial or "gegenbauer"
        if polynomial in ("gegenbauer", "power"):
            return {"target": kind, "degree": int(degree), "polynomial": polynomial}
    raise ValueError(
        f"Unknown target {label!r}; expected e.g. 'correlation-2', "
        "'value-1', 'correlation-3-power' or 'gamma-1'."
    )


def _make_model(name, *, n_heads, token_dim, random_state, **params):
    """RFA, BiasedRFA or RFMLP (``M (d + 1)`` hidden units), ``alpha="auto"``."""
    if name == "RFA":
        return RandomFeatureAttentionRegressor(
            n_heads, random_state=random_state, **params
        )
    if name == "BiasedRFA":
        return BiasedRFA(n_heads, random_state=random_state, **params)
    if name == "RFMLP":
        # Matched trained-parameter count: M (d + 1) output weights.
        return RFMLP(n_heads * (token_dim + 1), random_state=random_state, **params)
    raise ValueError(f"Unknown model {name!r}; expected one of {list(MODELS)}.")


def _curve_errors(model, X, y, n_train_max, train_sizes):
    """Normalised test errors of ``model`` at each train size.

    The first ``n_train_max`` samples are the training pool (nested prefixes of
    it are used, a fresh fit each), the rest a fixed test set of fresh samples.
    """
    n = X.shape[0]
    train_idx = np.arange(n_train_max)
    test_idx = np.arange(n_train_max, n)
    sizes, _, test_scores = learning_curve(
        model,
        X,
        y,
        train_sizes=np.asarray(train_sizes),
        cv=[(train_idx, test_idx)],
        scoring="neg_mean_squared_error",
        shuffle=False,
        error_score="raise",
    )
    return sizes, -test_scores[:, 0] / np.var(y[test_idx])


def _one_curve(model, params, curve, sizes, n_test, seeds):
    """One task: the test errors of one model on one draw, at ``sizes``."""
    target, token_dim, n_keys, n_heads = curve
    pool_seed, test_seed, weight_seed = seeds
    # One BLAS thread: at these sizes two were twice as slow on busy cores.
    with threadpool_limits(1):
        # The training pool and the test set of a target, setting and
        # repetition, the same for every model: the comparisons are paired.
        # make_token_regression draws sample after sample, so a smaller pool
        # is a prefix of a larger one: every curve draws what it needs.
        common = dict(n_keys=n_keys, token_dim=token_dim, **_target_spec(target))
        X, y = make_token_regression(max(sizes), random_state=pool_seed, **common)
        X_test, y_test = make_token_regression(n_test, random_state=test_seed, **common)
        estimator = _make_model(
            model,
            n_heads=n_heads,
            token_dim=token_dim,
            random_state=weight_seed,
            **dict(params),
        )
        _, errors = _curve_errors(
            estimator,
            np.concatenate([X, X_test]),
            np.concatenate([y, y_test]),
            max(sizes),
            sizes,
        )
    return errors


class _Curves:
    """The distinct learning curves the tables ask for, each fitted once.

    A curve is a model with its parameters on one target and setting; the
    tables name the sizes they need, and each curve is fitted at the union.
    """

    def __init__(self, n_seeds):
        self.n_seeds = n_seeds
        self.sizes = {}  # (model, params, curve) -> set of sizes
        self.origin = {}  # (model, params, curve) -> the table that asked first
        self.errors = {}  # (model, params, curve) -> {size: errors per seed}

    @staticmethod
    def _key(model, params, target, cfg, n_keys):
        curve = (target, int(cfg["token_dim"]), int(n_keys), int(cfg["n_heads"]))
        return model, tuple(sorted(params.items())), curve

    def need(self, table, model, params, target, cfg, n_keys, sizes):
        key = self._key(model, params, target, cfg, n_keys)
        self.sizes.setdefault(key, set()).update(int(n) for n in sizes)
        self.origin.setdefault(key, table)

    def get(self, model, params, target, cfg, n_keys, sizes):
        """Errors of shape ``(n_seeds, len(sizes))``."""
        by_size = self.errors[self._key(model, params, target, cfg, n_keys)]
        return np.array([by_size[int(n)] for n in sizes]).T

    def tasks(self, random_state, n_test):
        tasks = []
        for key, sizes in self.sizes.items():
            model, params, curve = key
            # Data seeds from the target's name and setting (so that a table's
            # numbers do not depend on which other tables run), weight seeds
            # from the repetition alone: RFA, BiasedRFA(mu) and the softmax
            # share the data and the random part of the weights.
            data_key = zlib.crc32(repr(curve[:3]).encode())
            for seed in range(self.n_seeds):
                seeds = (
                    *seed_pair(random_state, data_key, seed),
                    seed_pair(random_state, seed)[1],
                )
                args = (model, params, curve, tuple(sorted(sizes)), n_test, seeds)
                tasks.append((key, (_one_curve, *args)))
        return tasks

    def store(self, key, errors_per_seed):
        sizes = sorted(self.sizes[key])
        errors = np.asarray(errors_per_seed)
        self.errors[key] = {n: errors[:, j] for j, n in enumerate(sizes)}


def _n_params(cfg):
    return int(cfg["n_heads"]) * (int(cfg["token_dim"]) + 1)


def _setting_columns(cfg, n_keys):
    return {
        "N": int(n_keys),
        "d": int(cfg["token_dim"]),
        "n_heads": int(cfg["n_heads"]),
        "n_params": _n_params(cfg),
    }


def _error_rows(curves, cfg, n_keys_list):
    rows = []
    sizes = tuple(cfg["train_sizes"])
    for n_keys in n_keys_list:
        for target in cfg["targets"]:
            for model in cfg["models"]:
                errors = curves.get(model, {}, target, cfg, n_keys, sizes)
                for j, n in enumerate(sizes):
                    mean, std = summarize(errors[:, j])
                    rows.append(
                        {
                            "model": model,
                            "target": target,
                            **_setting_columns(cfg, n_keys),
                            "n_train": int(n),
                            "error_mean": mean,
                            "error_std": std,
                            "n_seeds": int(np.isfinite(errors[:, j]).sum()),
                        }
                    )
    return rows


def smallest_n(train_sizes, errors, threshold):
    """The smallest ``n`` of the grid whose error is at most ``threshold``.

    Parameters
    ----------
    train_sizes : sequence of int
        The grid, increasing.
    errors : sequence of float
        The error at each size.
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


def _threshold_rows(curves, cfg):
    sizes = tuple(cfg["train_sizes"])
    threshold = float(cfg["threshold"])
    rows = []
    for target in cfg["targets"]:
        for model in cfg["models"]:
            errors = curves.get(model, {}, target, cfg, cfg["n_keys"], sizes)
            per_seed = [smallest_n(sizes, e, threshold) for e in errors]
            reached = [n for n in per_seed if n is not None]
            mean, std = summarize(errors[:, -1])
            rows.append(
                {
                    "model": model,
                    "target": target,
                    **_setting_columns(cfg, cfg["n_keys"]),
                    "threshold": threshold,
                    # From the mean curve over the seeds; min and max over the
                    # seeds that reach the threshold, n_reached of n_seeds.
                    "n_needed": smallest_n(sizes, errors.mean(axis=0), threshold),
                    "n_needed_min": min(reached, default=None),
                    "n_needed_max": max(reached, default=None),
                    "n_reached": len(reached),
                    "n_seeds": len(per_seed),
                    "largest_n": int(sizes[-1]),
                    "error_at_largest_n_mean": mean,
                    "error_at_largest_n_std": std,
                }
            )
    return rows


def _mean_scale_model(mu):
    # BiasedRFA(qk_mean_scale=0) draws RFA's weights exactly and mu = 1 is its
    # default: named so, they are the degree table's fits.
    if mu == 0:
        return "RFA", {}
    return "BiasedRFA", ({} if mu == 1 else {"qk_mean_scale": float(mu)})


def _mean_scale_rows(curves, cfg):
    sizes = tuple(cfg["train_sizes"])
    target, n_keys = cfg["target"], cfg["n_keys"]
    reference = curves.get("RFA", {}, target, cfg, n_keys, sizes)
    rows = []
    for mu in cfg["mean_scales"]:
        errors = curves.get(*_mean_scale_model(mu), target, cfg, n_keys, sizes)
        for j, n in enumerate(sizes):
            mean, std = summarize(errors[:, j])
            ratio_mean, ratio_std = summarize(errors[:, j] / reference[:, j])
            rows.append(
                {
                    "target": target,
                    "mean_scale": float(mu),
                    **_setting_columns(cfg, n_keys),
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


def _softmax_params(c, token_dim):
    # c = 1 is the default qk_std = 1 / sqrt(d): the softmax table's fits.
    if c == 1:
        return {"activation": "softmax"}
    return {"activation": "softmax", "qk_std": float(c) / math.sqrt(token_dim)}


def _softmax_rows(curves, cfg):
    sizes = tuple(cfg["train_sizes"])
    n_keys = cfg["n_keys"]
    rows = []
    for target in cfg["targets"]:
        relu = curves.get("RFA", {}, target, cfg, n_keys, sizes)
        soft = curves.get("RFA", _softmax_params(1, 0), target, cfg, n_keys, sizes)
        for j, n in enumerate(sizes):
            relu_mean, relu_std = summarize(relu[:, j])
            soft_mean, soft_std = summarize(soft[:, j])
            ratio_mean, ratio_std = summarize(soft[:, j] / relu[:, j])
            rows.append(
                {
                    "target": target,
                    **_setting_columns(cfg, n_keys),
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
    d, n_keys = int(cfg["token_dim"]), cfg["n_keys"]
    rows = []
    for target in cfg["temperature_targets"]:
        for c in cfg["inverse_temperatures"]:
            params = _softmax_params(c, d)
            errors = curves.get("RFA", params, target, cfg, n_keys, sizes)
            for j, n in enumerate(sizes):
                mean, std = summarize(errors[:, j])
                rows.append(
                    {
                        "target": target,
                        "inverse_temperature": float(c),
                        "qk_std": float(c) / math.sqrt(d),
                        **_setting_columns(cfg, n_keys),
                        "n_train": int(n),
                        "error_mean": mean,
                        "error_std": std,
                        "n_seeds": int(np.isfinite(errors[:, j]).sum()),
                    }
                )
    return rows


def _request_curves(curves, cfg):
    """Name every curve the tables of ``cfg`` need (each part may be None)."""
    degree, keys, mean_scale, softmax = (
        cfg.get(part) for part in ("degree", "keys", "mean_scale", "softmax")
    )
    if degree:
        for target in degree["targets"]:
            for model in degree["models"]:
                curves.need(
                    "degree",
                    model,
                    {},
                    target,
                    degree,
                    degree["n_keys"],
                    degree["train_sizes"],
                )
    if keys:
        for n_keys in keys["n_keys"]:
            for target in keys["targets"]:
                for model in keys["models"]:
                    curves.need(
                        "keys", model, {}, target, keys, n_keys, keys["train_sizes"]
                    )
    if mean_scale:
        for mu in (0.0, *mean_scale["mean_scales"]):
            curves.need(
                "mean_scale",
                *_mean_scale_model(mu),
                mean_scale["target"],
                mean_scale,
                mean_scale["n_keys"],
                mean_scale["train_sizes"],
            )
    if softmax:
        n_keys = softmax["n_keys"]
        for target in softmax["targets"]:
            for params in ({}, _softmax_params(1, 0)):
                curves.need(
                    "softmax",
                    "RFA",
                    params,
                    target,
                    softmax,
                    n_keys,
                    softmax["train_sizes"],
                )
        d = softmax["token_dim"]
        for target in softmax["temperature_targets"]:
            for c in softmax["inverse_temperatures"]:
                curves.need(
                    "softmax_temperature",
                    "RFA",
                    _softmax_params(c, d),
                    target,
                    softmax,
                    n_keys,
                    softmax["temperature_train_sizes"],
                )


def _curve_label(key):
    model, params, (target, d, n_keys, n_heads) = key
    extra = "".join(f" {k}={v:g}" if k != "activation" else f" {v}" for k, v in params)
    return f"{target} d={d} N={n_keys} {model}{extra}"


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
    :class:`~sklearn_attn.BiasedRFA` and :class:`~sklearn_attn.RFMLP` (with
    ``n_heads * (d + 1)`` hidden units, the same number of trained weights)
    against the number of training samples ``n``, on key-averaged targets of
    the correlations ``t_i = <x_0, x_i> / sqrt(d)``:

    * **degree**: targets ``mean_i Q_p(t_i)`` of degree ``p`` = 1, 2, 3 (``Q_p``
      the orthogonal polynomial of degree ``p``, so that degree ``p`` is
      exactly degree ``p``), ``mean_i t_i**3`` and ``mean_i exp(gamma t_i)``
      for several ``gamma``; and the smallest ``n`` of the grid reaching an
      error threshold, per model and target;
    * **keys**: the degree-1 ``"correlation"`` and ``"value"`` targets for
      several numbers of keys ``N``;
    * **mean_scale**: BiasedRFA's ``qk_mean_scale`` on the degree-2 target,
      with its error ratio to RFA on the same data and random weights;
    * **softmax**: RFA with ``activation="relu"`` against ``"softmax"``, and
      the softmax's inverse temperature ``c`` (``qk_std = c / sqrt(d)``).

    Each curve comes from :func:`sklearn.model_selection.learning_curve` with a
    single split: the training sets are nested prefixes of one pool and the
    test set is a fixed set of fresh samples. Every fit chooses its ridge
    penalty by generalized cross-validation (``alpha="auto"``). Every
    repetition draws new data and new random weights; within a repetition the
    models share the data of a target and the random part of the weights, and
    a curve that several tables use (RFA on the degree-2 target is the
    reference of the mean-scale table and the ReLU column of the softmax
    table) is fitted once.

    Parameters
    ----------
    quick : bool, default=False
        Use the reduced settings (fewer targets, heads, sizes and
        repetitions). Measured times are in the reproduction guide.
    n_seeds : int, default=None
        Number of repetitions; ``None`` uses the setting's default (5, or 2
        with ``quick``).
    random_state : int, default=0
        Master seed; all data and weight seeds are derived from it.
    progress : callable, None or False, default=None
        Where the progress lines go (one per distinct curve, with the elapsed
        time): ``None`` prints them to standard error, ``False`` drops them, a
        callable receives each line.
    n_jobs : int, default=None
        Learning curves computed at once by
        :class:`sklearn.utils.parallel.Parallel`, one task per curve and
        repetition (each with its own seeds and one BLAS thread, so the tables
        do not depend on ``n_jobs`` or on the joblib backend: under
        ``joblib.parallel_config(backend="dask")`` the tasks run on a Dask
        cluster). ``None`` runs them one after another.
    config : dict, default=None
        Overrides of the settings returned by ``default_config(quick)``, e.g.
        ``{"degree": {"train_sizes": (100, 1000)}}`` (nested dicts are merged,
        unknown names are an error); a study set to ``None`` is left out, and
        its tables are empty.

    Returns
    -------
    tables : dict
        Lists of dict rows, by name:

        - ``"degree"``, ``"keys"``: ``model``, ``target``, ``N``, ``d``,
          ``n_heads``, ``n_params``, ``n_train``, ``error_mean``,
          ``error_std``, ``n_seeds``;
        - ``"degree_thresholds"``: per model and target, ``threshold``,
          ``n_needed`` (from the mean curve; ``None`` if not reached),
          ``n_needed_min`` and ``n_needed_max`` (over the seeds that reach
          it), ``n_reached`` (of ``n_seeds``), ``largest_n`` and the error
          there (``error_at_largest_n_mean``, ``error_at_largest_n_std``);
        - ``"mean_scale"``: per ``mean_scale`` and ``n_train``, the error and
          the paired ratio ``error(BiasedRFA) / error(RFA)``
          (``ratio_to_rfa_mean``, ``ratio_to_rfa_std``);
        - ``"softmax"``: per target and ``n_train``, ``relu_*``,
          ``softmax_*`` and ``ratio_softmax_to_relu_*`` (mean and std);
        - ``"softmax_temperature"``: per target and ``inverse_temperature``,
          the softmax's error.

    See Also
    --------
    plot_rfa : Draw the tables.
    write_csv : Save a table.

    Examples
    --------
    >>> from sklearn_attn.experiments import run_rfa
    >>> tables = run_rfa(quick=True, progress=False)  # doctest: +SKIP
    >>> sorted(tables)  # doctest: +SKIP
    ['degree', 'degree_thresholds', 'keys', 'mean_scale', 'softmax', ...]
    """
    cfg = default_config(quick)
    for key, value in (config or {}).items():
        if key not in cfg:
            raise ValueError(
                f"Unknown setting {key!r} in config; expected some of {sorted(cfg)}."
            )
        if isinstance(value, dict) and isinstance(cfg[key], dict):
            unknown = sorted(set(value) - set(cfg[key]))
            if unknown:
                raise ValueError(
                    f"Unknown settings {unknown} in config[{key!r}]; expected "
                    f"some of {sorted(cfg[key])}."
                )
            cfg[key].update(value)
        else:
            cfg[key] = value
    if n_seeds is None:
        n_seeds = cfg["n_seeds"]
    if int(n_seeds) < 1:
        raise ValueError(f"n_seeds must be a positive integer; got {n_seeds!r}.")
    n_seeds = int(n_seeds)
    for part in ("degree", "keys", "mean_scale", "softmax"):
        if cfg.get(part):
            for target in cfg[part].get("targets", [cfg[part].get("target")]):
                _target_spec(target)  # unknown names fail before any fit
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
        mean, std = summarize(np.asarray(errors)[:, -1])
        report(
            f"[{count // n_seeds}/{n_curves}] {curves.origin[key]}: "
            f"{_curve_label(key)}: error {_mean_spread(mean, std, n_seeds)} "
            f"at n={max(curves.sizes[key])}"
        )
        errors = []
    report("done")

    tables = dict.fromkeys(TABLES)
    for name in TABLES:
        tables[name] = []
    if cfg.get("degree"):
        deg = cfg["degree"]
        tables["degree"] = _error_rows(curves, deg, [deg["n_keys"]])
        tables["degree_thresholds"] = _threshold_rows(curves, deg)
    if cfg.get("keys"):
        tables["keys"] = _error_rows(curves, cfg["keys"], cfg["keys"]["n_keys"])
    if cfg.get("mean_scale"):
        tables["mean_scale"] = _mean_scale_rows(curves, cfg["mean_scale"])
    if cfg.get("softmax"):
        tables["softmax"] = _softmax_rows(curves, cfg["softmax"])
        tables["softmax_temperature"] = _temperature_rows(curves, cfg["softmax"])
    return tables


# -- summary -------------------------------------------------------------------


def _sizes(rows):
    return sorted({row["n_train"] for row in rows})


def _by(rows, *keys):
    return {tuple(row[k] for k in keys): row for row in rows}


def _seeds_of(rows, key="n_seeds"):
    seeds = _seeds_text(row[key] for row in rows)
    spread = " \u00b1 std" if any(row[key] > 1 for row in rows) else ""
    return f"mean{spread} over {seeds}"


def _setting_text(row):
    heads = f"{row['n_heads']} heads ({row['n_params']} weights)"
    return f"d={row['d']}, N={row['N']}, {heads}"


def _needed_text(row):
    if row is None:
        return "-"
    if row["n_needed"] is None and not row["n_reached"]:
        return f"> {row['largest_n']}"
    needed = "-" if row["n_needed"] is None else str(row["n_needed"])
    low, high = row["n_needed_min"], row["n_needed_max"]
    seeds = f"{row['n_reached']}/{row['n_seeds']}"
    span = f"{low}" if low == high else f"{low}-{high}"
    return f"{needed} [{span}, {seeds}]"


def _format_curves(rows, title, thresholds=None):
    sizes = _sizes(rows)
    cells = _by(rows, "target", "N", "model", "n_train")
    needed = _by(thresholds or [], "target", "model")
    header = ["target", "N", "model", *(f"n={n}" for n in sizes)]
    if thresholds:
        header.append("n*")
    lines = []
    for target, n_keys, model in dict.fromkeys(
        (r["target"], r["N"], r["model"]) for r in rows
    ):
        line = [target, str(n_keys), model]
        for n in sizes:
            row = cells.get((target, n_keys, model, n))
            line.append(
                _mean_spread(row["error_mean"], row["error_std"], row["n_seeds"])
                if row
                else "-"
            )
        if thresholds:
            line.append(_needed_text(needed.get((target, model))))
        lines.append(line)
    first = rows[0]
    text = (
        f"{title}: test MSE / Var y against n ({_seeds_of(rows)}), "
        f"d={first['d']}, {first['n_heads']} heads ({first['n_params']} weights)"
    )
    if thresholds:
        text += (
            f"\nn* = smallest n whose mean error is <= {thresholds[0]['threshold']:g} "
            "[range over the seeds that reach it, seeds reaching it]"
        )
    return text + "\n" + format_table(header, lines)


def _format_mean_scale(rows):
    sizes = _sizes(rows)
    cells = _by(rows, "mean_scale", "n_train")
    header = [
        "mu",
        *(f"error n={n}" for n in sizes),
        *(f"ratio n={n}" for n in sizes),
    ]
    lines = []
    for mu in dict.fromkeys(r["mean_scale"] for r in rows):
        line = [f"{mu:g}"]
        for column in ("error", "ratio_to_rfa"):
            for n in sizes:
                row = cells[mu, n]
                line.append(
                    _mean_spread(
                        row[f"{column}_mean"], row[f"{column}_std"], row["n_seeds"]
                    )
                )
        lines.append(line)
    first = rows[0]
    return (
        f"BiasedRFA's mean scale mu on {first['target']} (mu = 0 is RFA, 1 the "
        f"default): test MSE / Var y and the paired ratio to RFA's, below 1 "
        f"BiasedRFA better ({_seeds_of(rows)}), {_setting_text(first)}\n"
        + format_table(header, lines)
    )


def _format_softmax(rows, temperature):
    sizes = _sizes(rows)
    cells = _by(rows, "target", "n_train")
    header = ["target"]
    for n in sizes:
        header += [f"relu n={n}", f"softmax n={n}"]
    lines = []
    for target in dict.fromkeys(r["target"] for r in rows):
        line = [target]
        for n in sizes:
            row = cells[target, n]
            for column in ("relu", "softmax"):
                line.append(
                    _mean_spread(
                        row[f"{column}_mean"], row[f"{column}_std"], row["n_seeds"]
                    )
                )
        lines.append(line)
    first = rows[0]
    text = (
        f"RFA: ReLU against softmax attention weights, test MSE / Var y "
        f"({_seeds_of(rows)}), {_setting_text(first)}\n" + format_table(header, lines)
    )
    if temperature:
        sizes = _sizes(temperature)
        cells = _by(temperature, "target", "inverse_temperature", "n_train")
        lines = []
        for target, c in dict.fromkeys(
            (r["target"], r["inverse_temperature"]) for r in temperature
        ):
            line = [target, f"{c:g}"]
            for n in sizes:
                row = cells[target, c, n]
                line.append(
                    _mean_spread(row["error_mean"], row["error_std"], row["n_seeds"])
                )
            lines.append(line)
        text += (
            "\n\nSoftmax inverse temperature c (qk_std = c / sqrt(d); c = 1 is the "
            f"default), test MSE / Var y ({_seeds_of(temperature)})\n"
            + format_table(["target", "c", *(f"n={n}" for n in sizes)], lines)
        )
    return text


def format_rfa_summary(tables):
    """Plain-text tables of :func:`run_rfa`'s results.

    Parameters
    ----------
    tables : dict
        The output of :func:`run_rfa`.

    Returns
    -------
    text : str
        The degree table (a line per target and model, a column per ``n``,
        and the smallest ``n`` reaching the threshold), the keys table, the
        mean-scale table (errors and paired ratios to RFA) and the
        softmax/ReLU table (with the inverse temperatures when run); cells
        ``mean ± std`` over the repetitions (the mean alone over one), each
        title saying how many.
    """
    parts = []
    if tables.get("degree"):
        parts.append(
            _format_curves(
                tables["degree"], "Degree table", tables.get("degree_thresholds")
            )
        )
    if tables.get("keys"):
        parts.append(_format_curves(tables["keys"], "Number of keys N"))
    if tables.get("mean_scale"):
        parts.append(_format_mean_scale(tables["mean_scale"]))
    if tables.get("softmax"):
        parts.append(
            _format_softmax(tables["softmax"], tables.get("softmax_temperature"))
        )
    return "\n\n".join(parts)


# -- figure --------------------------------------------------------------------

_COLORS = {"RFA": "tab:blue", "BiasedRFA": "tab:orange", "RFMLP": "tab:green"}
# Targets in the degree panels: a colour per degree, the power t^3 in grey.
_TARGET_COLORS = ("tab:purple", "tab:red", "tab:brown", "tab:pink", "tab:olive")
_STYLES = ("-", "--", ":", "-.")
_STYLE_NAMES = {"-": "solid", "--": "dashed", ":": "dotted", "-.": "dash-dot"}


def _target_math(label):
    r"""A target name as mathtext, e.g. ``$\mathrm{mean}_i\, Q_2(t_i)$``."""
    spec = _target_spec(label)
    if spec["target"] == "gamma":
        return rf"$\mathrm{{mean}}_i\, e^{{{spec['gamma']:g} t_i}}$"
    p = spec["degree"]
    term = f"t_i^{{{p}}}" if spec["polynomial"] == "power" else f"Q_{{{p}}}(t_i)"
    if p == 1:
        term = "t_i"
    if spec["target"] == "value":
        term += r"\, x_{i1}"
    return rf"$\mathrm{{mean}}_i\, {term}$"


def _series(rows, **match):
    sel = [r for r in rows if all(r[k] == v for k, v in match.items())]
    sel.sort(key=lambda r: r["n_train"])
    mean = np.array([r["error_mean"] for r in sel], dtype=float)
    std = np.array([r["error_std"] for r in sel], dtype=float)
    n_seeds = min((r["n_seeds"] for r in sel), default=0)
    # On log axes: keep the lower edge of the band positive.
    low = np.maximum(mean - std, mean * 0.05)
    return [r["n_train"] for r in sel], mean, low, mean + std, n_seeds


def _reference_lines(ax, threshold=None):
    ax.axhline(
        1.0, color="0.5", linewidth=0.8, linestyle=":", label="predicting the mean"
    )
    if threshold is not None:
        ax.axhline(
            threshold,
            color="k",
            linewidth=0.8,
            linestyle="--",
            label=f"threshold {threshold:g}",
        )


def plot_rfa(tables, path=None):
    r"""Draw the figure of :func:`run_rfa`'s tables.

    Top row (the degree table): the normalised test error against ``n``
    (log-log), one panel per model, a line per target (a colour per degree,
    grey for :math:`t^3`), the dashed line the threshold of ``n*`` (given in
    the panel's title per target) and the dotted line at 1 the error of
    predicting the mean. Bottom row: the keys table (a panel per target, a
    colour per model, a line style per ``N``); BiasedRFA's error ratio to RFA
    against the mean scale :math:`\mu` (a shade per ``n``); and RFA's error
    with ReLU and softmax weights per target at the largest ``n``. Bands (or
    error bars) are ± one standard deviation over the repetitions, when there
    are several; one legend for the figure, below the panels; the title
    states the sizes and the number of seeds.

    matplotlib is imported here, not with the module; no pyplot state or
    interactive backend is used.

    Parameters
    ----------
    tables : dict
        The output of :func:`run_rfa`.
    path : str or path-like, default=None
        If given, the figure is saved there (the format follows the suffix).

    Returns
    -------
    fig : matplotlib.figure.Figure
        The figure.

    Examples
    --------
    >>> from sklearn_attn.experiments import plot_rfa, run_rfa
    >>> fig = plot_rfa(run_rfa(quick=True, progress=False), "rfa.png")  # doctest: +SKIP
    """
    degree = tables.get("degree") or []
    keys = tables.get("keys") or []
    mean_scale = tables.get("mean_scale") or []
    softmax = tables.get("softmax") or []
    models = list(dict.fromkeys(r["model"] for r in degree))
    key_targets = list(dict.fromkeys(r["target"] for r in keys))
    n_bottom = len(key_targets) + bool(mean_scale) + bool(softmax)
    n_cols = max(len(models), n_bottom, 1)
    height_top = 3.0 if degree else 0.0
    height_bottom = 3.2 if n_bottom else 0.0
    fig = _figure(3.2 * n_cols, max(height_top + height_bottom, 2.6) + 1.2)
    if degree and n_bottom:
        top, bottom = fig.subfigures(2, 1, height_ratios=[height_top, height_bottom])
    else:
        top = bottom = fig
    if degree:
        _plot_degree(top, degree, tables.get("degree_thresholds") or [], models)
    if n_bottom:
        axes = list(bottom.subplots(1, n_bottom, squeeze=False)[0])
        for ax, target in zip(axes, key_targets, strict=False):
            _plot_keys(ax, keys, target)
        axes = axes[len(key_targets) :]
        if mean_scale:
            _plot_mean_scale(axes.pop(0), mean_scale)
        if softmax:
            _plot_softmax(axes.pop(0), softmax)

    rows = degree + keys + mean_scale + softmax
    first = rows[0] if rows else None
    details = []
    if first:
        details.append(
            f"$d = {first['d']}$, {first['n_heads']} heads "
            f"({first['n_params']} trained weights per model)"
        )
    seeds = _seeds_text(r["n_seeds"] for r in rows)
    spread = ", bands ± one std" if any(r["n_seeds"] > 1 for r in rows) else ""
    details.append(f"mean over {seeds}{spread}; $n$ training samples")
    _caption(
        fig,
        "Random-feature attention (Fu et al., 2023): normalised test error "
        "MSE / Var($y$)",
        "; ".join(details),
    )
    _figure_legend(fig, ncols=6)
    _save(fig, path)
    return fig


def _target_style(target, targets):
    """Colour and line style of a target's curves in the degree panels.

    The polynomial targets take the palette in turn (grey for ``t^3``); the
    ``gamma`` family is dashed, shaded from dark to light as ``gamma`` grows,
    so that neither family reuses the other's colours.
    """
    spec = _target_spec(target)
    if spec["target"] == "gamma":
        from matplotlib import colormaps

        gammas = sorted(
            _target_spec(t)["gamma"]
            for t in targets
            if _target_spec(t)["target"] == "gamma"
        )
        shade = 0.1 + 0.75 * gammas.index(spec["gamma"]) / max(1, len(gammas) - 1)
        return {"color": colormaps["viridis"](shade), "linestyle": "--"}
    if spec.get("polynomial") == "power":
        return {"color": "0.45"}
    polynomials = [t for t in targets if _target_spec(t)["target"] != "gamma"]
    index = polynomials.index(target) % len(_TARGET_COLORS)
    return {"color": _TARGET_COLORS[index]}


def _plot_degree(fig, rows, thresholds, models):
    """A panel per model: the error against n, a line per target."""
    targets = list(dict.fromkeys(r["target"] for r in rows))
    sizes = _sizes(rows)
    needed = _by(thresholds, "target", "model")
    threshold = thresholds[0]["threshold"] if thresholds else None
    axes = fig.subplots(1, len(models), squeeze=False, sharey="row")[0]
    for j, (ax, model) in enumerate(zip(axes, models, strict=True)):
        ax.set_yscale("log")
        _reference_lines(ax, threshold)
        for target in targets:
            x, mean, low, high, n_seeds = _series(rows, target=target, model=model)
            _curve(
                ax,
                x,
                mean,
                low=low,
                high=high,
                n_seeds=n_seeds,
                **_target_style(target, targets),
                label=_target_math(target),
            )
        title = f"{model}, $N = {rows[0]['N']}$"
        if thresholds:
            entries = [
                f"{_target_short(t)} {_short_needed(needed.get((t, model)))}"
                for t in targets
            ]
            # Three targets a line, so that the titles stay over their panels.
            lines = [", ".join(entries[i : i + 3]) for i in range(0, len(entries), 3)]
            title += "\n$n^*$: " + ",\n".join(lines)
        ax.set_title(title, fontsize=9)
        ax.grid(True, which="major", alpha=0.3)
        ax.set_xlabel("$n$ (training samples)")
        if j == 0:
            ax.set_ylabel("test MSE / Var($y$)")
    for ax in axes:
        _log_axis(ax, "x", ticks=sizes)
        _log_axis(ax, "y")


def _short_needed(row):
    if row is None:
        return "-"
    if row["n_needed"] is None:
        return f"$> {row['largest_n']}$"
    return str(row["n_needed"])


def _target_short(label):
    """A target in a few characters of mathtext: ``$Q_2$``, ``$t^3$``, ..."""
    spec = _target_spec(label)
    if spec["target"] == "gamma":
        return rf"$e^{{{spec['gamma']:g} t}}$"
    p = spec["degree"]
    term = f"t^{{{p}}}" if spec["polynomial"] == "power" else f"Q_{{{p}}}"
    if p == 1:
        term = "t"
    return f"${term}\\, x_1$" if spec["target"] == "value" else f"${term}$"


def _plot_keys(ax, rows, target):
    """Learning curves on one target, a colour per model, a style per N."""
    n_keys = sorted({r["N"] for r in rows})
    styles = dict(zip(n_keys, _STYLES, strict=False))
    ax.set_yscale("log")
    _reference_lines(ax)
    for model in dict.fromkeys(r["model"] for r in rows):
        for n in n_keys:
            x, mean, low, high, n_seeds = _series(rows, target=target, N=n, model=model)
            _curve(
                ax,
                x,
                mean,
                low=low,
                high=high,
                n_seeds=n_seeds,
                color=_COLORS.get(model),
                linestyle=styles.get(n, "-"),
                label=model,
            )
    key = ", ".join(
        f"{_STYLE_NAMES[styles[n]]} $N = {n}$" for n in n_keys if n in styles
    )
    ax.set_title(f"{_target_math(target)}\n{key}", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    ax.set_xlabel("$n$ (training samples)")
    ax.set_ylabel("test MSE / Var($y$)")
    _log_axis(ax, "x", ticks=_sizes(rows))
    _log_axis(ax, "y")


def _plot_mean_scale(ax, rows):
    """BiasedRFA's error ratio to RFA against mu, a shade per n."""
    sizes = _sizes(rows)
    shades = np.linspace(0.4, 1.0, len(sizes)) if len(sizes) > 1 else [1.0]
    ax.set_yscale("log")
    ax.axhline(1.0, color="k", linewidth=0.8)
    for size, shade in zip(sizes, shades, strict=True):
        sel = sorted(
            (r for r in rows if r["n_train"] == size), key=lambda r: r["mean_scale"]
        )
        mean = np.array([r["ratio_to_rfa_mean"] for r in sel], dtype=float)
        std = np.array([r["ratio_to_rfa_std"] for r in sel], dtype=float)
        _curve(
            ax,
            [r["mean_scale"] for r in sel],
            mean,
            low=np.maximum(mean - std, mean * 0.05),
            high=mean + std,
            n_seeds=min(r["n_seeds"] for r in sel),
            color=_shade(_COLORS["BiasedRFA"], shade),
            label=f"$n = {size}$",
        )
    ax.set_xlabel(r"mean scale $\mu$ (qk_mean_scale; $\mu = 0$ is RFA)")
    ax.set_ylabel("error BiasedRFA / error RFA")
    ax.set_title(
        f"{_target_math(rows[0]['target'])}: below 1, BiasedRFA better\n"
        "(paired; shade: $n$)",
        fontsize=9,
    )
    ax.grid(True, which="major", alpha=0.3)
    _log_axis(ax, "y")


def _plot_softmax(ax, rows):
    """RFA with ReLU and with softmax weights, per target at the largest n."""
    size = max(r["n_train"] for r in rows)
    sel = [r for r in rows if r["n_train"] == size]
    x = np.arange(len(sel))
    ax.set_yscale("log")
    _reference_lines(ax)
    for offset, (column, color, label) in zip(
        (-0.12, 0.12),
        (
            ("relu", _COLORS["RFA"], "RFA, ReLU"),
            ("softmax", "tab:purple", "RFA, softmax"),
        ),
        strict=True,
    ):
        mean = np.array([r[f"{column}_mean"] for r in sel], dtype=float)
        std = np.array([r[f"{column}_std"] for r in sel], dtype=float)
        ax.plot(
            x + offset,
            mean,
            marker="o",
            markersize=4,
            linestyle="none",
            color=color,
            label=label,
        )
        if min(r["n_seeds"] for r in sel) > 1:
            low = np.maximum(mean - std, mean * 0.05)
            ax.errorbar(
                x + offset,
                mean,
                yerr=[mean - low, std],
                fmt="none",
                ecolor=color,
                elinewidth=1,
                capsize=2,
            )
    ax.set_xticks(x, [r["target"] for r in sel], rotation=90, fontsize=7)
    ax.set_ylabel("test MSE / Var($y$)")
    ax.set_title(f"ReLU against softmax attention, $n = {size}$", fontsize=9)
    ax.grid(True, which="major", axis="y", alpha=0.3)
    _log_axis(ax, "y")


def _shade(color, amount):
    """Blend ``color`` with white: ``amount`` 1 is the colour, 0 white."""
    from matplotlib.colors import to_rgb

    rgb = np.array(to_rgb(color))
    return tuple(1.0 - amount * (1.0 - rgb))
