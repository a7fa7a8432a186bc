"""The learning curves of the multi-head attention reproduction.

Per planted layer, the test errors of the learner with ``m`` and ``m - 1``
heads and of the uniform-attention linear baseline at every training size,
and their summary over the repetitions.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ...attention import MultiHeadAttentionLearner, match_heads
from ...datasets import make_attention_layer_regression
from .._common import seed_pair, summarize
from ._config import _SUCCESS, MODELS, _relative_error


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
