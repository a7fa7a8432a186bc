"""Settings of the multi-head attention reproduction: models, criteria, sizes."""

from __future__ import annotations

import copy

import numpy as np

__all__ = [
    "CRITERIA",
    "FUNCTION_TOL",
    "GRID",
    "INPUTS",
    "MODELS",
    "PARAMETER_TOL",
    "default_mha_config",
]

MODELS = ("learner", "too_few_heads", "uniform_linear")
INPUTS = ("boolean", "gaussian")
CRITERIA = ("function", "parameters")
# sqrt(2)-spaced training sizes of the recovery thresholds.
GRID = (2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64, 91, 128, 181, 256, 362, 512, 724, 1024)

# A start counts as a success below this test relative error: on noiseless
# data a recovered layer is exact to rounding, far below it, and a spurious
# minimum far above.
_SUCCESS = 1e-6
# The thresholds' criteria: the function (test relative error, as above) and
# the parameters (relative errors of the matched Theta_i and W_i).
FUNCTION_TOL = _SUCCESS
PARAMETER_TOL = 1e-3

# d = k = 6 give 2 m d^2 = 72 m parameters and k d = 36 equations per
# sample, so n = 2 m samples are needed to pin the parameters down; with
# ||Theta_i||_F = 2 and noiseless labels the layer is recovered exactly from a
# few samples per head, so the sizes start at 2 to show the threshold.
_DEFAULT_CONFIG = {
    "n_seeds": 3,
    "n_test": 2000,
    "token_dim": 6,
    "n_tokens": 6,
    "n_heads": (1, 2, 3),
    "theta_norm": 2.0,
    "noise": 0.0,
    "train_sizes": (2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256, 512, 1024),
    # Where recovery fails: the smallest n that recovers the layer, by
    # bisection over GRID, against m and d for both inputs, and for two heads
    # at distance delta. The grid stops at 128, far above the counting bound
    # ceil(2 m d / k) <= 11 of these sizes, which bounds the run's length.
    # ``None`` leaves a study out.
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
