"""Contact scores of a Potts model: Frobenius norms of its couplings, and APC.

What a fitted model says about which sites interact: :func:`frobenius_scores`
turns a coupling tensor into an ``(L, L)`` score matrix (blocks that fit
scikit-learn's ``working_memory``, exact at any magnitude by power-of-two
rescaling) and :func:`apc` applies the average-product correction.
"""

from __future__ import annotations

import math

import numpy as np

from .._scaling import array_exponent
from .._validation import check_real_array
from ._alignment import _working_memory_bytes

__all__ = ["apc", "frobenius_scores"]


def _scale_back(scores, exponent, message):
    """``scores * 2^exponent`` (exact), or ``ValueError(message)`` on overflow."""
    with np.errstate(over="ignore"):  # checked just below
        scores = np.ldexp(scores, exponent)
    if not np.isfinite(scores).all():
        raise ValueError(message)
    return scores


def apc(scores):
    """Average-product correction of a contact score matrix.

    ``F_ij - F_i F_j / F``, where ``F_i`` is the mean of ``F_ij`` over
    ``j != i``, ``F_j`` the mean of ``F_ij`` over ``i != j`` (the same for a
    symmetric matrix) and ``F`` the mean over all pairs ``i != j``; the
    diagonal of ``scores`` is ignored and is zero in the result.

    Parameters
    ----------
    scores : array-like of shape (L, L)
        Raw scores, for instance from :func:`frobenius_scores`; ``L >= 2``.

    Returns
    -------
    corrected : ndarray of shape (L, L)
        A new array with a zero diagonal. If all off-diagonal scores are
        zero, the correction is zero. Scores of any finite magnitude are
        corrected without overflow or underflow (they are rescaled by a power
        of two, which is exact).

    Raises
    ------
    ValueError
        For a matrix that is not square with ``L >= 2``, NaN or infinity off
        the diagonal, ragged rows, or a correction that overflows float64.
    TypeError
        For scores that are not real numbers (strings, complex numbers).

    See Also
    --------
    frobenius_scores : Raw scores from a coupling tensor.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn.potts import apc
    >>> F = np.array([[0.0, 3.0, 1.0], [3.0, 0.0, 2.0], [1.0, 2.0, 0.0]])
    >>> apc(F).round(3)
    array([[ 0.   ,  0.5  , -0.5  ],
           [ 0.5  ,  0.   ,  0.125],
           [-0.5  ,  0.125,  0.   ]])
    """
    # A copy: the diagonal is zeroed.
    scores = np.array(check_real_array(scores, "scores"), dtype=np.float64)
    if scores.ndim != 2 or scores.shape[0] != scores.shape[1] or scores.shape[0] < 2:
        raise ValueError(
            f"scores must be a square (L, L) matrix with L >= 2; got shape "
            f"{scores.shape}."
        )
    n = scores.shape[0]
    np.fill_diagonal(scores, 0.0)
    if not np.isfinite(scores).all():
        raise ValueError("scores contains NaN or infinity off the diagonal.")
    # Scores of any finite magnitude: the products of means stay in range.
    largest = max(scores.max(), -scores.min())
    exponent = array_exponent(np.asarray(largest))
    scores = np.ldexp(scores, -exponent)
    row_means = scores.sum(axis=1) / (n - 1)
    col_means = scores.sum(axis=0) / (n - 1)
    mean = scores.sum() / (n * (n - 1))
    if mean != 0.0:
        scores -= np.outer(row_means, col_means) / mean
    np.fill_diagonal(scores, 0.0)
    return _scale_back(
        scores,
        exponent,
        "The average-product correction of scores overflows float64 (largest "
        f"|score| {largest:.3g}); rescale scores.",
    )


def frobenius_scores(couplings, *, zero_sum_gauge=False, exclude_states=None):
    """Frobenius norm of each coupling block, a raw contact score.

    For every pair of sites, the ``q x q`` block is symmetrised,
    ``(J_ij(a, b) + J_ji(b, a)) / 2`` (a no-op for symmetric couplings), the
    states in ``exclude_states`` are dropped, the block is optionally moved to
    the zero-sum gauge (its row and column means removed,
    ``J - rowmean - colmean + mean``), and its Frobenius norm is taken.

    plmc's scores are this with all states kept and no gauge change, followed
    by :func:`apc`; CCMpred and GREMLIN drop the gap state.

    Parameters
    ----------
    couplings : array-like of shape (L, q, L, q)
        ``couplings[i, a, j, b]`` couples state ``a`` at site ``i`` with
        state ``b`` at site ``j``; finite real numbers, ``L, q >= 1``.
        Diagonal blocks are ignored.
    zero_sum_gauge : bool, default=False
        Remove the row and column means of each block before the norm.
    exclude_states : int, sequence of int or None, default=None
        States dropped from every block first, e.g. ``0`` for the gap; an
        empty sequence drops none.

    Returns
    -------
    scores : ndarray of shape (L, L)
        Symmetric, with a zero diagonal. Couplings of any finite magnitude
        are scored without overflow or underflow (they are rescaled by a
        power of two, which is exact).

    Raises
    ------
    ValueError
        For a shape other than ``(L, q, L, q)``, no site or no state, NaN or
        infinity, ``exclude_states`` outside ``[0, q)`` or removing every
        state, or norms beyond the float64 range.
    TypeError
        For couplings that are not real numbers.

    See Also
    --------
    apc : Average-product correction of the scores.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn.potts import frobenius_scores
    >>> J = np.zeros((3, 2, 3, 2))
    >>> J[0, :, 1, :] = J[1, :, 0, :] = [[3.0, 0.0], [0.0, 4.0]]
    >>> frobenius_scores(J)
    array([[0., 5., 0.],
           [5., 0., 0.],
           [0., 0., 0.]])
    >>> frobenius_scores(J, zero_sum_gauge=True)
    array([[0. , 3.5, 0. ],
           [3.5, 0. , 0. ],
           [0. , 0. , 0. ]])
    """
    if not isinstance(zero_sum_gauge, (bool, np.bool_)):
        raise TypeError(
            f"zero_sum_gauge must be True or False; got {zero_sum_gauge!r}."
        )
    couplings = check_real_array(couplings, "couplings")
    if (
        couplings.ndim != 4
        or couplings.shape[0] != couplings.shape[2]
        or couplings.shape[1] != couplings.shape[3]
    ):
        raise ValueError(
            f"couplings must have shape (L, q, L, q); got {couplings.shape}."
        )
    n_sites, n_states = couplings.shape[:2]
    if n_sites == 0 or n_states == 0:
        raise ValueError(
            "couplings must have at least one site and one state; got shape "
            f"{couplings.shape}."
        )
    keep = np.arange(n_states)
    if exclude_states is not None:
        try:
            excluded = np.atleast_1d(np.asarray(exclude_states))
        except ValueError:  # ragged
            excluded = None
        if excluded is None or (
            excluded.size  # an empty sequence excludes nothing
            and (
                not np.issubdtype(excluded.dtype, np.integer)
                or excluded.ndim != 1
                or excluded.min() < 0
                or excluded.max() >= n_states
            )
        ):
            raise ValueError(
                "exclude_states must be an integer or a sequence of integers in "
                f"[0, {n_states}); got {exclude_states!r}."
            )
        keep = np.setdiff1d(keep, excluded)
        if keep.size == 0:
            raise ValueError("exclude_states removes every state.")
    largest = max(float(couplings.max()), -float(couplings.min()))
    if not math.isfinite(largest):
        raise ValueError("couplings contains NaN or infinity.")
    # Couplings of any finite magnitude: the squares stay in range.
    exponent = array_exponent(np.asarray(largest))
    dtype = np.result_type(couplings.dtype, np.float64)
    # Each row block of sites holds a few (b, q, L, q) temporaries.
    row_bytes = 4 * np.dtype(dtype).itemsize * n_states * n_sites * n_states
    block = min(max(1, int(_working_memory_bytes() // row_bytes)), n_sites)
    scores = np.empty((n_sites, n_sites), dtype=np.float64)
    for start in range(0, n_sites, block):
        rows = slice(start, min(start + block, n_sites))
        forward = couplings[rows][:, keep][:, :, :, keep]
        backward = couplings[:, :, rows][:, keep][:, :, :, keep].transpose(2, 3, 0, 1)
        blocks = (
            np.ldexp(forward.astype(dtype), -exponent) + np.ldexp(backward, -exponent)
        ) / 2.0
        if zero_sum_gauge:
            blocks = (
                blocks
                - blocks.mean(axis=1, keepdims=True)
                - blocks.mean(axis=3, keepdims=True)
                + blocks.mean(axis=(1, 3), keepdims=True)
            )
        scores[rows] = np.sqrt(np.einsum("iajb,iajb->ij", blocks, blocks))
        del forward, backward, blocks
    # Blocks (i, j) and (j, i) are transposes summed in different orders: average
    # the two so that the output is exactly symmetric.
    scores = (scores + scores.T) / 2.0
    np.fill_diagonal(scores, 0.0)
    return _scale_back(
        scores,
        exponent,
        "The Frobenius norms of couplings overflow float64 (largest |coupling| "
        f"{largest:.3g}); rescale couplings.",
    )
