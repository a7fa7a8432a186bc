"""A known structure: its pair distances, and the precision of predicted contacts.

:func:`read_distances` is the one reader of a structure's distances (tables
``i j ... distance`` and ``L x L`` matrices); :func:`contact_precision`
scores ranked contact predictions against them.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections.abc import Iterable
from fractions import Fraction
from numbers import Integral, Real

import numpy as np

from .._validation import check_real_array
from ._alignment import _read_text

__all__ = ["contact_precision", "read_distances"]


def read_distances(source, positions=None):
    """Pairs of sites and their distances, from a table or an ``L x L`` matrix.

    A table has one pair a line, ``i j ... distance``: residue numbers ``i``
    and ``j``, any columns between (such as the score of
    ``PF00014_distances.tsv``'s ``i j score distance``) and the distance
    last. Fields are separated by white space or commas, ``#`` starts a
    comment, and a first line without numbers is a header. A matrix has
    ``len(positions)`` rows of ``len(positions)`` numbers (at least 4).

    Residue numbers are those of ``positions`` (the numbering of
    :attr:`Alignment.positions <sklearn_attn.contacts.Alignment>`); pairs
    with a number ``positions`` does not hold, and pairs of a site with
    itself, are left out. Without ``positions`` the numbers are the columns
    counted from 1, and every pair is kept.

    Parameters
    ----------
    source : str, path-like or file object
        The table or matrix, gzipped or not (recognised by its content), with
        LF, CRLF or CR line endings.
    positions : array-like of int or None, default=None
        Residue number of each site.

    Returns
    -------
    i, j : ndarray of int64, shape (n_pairs,)
        Site indices counted from 0, ``i < j``, in the order of the file.
    distance : ndarray of float64, shape (n_pairs,)

    Raises
    ------
    ValueError
        For an empty file, a line that is not numbers, lines of fewer than 3
        numbers (and not a matrix), residue numbers that are not integers
        (or, without ``positions``, not in ``[1, 2**53]``), or no pair of
        numbers among ``positions``.
    TypeError
        When ``source`` is neither a path nor an open file.

    See Also
    --------
    contact_precision : Precision of ranked contact predictions.

    Examples
    --------
    >>> import io
    >>> from sklearn_attn.contacts import read_distances
    >>> read_distances(io.StringIO("1 7 0.3 4.5\\n9 2 0.1 12.0\\n"))
    (array([0, 1]), array([6, 8]), array([ 4.5, 12. ]))
    >>> table = "i,j,distance\\n10,20,3.5\\n10,99,4.0\\n"
    >>> read_distances(io.StringIO(table), positions=[10, 15, 20])
    (array([0]), array([2]), array([3.5]))
    """
    return _read_distances(source, positions)


def _read_distances(source, positions, *, name="source", four_columns=False):
    """:func:`read_distances`; ``four_columns`` insists on ``i j score distance``
    (the deprecated ``read_contact_map``'s format)."""
    where = _source_text(source)
    shape = "i j score distance: 4 columns" if four_columns else "i j ... distance"
    count = "four numbers" if four_columns else "numbers"
    rows = []
    for number, line in enumerate(_read_text(source, name=name).split("\n"), 1):
        fields = line.partition("#")[0].replace(",", " ").split()
        if not fields:
            continue
        try:
            rows.append([float(field) for field in fields])
        except ValueError:
            if not rows and not any(_is_number(field) for field in fields):
                continue  # a header
            raise ValueError(
                f"The distance table {where} must hold {count} per line "
                f"({shape}); line {number} is not: {line.strip()[:40]!r}."
            ) from None
    if not rows:
        raise ValueError(f"The distance table {where} is empty.")
    widths = {len(row) for row in rows}
    n_sites = None if positions is None else len(positions)
    if (
        not four_columns
        and widths == {n_sites}
        and len(rows) == n_sites
        and n_sites > 3
    ):
        i, j = np.triu_indices(n_sites, 1)
        return i, j, np.asarray(rows, dtype=np.float64)[i, j]
    if four_columns and widths != {4}:
        raise ValueError(
            f"The distance table {where} must hold {count} per line ({shape}); "
            f"found lines of {sorted(widths)} number(s)."
        )
    if min(widths) < 3:
        raise ValueError(
            f"The distance table {where} must hold lines '{shape}' (3 or more "
            + (
                "numbers)"
                if n_sites is None
                else f"numbers) or a {n_sites} x {n_sites} matrix"
            )
            + f"; found lines of {min(widths)} number(s)."
        )
    table = np.array([(row[0], row[1], row[-1]) for row in rows], dtype=np.float64)
    pairs, distance = table[:, :2], table[:, 2]
    # Integers up to 2**53 are exact in float64 and fit in int64.
    if not (
        np.isfinite(pairs).all()
        and (pairs == np.round(pairs)).all()
        and (positions is not None or (pairs.min() >= 1 and pairs.max() <= 2**53))
    ):
        raise ValueError(
            f"The distance table {where}: the residue numbers i and j must be "
            + (
                "integer column numbers counted from 1."
                if positions is None
                else "integers."
            )
        )
    if positions is None:
        sites = pairs.astype(np.int64) - 1
    else:
        positions = np.asarray(positions)
        order = np.argsort(positions)
        known = np.searchsorted(positions[order], pairs).clip(0, len(positions) - 1)
        found = positions[order][known] == pairs
        sites = np.where(found, order[known], -1)
        keep = found.all(axis=1) & (pairs[:, 0] != pairs[:, 1])
        if not keep.any():
            raise ValueError(
                f"The distance table {where}: no pair has both residue numbers "
                f"among the model's ({positions.min()}..{positions.max()}); with "
                "a focus sequence the table must use its residue numbers."
            )
        sites, distance = sites[keep], distance[keep]
    distinct = sites[:, 0] != sites[:, 1]
    sites, distance = np.sort(sites[distinct], axis=1), distance[distinct]
    return sites[:, 0].copy(), sites[:, 1].copy(), distance


def read_contact_map(path):
    """Read a pair-distance table ``i j score distance`` (1-based columns).

    .. deprecated:: 0.2
        Use :func:`read_distances`, which reads these tables and more.

    Parameters
    ----------
    path : str, path-like or file object
        The table, gzipped or not.

    Returns
    -------
    i, j : ndarray of int64, shape (n_pairs,)
        The columns of each pair, counted from 0, ``i < j``.
    distance : ndarray of float64, shape (n_pairs,)
    """
    warnings.warn(
        "read_contact_map is deprecated in 0.2 and will be removed in 0.4; use "
        "sklearn_attn.contacts.read_distances.",
        FutureWarning,
        stacklevel=2,
    )
    return _read_distances(path, None, name="path", four_columns=True)


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def _source_text(source):
    if isinstance(source, (str, os.PathLike)):
        return repr(os.fspath(source))
    if hasattr(source, "name"):
        return repr(source.name)
    return f"read from a {type(source).__name__}"


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
        Pairs of columns, counted from 0 (as from :func:`read_distances`).
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
    read_distances : Pairs and distances from a table or a matrix.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_attn.contacts import contact_precision
    >>> scores = np.zeros((10, 10))
    >>> i, j = np.array([0, 0, 1, 2]), np.array([9, 6, 8, 3])
    >>> scores[i, j] = [4.0, 3.0, 2.0, 5.0]
    >>> distance = np.array([5.0, 12.0, 6.0, 3.0])
    >>> contact_precision(scores, i, j, distance, top=[1, 2, "L/5"])
    {1: 1.0, 2: 0.5, 'L/5': 0.5}
    """
    scores = check_real_array(scores, "scores").astype(np.float64, copy=False)
    if scores.ndim != 2 or scores.shape[0] != scores.shape[1]:
        raise ValueError(f"scores must be a square (L, L) matrix; got {scores.shape}.")
    n_sites = scores.shape[0]
    i, j = check_real_array(i, "i"), check_real_array(j, "j")
    distance = check_real_array(distance, "distance").astype(np.float64, copy=False)
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
