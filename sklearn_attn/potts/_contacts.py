"""Contact prediction from Potts couplings: Frobenius scores, APC, precision."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable
from fractions import Fraction
from numbers import Integral, Real

import numpy as np

from .._scaling import array_exponent
from ._alignment import _read_text, _working_memory_bytes

__all__ = ["apc", "frobenius_scores", "read_contact_map", "contact_precision"]


def _real_array(value, name):
    """``value`` as a NumPy array of real numbers (bool, integer or float).

    Object arrays of numbers are converted to float64; strings, complex
    numbers and ragged nested sequences are refused with ``name`` in the
    message.
    """
    try:
        array = np.asarray(value)
    except ValueError:  # NumPy refuses ragged nested sequences
        raise ValueError(
            f"{name} must be a numeric array; its rows have different lengths."
        ) from None
    if array.dtype.kind == "O":
        try:
            array = array.astype(np.float64)
        except (TypeError, ValueError):
            raise TypeError(
                f"{name} must hold real numbers; got objects that are not."
            ) from None
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers; got dtype {array.dtype}.")
    return array


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
    scores = np.array(_real_array(scores, "scores"), dtype=np.float64)
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
    couplings = _real_array(couplings, "couplings")
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


# ---------------------------------------------------------------------------
# Contacts


def read_contact_map(path):
    """Read a pair-distance table ``i j score distance`` (1-based columns).

    The format of ``PF00014_distances.tsv``: one pair per line, four
    whitespace-separated numbers, alignment columns ``i`` and ``j`` counted
    from 1, a score (ignored) and the distance in Angstrom.

    Parameters
    ----------
    path : str, path-like or file object
        The table, gzipped or not (recognised by its content), with LF, CRLF
        or CR line endings; ``#`` starts a comment.

    Returns
    -------
    i, j : ndarray of int64, shape (n_pairs,)
        The columns of each pair, counted from 0.
    distance : ndarray of float64, shape (n_pairs,)

    Raises
    ------
    ValueError
        For an empty table, a line that is not four numbers, or column
        numbers that are not integers in ``[1, 2**53]``.
    TypeError
        When ``path`` is neither a path nor an open file.

    See Also
    --------
    contact_precision : Precision of ranked contact predictions.

    Examples
    --------
    >>> import io
    >>> from sklearn_attn.potts import read_contact_map
    >>> i, j, d = read_contact_map(io.StringIO("1 7 0.3 4.5\\n2 9 0.1 12.0\\n"))
    >>> i, j, d
    (array([0, 1]), array([6, 8]), array([ 4.5, 12. ]))
    """
    if isinstance(path, (str, os.PathLike)):
        where = repr(os.fspath(path))
    elif hasattr(path, "name"):
        where = repr(path.name)
    else:
        where = f"read from a {type(path).__name__}"
    # Read like read_alignment: gzip by content, LF, CRLF and CR alike.
    lines = _read_text(path, name="path").split("\n")
    if not any(line.partition("#")[0].strip() for line in lines):
        raise ValueError(f"The contact map {where} is empty.")
    try:
        table = np.loadtxt(lines, dtype=np.float64, ndmin=2)
    except ValueError as exc:
        raise ValueError(
            f"The contact map {where} must hold four numbers per line "
            f"(i j score distance): {exc}"
        ) from None
    if table.shape[1] != 4:
        raise ValueError(
            f"The contact map must have 4 columns (i j score distance); got "
            f"{table.shape[1]}."
        )
    pairs = table[:, :2]
    # Integers up to 2**53 are exact in float64 and fit in int64.
    if not (
        np.isfinite(pairs).all()
        and (pairs == np.round(pairs)).all()
        and pairs.min() >= 1
        and pairs.max() <= 2**53
    ):
        raise ValueError(
            "The contact map's first two columns must be integer column numbers "
            "counted from 1."
        )
    pairs = pairs.astype(np.int64) - 1
    return pairs[:, 0].copy(), pairs[:, 1].copy(), table[:, 3].copy()


_TOP_PATTERN = re.compile(r"^\s*(\d+(?:\.\d*)?)?\s*\*?\s*L\s*(?:/\s*(\d+)\s*)?$")


def _resolve_top(k, n_sites):
    """``10``, ``"L"``, ``"L/5"``, ``"2L"`` or ``"1.5*L"`` to a number of pairs."""
    if isinstance(k, Integral) and not isinstance(k, bool) and k >= 1:
        return int(k)
    match = _TOP_PATTERN.match(k) if isinstance(k, str) else None
    if match is None or match.group(2) == "0" or float(match.group(1) or 1) == 0:
        raise ValueError(
            "top must hold positive integers or strings such as 'L/5', 'L/2', "
            f"'L', '2L'; got {k!r}."
        )
    factor = Fraction(match.group(1) or 1) / int(match.group(2) or 1)
    return max(1, math.floor(factor * n_sites))


def contact_precision(
    scores,
    i,
    j,
    distance,
    *,
    top=("L/5", "L/2", "L", "2L"),
    min_separation=6,
    cutoff=8.0,
):
    """Precision of the top-ranked pairs as contact predictions.

    The candidate pairs are the pairs of the contact map with
    ``|i - j| >= min_separation`` and a finite distance; they are ranked by
    ``scores[min(i, j), max(i, j)]`` (largest first, ties by ``(i, j)``), and
    a pair is a contact when its distance is below ``cutoff``.

    Parameters
    ----------
    scores : array-like of shape (L, L)
        Contact scores (e.g. APC-corrected Frobenius norms); NaN at a
        candidate pair is an error, as it cannot be ranked.
    i, j : array-like of int, shape (n_pairs,)
        Pairs of columns, counted from 0 (as from :func:`read_contact_map`).
    distance : array-like of shape (n_pairs,)
        Distance of each pair, in the unit of ``cutoff``.
    top : int, str or sequence of them, default=("L/5", "L/2", "L", "2L")
        Numbers of top pairs ``k``; strings are multiples of ``L``, the
        number of columns of ``scores`` (``"L/5"`` is ``floor(L / 5)``). A
        ``k`` above the number of candidates uses all candidates.
    min_separation : int, default=6
        Pairs closer than this along the chain are not candidates.
    cutoff : float, default=8.0
        Contact when ``distance < cutoff``.

    Returns
    -------
    precision : dict
        ``{k: fraction of contacts among the top k pairs}``, keyed by the
        entries of ``top`` as given.

    See Also
    --------
    read_contact_map : Pairs and distances from a table.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn.potts import contact_precision
    >>> scores = np.zeros((10, 10))
    >>> i, j = np.array([0, 0, 1, 2]), np.array([9, 6, 8, 3])
    >>> scores[i, j] = [4.0, 3.0, 2.0, 5.0]
    >>> distance = np.array([5.0, 12.0, 6.0, 3.0])
    >>> contact_precision(scores, i, j, distance, top=[1, 2, "L/5"])
    {1: 1.0, 2: 0.5, 'L/5': 0.5}
    """
    scores = _real_array(scores, "scores").astype(np.float64, copy=False)
    if scores.ndim != 2 or scores.shape[0] != scores.shape[1]:
        raise ValueError(f"scores must be a square (L, L) matrix; got {scores.shape}.")
    n_sites = scores.shape[0]
    i, j = _real_array(i, "i"), _real_array(j, "j")
    distance = _real_array(distance, "distance").astype(np.float64, copy=False)
    if not (
        i.ndim == j.ndim == distance.ndim == 1 and i.size == j.size == distance.size
    ):
        raise ValueError(
            f"i, j and distance must be 1-D of the same length; got shapes {i.shape}, "
            f"{j.shape}, {distance.shape}."
        )
    for name, index in (("i", i), ("j", j)):
        if index.size and not np.issubdtype(index.dtype, np.integer):
            raise TypeError(
                f"{name} must hold integer column indices; got {index.dtype}."
            )
        if index.size and (index.min() < 0 or index.max() >= n_sites):
            raise ValueError(
                f"{name} must hold column indices in [0, {n_sites}) (counted from 0)."
            )
    if (
        not isinstance(min_separation, Integral)
        or isinstance(min_separation, bool)
        or min_separation < 0
    ):
        raise ValueError(
            f"min_separation must be a non-negative integer; got {min_separation!r}."
        )
    if not isinstance(cutoff, Real) or isinstance(cutoff, bool) or not cutoff > 0:
        raise ValueError(f"cutoff must be a positive number; got {cutoff!r}.")
    if isinstance(top, (str, Integral)) or not isinstance(top, Iterable):
        top = [top]
    sizes = {k: _resolve_top(k, n_sites) for k in top}

    low, high = np.minimum(i, j), np.maximum(i, j)
    candidate = (high - low >= min_separation) & np.isfinite(distance)
    low, high, distance = low[candidate], high[candidate], distance[candidate]
    if low.size == 0:
        raise ValueError(
            f"No pair of the contact map has |i - j| >= {min_separation} and a "
            "finite distance."
        )
    if np.unique(low * n_sites + high).size != low.size:
        raise ValueError("The contact map lists a pair more than once.")
    if np.isnan(scores[low, high]).any():
        raise ValueError("scores contains NaN at a candidate pair; it cannot rank.")
    order = np.lexsort((high, low, -scores[low, high]))
    hits = np.cumsum(distance[order] < cutoff)
    precision = {}
    for key, k in sizes.items():
        k = min(k, hits.size)
        precision[key] = float(hits[k - 1] / k)
    return precision
