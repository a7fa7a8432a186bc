"""The tables of the random-feature attention reproduction, from its curves."""

from __future__ import annotations

import math

import numpy as np

from .._common import summarize
from ._curves import (
    _biased_settings,
    _degree_variants,
    _mean_scale_model,
    _n_params,
    _softmax_params,
)

__all__ = ["smallest_n"]


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
