"""Contact prediction from Potts couplings: Frobenius scores, APC, precision."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import re
import zipfile
from collections.abc import Iterable
from fractions import Fraction
from numbers import Integral, Real

import numpy as np
from sklearn.utils import Bunch

from .._scaling import array_exponent
from ._alignment import _read_text, _working_memory_bytes

__all__ = [
    "apc",
    "contact_precision",
    "frobenius_scores",
    "read_contact_map",
    "read_couplings",
    "write_contacts",
    "write_couplings",
    "write_ec",
]


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


# ---------------------------------------------------------------------------
# Files for other tools: contact tables and model parameters


def _sites(positions, residues, n_sites):
    """Validated site numbers (int64, default ``1..L``) and residue letters."""
    if positions is None:
        positions = np.arange(1, n_sites + 1, dtype=np.int64)
    else:
        positions = _real_array(positions, "positions")
        if positions.ndim != 1 or positions.size != n_sites:
            raise ValueError(
                f"positions must be 1-D with one number per site ({n_sites}); got "
                f"shape {positions.shape}."
            )
        if positions.dtype.kind not in "iu":
            raise TypeError(
                f"positions must hold integers; got dtype {positions.dtype}."
            )
        if positions.dtype.kind == "u" and positions.max() > np.iinfo(np.int64).max:
            raise ValueError("positions must fit in int64.")
        positions = positions.astype(np.int64)
        if (np.diff(positions) <= 0).any():
            raise ValueError(
                f"positions must be strictly increasing; got {positions.tolist()}."
            )
    if residues is None:
        return positions, None
    if isinstance(residues, np.ndarray) and residues.ndim == 1:
        residues = residues.tolist()
    if not isinstance(residues, (str, list, tuple)):
        raise TypeError(
            "residues must be a str or a sequence of single characters; got "
            f"{type(residues).__name__}."
        )
    residues = list(residues)
    if len(residues) != n_sites:
        raise ValueError(
            f"residues must have one letter per site ({n_sites}); got {len(residues)}."
        )
    for k, letter in enumerate(residues):
        # A blank would break the space-separated coupling-scores format.
        if not isinstance(letter, str) or len(letter) != 1 or letter.isspace():
            raise ValueError(
                "residues must hold single characters other than whitespace; got "
                f"{letter!r} at residues[{k}]."
            )
    return positions, residues


def _pair_scores(scores, name, n_sites=None):
    """Validated ``(L, L)`` float64 scores, finite above the diagonal."""
    scores = _real_array(scores, name).astype(np.float64, copy=False)
    if n_sites is None:
        if scores.ndim != 2 or scores.shape[0] != scores.shape[1] or len(scores) < 2:
            raise ValueError(
                f"{name} must be a square (L, L) matrix with L >= 2; got shape "
                f"{scores.shape}."
            )
    elif scores.shape != (n_sites, n_sites):
        raise ValueError(
            f"{name} must have the shape of scores, {(n_sites, n_sites)}; got "
            f"{scores.shape}."
        )
    if not np.isfinite(scores[np.triu_indices(len(scores), 1)]).all():
        raise ValueError(f"{name} contains NaN or infinity above the diagonal.")
    return scores


@contextlib.contextmanager
def _text_output(file):
    """An open text file: ``file`` itself, or the path opened for writing."""
    if isinstance(file, (str, os.PathLike)):
        # newline="": the same bytes on every platform.
        with open(file, "w", encoding="utf-8", newline="") as handle:
            yield handle
    elif hasattr(file, "write"):
        yield file
    else:
        raise TypeError(
            "file must be a path or a file opened for writing text; got an object "
            f"of type {type(file).__name__}."
        )


def _write_rows(file, rows, *, header=None, separator=None):
    """Write ``rows`` (lists of str) as lines ending in ``\\n``.

    With ``separator=None``, as CSV (fields quoted where needed); otherwise
    the fields joined by ``separator``, verbatim.
    """
    chunk = 1 << 14  # rows formatted per write: bounded memory, few calls
    with _text_output(file) as handle:
        for start in range(0, max(len(rows), 1), chunk):
            block = rows[start : start + chunk]
            if start == 0 and header is not None:
                block = [header, *block]
            if separator is None:
                buffer = io.StringIO()
                csv.writer(buffer, lineterminator="\n").writerows(block)
                text = buffer.getvalue()
            else:
                text = "".join(separator.join(row) + "\n" for row in block)
            try:
                handle.write(text)
            except TypeError:  # a file opened in binary mode
                raise TypeError(
                    "file must be opened in text mode (its write() refuses str)."
                ) from None


def write_contacts(file, scores, raw_scores=None, *, positions=None, residues=None):
    """Write ranked contact scores as a CSV table, one row per pair of sites.

    The header is ``i,j,residue_i,residue_j,score,score_raw``, then one row
    for each of the ``L (L - 1) / 2`` pairs of sites ``k < l``, sorted by
    score, largest first (ties by ``(i, j)``, so the order is deterministic).
    Numbers are written with ``format(x, ".8g")``: eight significant digits,
    enough to rank and plot, short enough to read (``-0.0`` as ``0``).

    Parameters
    ----------
    file : str, path-like or file object
        Where to write: a path (created or overwritten, UTF-8, ``\\n`` line
        endings) or a file opened in text mode.
    scores : array-like of shape (L, L)
        Contact scores, for instance ``apc(frobenius_scores(couplings))`` or
        :meth:`sklearn_attn.PottsPseudoLikelihood.contact_scores`; ``L >= 2``. Only the
        entries above the diagonal, ``scores[k, l]`` with ``k < l``, are read
        (they must be finite), so the matrix need not be symmetric.
    raw_scores : array-like of shape (L, L) or None, default=None
        Second score of each pair for the ``score_raw`` column, e.g. the
        Frobenius norms before the average-product correction; the column is
        left empty when None.
    positions : array-like of int, shape (L,) or None, default=None
        Number of each site in the ``i`` and ``j`` columns, strictly
        increasing, e.g. the residue numbers of the focus sequence; default
        ``1, ..., L``.
    residues : str, sequence of str or None, default=None
        Letter of each site in the ``residue_i`` and ``residue_j`` columns, a
        str of length ``L`` or ``L`` single characters (e.g. the focus
        sequence); ``-`` for every site when None, as plmc writes.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        For scores that are not a square matrix with ``L >= 2`` or have NaN
        or infinity above the diagonal, ``raw_scores`` of another shape,
        ``positions`` that are not ``L`` strictly increasing numbers, or
        ``residues`` that are not ``L`` single characters.
    TypeError
        For scores that are not real numbers, ``positions`` that are not
        integers, or a ``file`` that is neither a path nor a text file.

    See Also
    --------
    write_ec : The same scores in plmc's coupling-scores format.
    apc : Average-product correction of the scores.
    frobenius_scores : Raw scores from a coupling tensor.

    Examples
    --------
    >>> import io
    >>> import numpy as np
    >>> from sklearn_attn.potts import write_contacts
    >>> scores = np.array([[0.0, 0.5, -0.25], [0.5, 0.0, 1.0], [-0.25, 1.0, 0.0]])
    >>> out = io.StringIO()
    >>> write_contacts(out, scores, positions=[10, 11, 12], residues="MKV")
    >>> print(out.getvalue(), end="")
    i,j,residue_i,residue_j,score,score_raw
    11,12,K,V,1,
    10,11,M,K,0.5,
    10,12,M,V,-0.25,
    """
    scores = _pair_scores(scores, "scores")
    n_sites = len(scores)
    if raw_scores is not None:
        raw_scores = _pair_scores(raw_scores, "raw_scores", n_sites)
    positions, residues = _sites(positions, residues, n_sites)
    k, l = np.triu_indices(n_sites, 1)
    # lexsort sorts by its last key first: score descending, then (i, j).
    order = np.lexsort((l, k, -scores[k, l]))
    k, l = k[order], l[order]
    values = scores[k, l] + 0.0  # + 0.0 writes -0.0 as 0
    numbers = positions.tolist()
    letters = ["-"] * n_sites if residues is None else residues
    if raw_scores is None:
        raw = [""] * k.size
    else:
        raw = [format(second, ".8g") for second in (raw_scores[k, l] + 0.0).tolist()]
    rows = [
        [
            str(numbers[a]),
            str(numbers[b]),
            letters[a],
            letters[b],
            format(score, ".8g"),
            second,
        ]
        for a, b, score, second in zip(
            k.tolist(), l.tolist(), values.tolist(), raw, strict=True
        )
    ]
    _write_rows(
        file, rows, header=["i", "j", "residue_i", "residue_j", "score", "score_raw"]
    )


def write_ec(file, scores, *, positions=None, residues=None):
    """Write contact scores in plmc's coupling-scores format.

    One line per pair of sites ``k < l``, in the order of ``(i, j)`` (not
    ranked), with six fields separated by single spaces and no header::

        i A_i j A_j 0 score

    the site numbers and residue letters of both sites, plmc's placeholder
    ``0``, and the score printed like C's ``%f`` (six decimals; ``-0.0`` as
    ``0.000000``). EVcouplings
    reads these files (plmc's ``-c`` output) as the columns
    ``i A_i j A_j fn cn``.

    Parameters
    ----------
    file : str, path-like or file object
        Where to write: a path (created or overwritten, UTF-8, ``\\n`` line
        endings) or a file opened in text mode.
    scores : array-like of shape (L, L)
        Contact scores, e.g. APC-corrected Frobenius norms; ``L >= 2``. Only
        the entries above the diagonal are read (they must be finite).
    positions : array-like of int, shape (L,) or None, default=None
        Number of each site, strictly increasing (e.g. the residue numbers
        of the focus sequence); default ``1, ..., L``.
    residues : str, sequence of str or None, default=None
        Letter of each site (e.g. the focus sequence), ``L`` single
        characters; ``-`` for every site when None.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        As :func:`write_contacts`.
    TypeError
        As :func:`write_contacts`.

    See Also
    --------
    write_contacts : The scores as a ranked CSV table.

    Examples
    --------
    >>> import io
    >>> import numpy as np
    >>> from sklearn_attn.potts import write_ec
    >>> scores = np.array([[0.0, 0.5, -0.25], [0.5, 0.0, 1.0], [-0.25, 1.0, 0.0]])
    >>> out = io.StringIO()
    >>> write_ec(out, scores, positions=[10, 11, 12], residues="MKV")
    >>> print(out.getvalue(), end="")
    10 M 11 K 0 0.500000
    10 M 12 V 0 -0.250000
    11 K 12 V 0 1.000000
    """
    scores = _pair_scores(scores, "scores")
    n_sites = len(scores)
    positions, residues = _sites(positions, residues, n_sites)
    numbers = positions.tolist()
    letters = ["-"] * n_sites if residues is None else residues
    k, l = np.triu_indices(n_sites, 1)
    rows = [
        [str(numbers[a]), letters[a], str(numbers[b]), letters[b], "0", f"{score:.6f}"]
        for a, b, score in zip(
            k.tolist(), l.tolist(), (scores[k, l] + 0.0).tolist(), strict=True
        )
    ]
    _write_rows(file, rows, separator=" ")


def _states(states, n_states):
    """Validated state labels: a unicode array, or int64 codes."""
    if isinstance(states, str):  # a string of states, one per character
        states = list(states)
    try:
        states = np.asarray(states)
    except ValueError:  # ragged
        states = np.asarray(None)
    if states.dtype.kind == "O" and all(isinstance(s, str) for s in states.flat):
        states = states.astype(str)
    if states.dtype.kind not in "iuU" or states.ndim != 1:
        raise TypeError(
            "states must be a 1-D sequence of str labels or of integer codes; got "
            f"an array of dtype {states.dtype} and shape {states.shape}."
        )
    if states.size != n_states:
        raise ValueError(
            f"states must have one label per state (q = {n_states}); got {states.size}."
        )
    if np.unique(states).size != states.size:
        raise ValueError(f"states must be distinct; got {states.tolist()}.")
    if states.dtype.kind in "iu":
        if states.size and states.max() > np.iinfo(np.int64).max:
            raise ValueError("Integer states must fit in int64.")
        states = states.astype(np.int64)
    return states


def _parameters(couplings, fields, states, positions, residues):
    """Validated couplings, fields, states, positions and residues."""
    couplings = _real_array(couplings, "couplings").astype(np.float64)
    if (
        couplings.ndim != 4
        or couplings.shape[0] != couplings.shape[2]
        or couplings.shape[1] != couplings.shape[3]
        or 0 in couplings.shape
    ):
        raise ValueError(
            "couplings must have shape (L, q, L, q) with L, q >= 1; got "
            f"{couplings.shape}."
        )
    n_sites, n_states = couplings.shape[:2]
    fields = _real_array(fields, "fields").astype(np.float64)
    if fields.shape != (n_sites, n_states):
        raise ValueError(
            f"fields must have shape (L, q) = {(n_sites, n_states)} to match "
            f"couplings; got {fields.shape}."
        )
    for name, array in (("couplings", couplings), ("fields", fields)):
        if not np.isfinite(array).all():
            raise ValueError(f"{name} contains NaN or infinity.")
    states = _states(states, n_states)
    positions, residues = _sites(positions, residues, n_sites)
    return couplings, fields, states, positions, residues


def write_couplings(
    file, couplings, fields, *, states, positions=None, residues=None, **metadata
):
    """Save the parameters of a Potts model to a ``.npz`` archive.

    The archive (:func:`numpy.savez_compressed`, readable without pickle by
    :func:`numpy.load` with ``allow_pickle=False`` or :func:`read_couplings`)
    holds the arrays

    - ``couplings``, float64 of shape ``(L, q, L, q)``;
    - ``fields``, float64 of shape ``(L, q)``;
    - ``states``, the ``q`` state labels (unicode strings) or integer codes
      (int64), in the order of the state axes;
    - ``positions``, int64 of shape ``(L,)``, the site numbers;
    - ``residues``, a unicode string, the focus residues or ``''``;
    - ``metadata``, a unicode string: the JSON object of the keyword
      arguments in ``metadata``.

    The parameters are stored in whatever gauge they are given in;
    :class:`~sklearn_attn.PottsPseudoLikelihood`'s ``couplings_`` and ``fields_`` are in
    the zero-sum gauge.

    Parameters
    ----------
    file : str, path-like or file object
        Where to write: a path, created or overwritten as given (no ``.npz``
        is appended, unlike :func:`numpy.savez`), or a file opened in binary
        mode.
    couplings : array-like of shape (L, q, L, q)
        ``couplings[i, a, j, b]`` couples state ``a`` at site ``i`` with
        state ``b`` at site ``j``; finite real numbers, ``L, q >= 1``.
    fields : array-like of shape (L, q)
        Finite real numbers.
    states : str or sequence of shape (q,)
        Distinct labels of the states, str or integer codes, e.g. a fitted
        model's ``states_``; a str is read as its characters.
    positions : array-like of int, shape (L,) or None, default=None
        Number of each site, strictly increasing; default ``1, ..., L``.
    residues : str, sequence of str or None, default=None
        Letter of each site, e.g. the focus sequence; ``L`` single
        characters.
    **metadata : str, int, float, bool or None
        Scalars stored with the parameters, e.g. ``n_eff``,
        ``alpha_couplings``, ``alpha_fields``, ``n_iter``, ``objective``;
        NumPy scalars are stored as the Python scalars they hold, and floats
        must be finite (the JSON is standard).

    Returns
    -------
    None

    Raises
    ------
    ValueError
        For shapes that do not match ``(L, q, L, q)`` and ``(L, q)``, NaN or
        infinity, ``states`` that are not ``q`` distinct labels,
        ``positions`` or ``residues`` as in :func:`write_contacts`, or a
        non-finite float in ``metadata``.
    TypeError
        For parameters that are not real numbers, ``states`` that are neither
        str nor integers, ``metadata`` values that are not scalars, or a
        ``file`` that is neither a path nor a binary file.

    See Also
    --------
    read_couplings : Read the archive back.
    write_contacts : Contact scores as a ranked CSV table.

    Examples
    --------
    >>> import io
    >>> import warnings
    >>> from sklearn.exceptions import ConvergenceWarning
    >>> from sklearn_attn.datasets import make_potts_sequences
    >>> from sklearn_attn.potts import (
    ...     PottsPseudoLikelihood, read_couplings, write_couplings
    ... )
    >>> X, _ = make_potts_sequences(
    ...     n_samples=200, n_sites=5, n_states=3, random_state=0
    ... )
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", ConvergenceWarning)
    ...     model = PottsPseudoLikelihood(max_iter=10, random_state=0).fit(X)
    >>> archive = io.BytesIO()  # or a path such as "model.npz"
    >>> write_couplings(
    ...     archive, model.couplings_, model.fields_, states=model.states_,
    ...     residues="MKVLA", n_iter=model.n_iter_, objective=model.objective_,
    ... )
    >>> _ = archive.seek(0)
    >>> saved = read_couplings(archive)
    >>> saved.couplings.shape, saved.states, saved.positions, saved.residues
    ((5, 3, 5, 3), array([0, 1, 2]), array([1, 2, 3, 4, 5]), 'MKVLA')
    >>> sorted(saved.metadata), saved.metadata["n_iter"] == model.n_iter_
    (['n_iter', 'objective'], True)
    """
    couplings, fields, states, positions, residues = _parameters(
        couplings, fields, states, positions, residues
    )
    scalars = {}
    for key, value in metadata.items():
        if isinstance(value, np.generic):
            value = value.item()
        if value is not None and not isinstance(value, (str, bool, int, float)):
            raise TypeError(
                f"metadata must be str, int, float, bool or None; got "
                f"{type(value).__name__} for {key!r}."
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"metadata {key!r} must be finite; got {value!r}.")
        scalars[key] = value
    arrays = {
        "couplings": couplings,
        "fields": fields,
        "states": states,
        "positions": positions,
        "residues": np.array("" if residues is None else "".join(residues)),
        "metadata": np.array(json.dumps(scalars, sort_keys=True)),
    }
    if isinstance(file, (str, os.PathLike)):
        # Opened here, so that the file has exactly the name given.
        with open(file, "wb") as handle:
            np.savez_compressed(handle, **arrays)
    elif hasattr(file, "write"):
        try:
            np.savez_compressed(file, **arrays)
        except TypeError:  # a file opened in text mode
            raise TypeError(
                "file must be opened in binary mode (its write() refuses bytes)."
            ) from None
    else:
        raise TypeError(
            "file must be a path or a file opened for writing bytes; got an object "
            f"of type {type(file).__name__}."
        )


_ARCHIVE_KEYS = ("couplings", "fields", "states", "positions", "residues", "metadata")


def read_couplings(file):
    """Read the parameters of a Potts model saved by :func:`write_couplings`.

    Nothing is unpickled: the archive is opened with ``allow_pickle=False``,
    and its arrays are checked as :func:`write_couplings` checks them.

    Parameters
    ----------
    file : str, path-like or file object
        The ``.npz`` archive, as a path or a file opened in binary mode.

    Returns
    -------
    model : :class:`~sklearn.utils.Bunch`
        With keys

        - ``couplings``: ndarray of float64, shape (L, q, L, q);
        - ``fields``: ndarray of float64, shape (L, q);
        - ``states``: ndarray of shape (q,), unicode labels or int64 codes;
        - ``positions``: ndarray of int64, shape (L,);
        - ``residues``: str, or None when none were saved;
        - ``metadata``: dict, the keyword arguments given to
          :func:`write_couplings`.

    Raises
    ------
    ValueError
        For a file that is not a ``.npz`` archive, lacks one of the arrays,
        holds pickled objects, or whose arrays are inconsistent.
    TypeError
        When ``file`` is neither a path nor an open file.

    See Also
    --------
    write_couplings : Save the parameters.
    frobenius_scores : Contact scores from the couplings.

    Examples
    --------
    >>> import io
    >>> import numpy as np
    >>> from sklearn_attn.potts import read_couplings, write_couplings
    >>> archive = io.BytesIO()
    >>> write_couplings(
    ...     archive, np.zeros((3, 2, 3, 2)), np.zeros((3, 2)), states="AB",
    ...     positions=[4, 5, 7], n_eff=41.5,
    ... )
    >>> _ = archive.seek(0)
    >>> saved = read_couplings(archive)
    >>> saved.states, saved.positions, saved.residues, saved.metadata
    (array(['A', 'B'], dtype='<U1'), array([4, 5, 7]), None, {'n_eff': 41.5})
    """
    if not isinstance(file, (str, os.PathLike)) and not hasattr(file, "read"):
        raise TypeError(
            "file must be a path or a file opened for reading bytes; got an object "
            f"of type {type(file).__name__}."
        )
    try:
        archive = np.load(file, allow_pickle=False)
    except (ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(
            f"file is not a .npz archive of Potts parameters (numpy.load: {exc})"
        ) from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(
            "file is a single .npy array, not a .npz archive of Potts parameters."
        )
    with archive:
        missing = [key for key in _ARCHIVE_KEYS if key not in archive.files]
        if missing:
            raise ValueError(
                f"file is not an archive written by write_couplings: it lacks the "
                f"arrays {missing}."
            )
        try:
            arrays = {key: archive[key] for key in _ARCHIVE_KEYS}
        except ValueError as exc:  # object arrays, which would need pickle
            raise ValueError(
                f"file holds an array that cannot be read: {exc}"
            ) from None
    for key in ("residues", "metadata"):
        if arrays[key].dtype.kind != "U" or arrays[key].ndim != 0:
            raise ValueError(f"The array {key!r} of file must be a unicode string.")
    residues = str(arrays["residues"][()]) or None
    try:
        metadata = json.loads(str(arrays["metadata"][()]))
    except ValueError as exc:
        raise ValueError(f"The metadata of file is not valid JSON: {exc}") from None
    if not isinstance(metadata, dict):
        raise ValueError("The metadata of file must be a JSON object.")
    couplings, fields, states, positions, residues = _parameters(
        arrays["couplings"],
        arrays["fields"],
        arrays["states"],
        arrays["positions"],
        residues,
    )
    return Bunch(
        couplings=couplings,
        fields=fields,
        states=states,
        positions=positions,
        residues=None if residues is None else "".join(residues),
        metadata=metadata,
    )
