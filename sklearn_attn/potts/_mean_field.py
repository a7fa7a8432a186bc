"""The mean-field (mfDCA) couplings of an alignment: a start for factored attention."""

from __future__ import annotations

import numpy as np

from .._backend import to_host

__all__ = ["mean_field_couplings"]


def mean_field_couplings(rows, n_states, pseudocount=0.5):
    """Mean-field (mfDCA) couplings ``J = -C^{-1}`` of a weighted alignment.

    ``C`` is the connected correlation matrix of the one-hot sites with the
    last state of each site left out (the lattice-gas gauge, in which ``C``
    is invertible), from frequencies mixed with the uniform ones in the
    proportion ``pseudocount``, as Morcos et al. (2011) do. One pass over
    the alignment (the product ``X^T diag(w) X``) and one inversion of a
    matrix of size ``L (q - 1)``: the cost of a few evaluations of the
    objective.

    Parameters
    ----------
    rows : OneHotRows
    n_states : int
    pseudocount : float in (0, 1], default=0.5

    Returns
    -------
    couplings : ndarray of shape (L, q, L, q)
        Symmetric, zero diagonal blocks, zero in the last state of each site.
    """
    n_sites = rows.codes.shape[1]
    width = n_sites * n_states
    xp = rows.xp
    pair = xp.zeros((width, width))
    for onehot, weights, _, _ in rows.blocks():
        pair += (onehot * weights.astype(rows.dtype)[:, None]).T @ onehot
    pair = to_host(pair) / float(rows.weights.sum())
    single = np.diag(pair).copy()  # one-hot squares are the frequencies
    lam = float(pseudocount)
    single = (1.0 - lam) * single + lam / n_states
    pair = (1.0 - lam) * pair + lam / n_states**2
    pair = pair.reshape(n_sites, n_states, n_sites, n_states)
    sites = np.arange(n_sites)
    pair[sites, :, sites, :] = np.eye(n_states) * single.reshape(n_sites, n_states, 1)
    covariance = pair.reshape(width, width) - np.outer(single, single)
    kept = (np.arange(width) % n_states) != n_states - 1
    inverse = np.linalg.inv(covariance[np.ix_(kept, kept)])
    couplings = np.zeros((width, width))
    couplings[np.ix_(kept, kept)] = -inverse
    couplings = couplings.reshape(n_sites, n_states, n_sites, n_states)
    couplings[sites, :, sites, :] = 0.0
    return couplings
