"""Exact enumeration of tiny generalized Potts models: the references of the tests.

:func:`enumerate_states`, :func:`exact_distribution` and
:func:`exact_conditional_entropy` enumerate all ``q**L`` states of a model in the
conventions of :mod:`sklearn_attn.potts._sampling`, in chunks of states.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_int
from ._model import one_hot
from ._sampling import _check_beta, _check_model, _log_conditionals

__all__ = ["enumerate_states", "exact_distribution", "exact_conditional_entropy"]

# Exact enumeration refuses models with more states than this (2**21 ~ 2.1e6).
_MAX_STATES = 2**21
# States are scored in chunks of this many so that one-hot blocks stay small.
_STATE_CHUNK = 2**14


def enumerate_states(n_sites, n_states):
    """All ``n_states ** n_sites`` states in lexicographic order (site 0 slowest).

    Parameters
    ----------
    n_sites : int
        Number of sites ``L``, at least 1.

    n_states : int
        Number of states ``q`` per site, at least 1.

    Returns
    -------
    states : ndarray of shape (q ** L, L), dtype int64

    Raises
    ------
    ValueError
        If ``q ** L`` exceeds 2**21 (about 2.1 million) states. At that limit
        the array takes up to 350 MB (``L = 21``, ``q = 2``).

    Examples
    --------
    >>> from sklearn_attn.potts import enumerate_states
    >>> enumerate_states(2, 2)
    array([[0, 0],
           [0, 1],
           [1, 0],
           [1, 1]])
    """
    n_sites = check_int(n_sites, "n_sites", 1)
    n_states = check_int(n_states, "n_states", 1)
    n_total = n_states**n_sites  # a Python int: no overflow before the check
    if n_total > _MAX_STATES:
        raise ValueError(
            f"Exact enumeration of q**L = {n_states}**{n_sites} = {n_total} states "
            f"is refused (at most {_MAX_STATES}); use gibbs_sample for models of "
            "this size."
        )
    powers = n_states ** np.arange(n_sites - 1, -1, -1, dtype=np.int64)
    return (np.arange(n_total, dtype=np.int64)[:, None] // powers) % n_states


def _log_weights(states, J, h, beta):
    """``beta * (sum_{i<j} J[i, s_i, j, s_j] + sum_i h[i, s_i])`` for symmetric J."""
    n_sites, n_states = h.shape
    size = n_sites * n_states
    J_mat = J.reshape(size, size)
    sites = np.arange(n_sites)
    out = np.empty(states.shape[0])
    for start in range(0, states.shape[0], _STATE_CHUNK):
        chunk = states[start : start + _STATE_CHUNK]
        x = one_hot(chunk, n_states)
        # x^T J x counts every pair i != j twice.
        pairs = 0.5 * np.einsum("nk,nk->n", x @ J_mat, x)
        out[start : start + _STATE_CHUNK] = beta * (pairs + h[sites, chunk].sum(axis=1))
    return out


def exact_distribution(couplings, fields, beta=1.0):
    """All states of a tiny Potts model and their exact Gibbs probabilities.

    Parameters
    ----------
    couplings : array-like of shape (L, q, L, q)
        Symmetric couplings (``J[i, a, j, b] == J[j, b, i, a]``) with zero
        diagonal blocks.

    fields : array-like of shape (L, q)

    beta : float, default=1.0
        Inverse temperature, non-negative.

    Returns
    -------
    states : ndarray of shape (q ** L, L), dtype int64
        As :func:`enumerate_states`.

    probabilities : ndarray of shape (q ** L,)
        ``P(s) ∝ exp(beta * (sum_{i<j} J[i, s_i, j, s_j] + sum_i h[i, s_i]))``.

    Raises
    ------
    ValueError
        If ``couplings`` is not symmetric (no joint law) or ``q ** L`` exceeds
        2**21.

    See Also
    --------
    gibbs_sample : Samples from the same law for models of any size.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn.potts import exact_distribution
    >>> J = np.zeros((2, 2, 2, 2))
    >>> J[0, :, 1, :] = J[1, :, 0, :] = np.log(3) * np.eye(2)
    >>> states, p = exact_distribution(J, np.zeros((2, 2)))
    >>> p  # agreeing pairs are 3 times as likely
    array([0.375, 0.125, 0.125, 0.375])
    """
    J, h = _check_model(couplings, fields, require_symmetric=True)
    beta = _check_beta(beta)
    states = enumerate_states(*h.shape)
    log_w = _log_weights(states, J, h, beta)
    log_w -= log_w.max()
    probabilities = np.exp(log_w)
    probabilities /= probabilities.sum()
    return states, probabilities


def exact_conditional_entropy(couplings, fields, beta=1.0):
    """Exact conditional entropy ``-E_P[(1/L) sum_i log p(s_i | s_-i)]`` in nats.

    This is the pseudo-likelihood test loss of the true model, the lowest any
    model of the conditionals can reach on average.

    Parameters
    ----------
    couplings : array-like of shape (L, q, L, q)
        Symmetric couplings with zero diagonal blocks.

    fields : array-like of shape (L, q)

    beta : float, default=1.0
        Inverse temperature, non-negative.

    Returns
    -------
    entropy : float
        Between 0 and ``log(q)``.

    See Also
    --------
    conditional_log_probs : Estimate it on samples of a larger model.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn.potts import exact_conditional_entropy
    >>> J = np.zeros((3, 4, 3, 4))
    >>> round(exact_conditional_entropy(J, np.zeros((3, 4))), 6)  # log(4)
    1.386294
    """
    J, h = _check_model(couplings, fields, require_symmetric=True)
    beta = _check_beta(beta)
    states, probabilities = exact_distribution(J, h, beta)
    total = 0.0
    for start in range(0, states.shape[0], _STATE_CHUNK):
        chunk = states[start : start + _STATE_CHUNK]
        log_p = _log_conditionals(chunk, J, h, beta)
        observed = np.take_along_axis(log_p, chunk[:, :, None], axis=2)[:, :, 0]
        total -= probabilities[start : start + _STATE_CHUNK] @ observed.mean(axis=1)
    return float(total)
