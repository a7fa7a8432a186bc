"""The curves of the random-feature attention reproduction: one task, and the
curves the tables ask for.

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
from .._common import seed_pair
from ._config import MODELS, target_spec


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
