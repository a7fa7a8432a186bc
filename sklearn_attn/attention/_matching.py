"""Matching learned attention heads to true ones, up to their permutation."""

from __future__ import annotations

import numpy as np
import scipy.optimize
from sklearn.utils import Bunch

__all__ = ["match_heads"]


def match_heads(theta_hat, values_hat, theta_true, values_true):
    """Match learned heads to true ones and report relative parameter errors.

    A multi-head layer is unchanged by permuting its heads, so learned and
    true heads are paired by the assignment (Hungarian algorithm,
    :func:`scipy.optimize.linear_sum_assignment`) that minimises the summed
    costs ``||Theta_hat_i - Theta_j|| / ||Theta_j|| + ||W_hat_i - W_j|| / ||W_j||``
    (Frobenius norms). The numbers of heads may differ; surplus heads stay
    unmatched.

    Parameters
    ----------
    theta_hat, values_hat : array-like of shape (n_heads_hat, d, d)
        Learned ``Theta_i`` and ``W_i`` (e.g. ``theta_`` and ``values_``).
    theta_true, values_true : array-like of shape (n_heads, d, d)
        True ``Theta_j`` and ``W_j``.

    Returns
    -------
    result : :class:`~sklearn.utils.Bunch`
        ``assignment`` : ndarray of shape (n_heads,), the learned head matched
        to each true head (-1 if none); ``theta_errors`` and
        ``values_errors`` : ndarrays of shape (n_heads,), the relative errors
        of each matched pair (NaN if unmatched); ``theta_error`` and
        ``values_error`` : floats, the relative errors of all heads stacked,
        ``||Theta_hat_perm - Theta|| / ||Theta||`` (an unmatched true head
        counts in full).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn.attention import match_heads
    >>> rng = np.random.default_rng(0)
    >>> theta, values = rng.normal(size=(2, 2, 3, 3))
    >>> result = match_heads(theta[::-1], values[::-1], theta, values)
    >>> result.assignment.tolist(), float(result.theta_error)
    ([1, 0], 0.0)
    """
    arrays = []
    for name, array in (
        ("theta_hat", theta_hat),
        ("values_hat", values_hat),
        ("theta_true", theta_true),
        ("values_true", values_true),
    ):
        array = np.asarray(array, dtype=np.float64)
        if array.ndim != 3 or array.shape[1] != array.shape[2]:
            raise ValueError(
                f"{name} must have shape (n_heads, d, d); got shape {array.shape}."
            )
        arrays.append(array)
    theta_hat, values_hat, theta_true, values_true = arrays
    if theta_hat.shape != values_hat.shape or theta_true.shape != values_true.shape:
        raise ValueError(
            "theta_hat and values_hat (and theta_true and values_true) must have the "
            f"same shape; got {theta_hat.shape}, {values_hat.shape}, "
            f"{theta_true.shape}, {values_true.shape}."
        )
    if theta_hat.shape[1] != theta_true.shape[1]:
        raise ValueError(
            f"Learned heads have dimension {theta_hat.shape[1]} but true heads "
            f"{theta_true.shape[1]}."
        )

    def pairwise(hat, true):
        diff = hat[:, None] - true[None, :]
        norms = np.linalg.norm(true.reshape(len(true), -1), axis=1)
        tiny = np.finfo(np.float64).tiny
        distances = np.linalg.norm(diff.reshape(len(hat), len(true), -1), axis=2)
        return distances / np.maximum(norms, tiny)[None, :]

    theta_cost = pairwise(theta_hat, theta_true)
    values_cost = pairwise(values_hat, values_true)
    rows, cols = scipy.optimize.linear_sum_assignment(theta_cost + values_cost)
    m = len(theta_true)
    assignment = np.full(m, -1)
    assignment[cols] = rows
    theta_errors = np.full(m, np.nan)
    values_errors = np.full(m, np.nan)
    theta_errors[cols] = theta_cost[rows, cols]
    values_errors[cols] = values_cost[rows, cols]

    def stacked_error(hat, true):
        matched = np.zeros_like(true)
        matched[cols] = hat[rows]
        return float(np.linalg.norm(matched - true) / max(np.linalg.norm(true), 1e-300))

    return Bunch(
        assignment=assignment,
        theta_errors=theta_errors,
        values_errors=values_errors,
        theta_error=stacked_error(theta_hat, theta_true),
        values_error=stacked_error(values_hat, values_true),
    )
