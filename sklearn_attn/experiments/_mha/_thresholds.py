"""The recovery thresholds of the multi-head attention reproduction.

The instances of the threshold studies (a planted layer, its pool of training
data and its test set), the bisection for the smallest training size that
recovers the layer, and the summary of the instances per cell.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from ...attention import MultiHeadAttentionLearner, match_heads
from ...datasets import make_attention_layer_regression
from ._config import CRITERIA, FUNCTION_TOL, INPUTS, PARAMETER_TOL, _relative_error


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
