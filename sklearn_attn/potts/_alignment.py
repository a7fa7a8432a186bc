"""Aligned sequences as integer codes: alphabets, encoding, filtering, weights.

:func:`encode_sequences` turns aligned strings into integer codes
``(n_sequences, n_columns)`` over an alphabet whose first letter is the gap,
and :func:`decode_sequences` turns them back; :func:`check_codes` is the one
check of such codes. :func:`filter_alignment` drops gappy columns and
sequences; :func:`sequence_weights` gives the usual DCA reweighting
``w_s = 1 / #{t : identity(s, t) >= threshold}``, in blocks that fit
scikit-learn's ``working_memory``. Reading alignment files is the contacts
application's (:mod:`sklearn_attn.contacts`).
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
from sklearn import get_config

from .._backend import to_host
from .._text import ALPHABETS, encode_codepoints, resolve_alphabet, text_codepoints

__all__ = [
    "ALPHABETS",
    "check_codes",
    "encode_sequences",
    "decode_sequences",
    "filter_alignment",
    "sequence_weights",
]


def _working_memory_bytes():
    return get_config()["working_memory"] * 2**20


def encode_sequences(sequences, alphabet="protein"):
    """Encode aligned sequences as integer codes over an alphabet.

    Parameters
    ----------
    sequences : sequence of str, or array-like of str or bytes
        Aligned sequences, all of the same length, in any of these forms:

        * an iterable of ``str`` (``["AC-D", "ACED"]``);
        * an iterable of ASCII ``bytes``, read one character per byte;
        * an iterable of sequences of single characters
          (``[["A", "C"], ["A", "D"]]``);
        * a NumPy unicode or bytes array, 1-D of strings or 2-D of single
          characters (``np.array([list("AC"), list("AD")])``), or an object
          array holding any of the above.

        ``sequences`` is not modified.
    alphabet : str, default="protein"
        A name in :data:`ALPHABETS` (``"protein"``, ``"dna"``, ``"rna"``) or
        any string of distinct characters; character ``k`` gets code ``k``.
        When the alphabet has no lower-case letters, lower-case letters in the
        sequences are read as their upper-case forms.

    Returns
    -------
    codes : ndarray of shape (n_sequences, n_columns), dtype int64
        ``codes[s, i]`` is the position of character ``i`` of sequence ``s``
        in the alphabet (0 is the gap for the named alphabets).

    Raises
    ------
    ValueError
        For no sequences, ragged sequences (naming the first one of a
        different length), empty strings, a multi-character entry where
        single characters are expected, non-ASCII bytes, or a character
        outside the alphabet (naming the character, the sequence index and
        the 0-based position).
    TypeError
        For a single string, or entries that are neither strings nor
        sequences of characters.

    See Also
    --------
    decode_sequences : The inverse.

    Examples
    --------
    >>> from sklearn_attn.potts import encode_sequences
    >>> encode_sequences(["AC-", "acd"])
    array([[1, 2, 0],
           [1, 2, 3]])
    >>> encode_sequences(["GAT-"], alphabet="dna")
    array([[3, 1, 4, 0]])
    >>> encode_sequences([list("GA"), [b"T", b"-"]], alphabet="dna")
    array([[3, 1],
           [4, 0]])
    """
    alphabet = resolve_alphabet(alphabet)
    return encode_codepoints(text_codepoints(sequences), alphabet)


def check_codes(codes, *, n_sites=None, n_states=None, name="codes", rows=None):
    """Integer codes of shape ``(rows, L)``, as an int64 NumPy array.

    The one check of integer codes, shared by the alignment tools, the
    sampler and the conditionals: integer arrays, and floats that hold
    integers (codes read from a text file), on the host or a device.
    ``n_sites`` and ``n_states`` fix the number of columns and the range
    ``[0, n_states)`` when given; without them, any non-negative codes pass.
    """
    if rows is None:
        shape = "be a 2-D array (n_sequences, n_columns)"
    else:
        shape = f"have shape ({rows}, L)"
    if n_sites is not None:
        shape += f" with L = {n_sites} sites"
    try:
        array = np.asarray(to_host(codes))
    except ValueError:  # NumPy refuses ragged nested sequences
        raise ValueError(
            f"{name} must {shape}; its rows have different lengths."
        ) from None
    integral = array.dtype.kind in "iu" or (
        array.dtype.kind == "f"
        and bool(np.all(np.isfinite(array)))
        and bool(np.all(array == np.round(array)))
    )
    if not integral:
        what = "codes" if n_states is None else f"states in [0, {n_states})"
        hint = (
            " Use encode_sequences to turn aligned strings into codes."
            if array.dtype.kind in "USO"
            else ""
        )
        raise TypeError(
            f"{name} must hold integer {what}; got dtype {array.dtype}.{hint}"
        )
    if array.ndim != 2 or (n_sites is not None and array.shape[1] != n_sites):
        raise ValueError(f"{name} must {shape}; got shape {array.shape}.")
    if array.size and array.min() < 0:
        raise ValueError(
            f"{name} must hold non-negative codes; found {array.min()}."
            if n_states is None
            else f"{name} must hold states in [0, {n_states}); got values from "
            f"{array.min()} to {array.max()}."
        )
    if n_states is not None and array.size and array.max() >= n_states:
        raise ValueError(
            f"{name} must hold states in [0, {n_states}); got values from "
            f"{array.min()} to {array.max()}."
        )
    return array.astype(np.int64, copy=False)


def decode_sequences(codes, alphabet="protein"):
    """Decode integer codes back into aligned strings.

    Parameters
    ----------
    codes : array-like of shape (n_sequences, n_columns)
        Integer codes in ``[0, len(alphabet))``.
    alphabet : str, default="protein"
        A name in :data:`ALPHABETS` or a string of distinct characters.

    Returns
    -------
    sequences : list of str

    See Also
    --------
    encode_sequences : The inverse.

    Examples
    --------
    >>> from sklearn_attn.potts import decode_sequences
    >>> decode_sequences([[1, 2, 0], [4, 3, 1]], alphabet="dna")
    ['AC-', 'TGA']
    """
    alphabet = resolve_alphabet(alphabet)
    codes = check_codes(codes)
    if codes.size and codes.max() >= len(alphabet):
        s, i = (int(k) for k in np.argwhere(codes >= len(alphabet))[0])
        raise ValueError(
            f"codes[{s}, {i}] = {codes[s, i]} is outside the alphabet {alphabet!r} "
            f"(codes must be in [0, {len(alphabet)}))."
        )
    n, length = codes.shape
    if length == 0:
        return [""] * n
    table = np.asarray([ord(c) for c in alphabet], dtype=np.uint32)
    points = np.ascontiguousarray(table[codes])
    return points.view(f"<U{length}").ravel().tolist()


# ---------------------------------------------------------------------------
# Filtering and weights


def _check_fraction(value, name, allow_none=True):
    if value is None and allow_none:
        return
    if not isinstance(value, Real) or isinstance(value, bool) or not 0 <= value <= 1:
        expected = "a number in [0, 1] or None" if allow_none else "a number in [0, 1]"
        raise ValueError(f"{name} must be {expected}; got {value!r}.")


def filter_alignment(
    codes, *, max_gap_fraction_column=None, max_gap_fraction_sequence=None, gap_code=0
):
    """Drop gappy columns, then gappy sequences.

    Columns are filtered first, on all sequences; sequences are then judged on
    the kept columns only, so a sequence is not lost for gaps in columns that
    are dropped anyway.

    Parameters
    ----------
    codes : array-like of shape (n_sequences, n_columns)
        Integer codes.
    max_gap_fraction_column : float in [0, 1] or None, default=None
        Keep the columns whose fraction of gaps is at most this; ``None``
        keeps every column.
    max_gap_fraction_sequence : float in [0, 1] or None, default=None
        Keep the sequences whose fraction of gaps (over the kept columns) is
        at most this; ``None`` keeps every sequence.
    gap_code : int, default=0
        The code of the gap.

    Returns
    -------
    codes_filtered : ndarray of shape (n_kept_rows, n_kept_columns)
        A new array (``codes`` is not modified).
    kept_columns : ndarray of int
        Indices of the kept columns in ``codes``.
    kept_rows : ndarray of int
        Indices of the kept sequences in ``codes``.

    Examples
    --------
    >>> from sklearn_attn.potts import filter_alignment
    >>> codes = [[1, 0, 2, 0], [0, 0, 2, 3], [1, 0, 0, 0]]
    >>> filtered, cols, rows = filter_alignment(
    ...     codes, max_gap_fraction_column=0.7, max_gap_fraction_sequence=0.4)
    >>> filtered, cols, rows
    (array([[1, 2, 0],
           [0, 2, 3]]), array([0, 2, 3]), array([0, 1]))
    """
    codes = check_codes(codes)
    _check_fraction(max_gap_fraction_column, "max_gap_fraction_column")
    _check_fraction(max_gap_fraction_sequence, "max_gap_fraction_sequence")
    if not isinstance(gap_code, Integral) or isinstance(gap_code, bool):
        raise ValueError(f"gap_code must be an integer; got {gap_code!r}.")
    n, length = codes.shape
    if n == 0 or length == 0:
        raise ValueError(f"codes is empty (shape {codes.shape}).")
    gaps = codes == gap_code
    kept_columns = np.arange(length)
    if max_gap_fraction_column is not None:
        kept_columns = np.flatnonzero(gaps.mean(axis=0) <= max_gap_fraction_column)
        if kept_columns.size == 0:
            raise ValueError(
                f"max_gap_fraction_column={max_gap_fraction_column} removes every "
                "column."
            )
    kept_rows = np.arange(n)
    if max_gap_fraction_sequence is not None:
        row_gaps = gaps[:, kept_columns].mean(axis=1)
        kept_rows = np.flatnonzero(row_gaps <= max_gap_fraction_sequence)
        if kept_rows.size == 0:
            raise ValueError(
                f"max_gap_fraction_sequence={max_gap_fraction_sequence} removes "
                "every sequence."
            )
    return codes[np.ix_(kept_rows, kept_columns)], kept_columns, kept_rows


def _min_agreements(threshold, length):
    """Smallest integer k with ``k / length >= threshold`` in floating point."""
    k = min(max(math.ceil(threshold * length), 0), length)
    while k > 0 and (k - 1) / length >= threshold:
        k -= 1
    while k / length < threshold:
        k += 1
    return k


def sequence_weights(codes, *, identity_threshold=0.8, n_states=None):
    """DCA sequence weights: one over the number of close sequences.

    ``w_s = 1 / #{t : identity(s, t) >= identity_threshold}`` (``s`` itself
    included), where ``identity(s, t)`` is the fraction of the ``n_columns``
    columns at which ``s`` and ``t`` carry the same code (two gaps agree).
    This is plmc's reweighting (``-t 0.2`` is ``identity_threshold=0.8``);
    the effective number of sequences is ``w.sum()``.

    The agreement counts are products of one-hot matrices, computed for the
    distinct sequences only (duplicates count with their multiplicity), in
    blocks that fit scikit-learn's ``working_memory``. The counts are exact
    integers, so the weights are exact.

    Parameters
    ----------
    codes : array-like of shape (n_sequences, n_columns)
        Integer codes.
    identity_threshold : float in [0, 1], default=0.8
    n_states : int or None, default=None
        Number of states ``q``; codes must lie in ``[0, q)``. ``None`` takes
        ``codes.max() + 1``.

    Returns
    -------
    weights : ndarray of shape (n_sequences,), dtype float64

    Examples
    --------
    >>> from sklearn_attn.potts import sequence_weights
    >>> codes = [[1, 2, 3, 4, 5], [1, 2, 3, 4, 0], [5, 4, 3, 2, 1]]
    >>> sequence_weights(codes, identity_threshold=0.8)
    array([0.5, 0.5, 1. ])
    >>> float(sequence_weights(codes, identity_threshold=0.8).sum())  # N_eff
    2.0
    """
    codes = check_codes(codes)
    _check_fraction(identity_threshold, "identity_threshold", allow_none=False)
    n, length = codes.shape
    if n == 0 or length == 0:
        raise ValueError(f"codes is empty (shape {codes.shape}).")
    max_code = int(codes.max())
    if n_states is None:
        n_states = max_code + 1
    elif (
        not isinstance(n_states, Integral)
        or isinstance(n_states, bool)
        or (n_states < 1)
    ):
        raise ValueError(
            f"n_states must be a positive integer or None; got {n_states!r}."
        )
    elif max_code >= n_states:
        raise ValueError(f"codes has the value {max_code}, but n_states={n_states}.")

    unique, inverse, multiplicity = np.unique(
        codes, axis=0, return_inverse=True, return_counts=True
    )
    inverse = inverse.reshape(-1)
    # One-hot over the (column, state) pairs that occur, numbered compactly.
    flat = unique.astype(np.int64) + n_states * np.arange(length)
    _, onehot_columns = np.unique(flat, return_inverse=True)
    onehot_columns = onehot_columns.reshape(flat.shape)
    # Agreements (up to L) and counts (up to n) are exact integers in float32.
    dtype = np.float32 if max(n, length) < 2**24 else np.float64
    min_agree = _min_agreements(identity_threshold, length)
    counts = _close_counts(onehot_columns, multiplicity.astype(dtype), min_agree)
    return 1.0 / counts[inverse]


_MAX_BLOCK_ROWS = 1024


def _close_counts(onehot_columns, multiplicity, min_agree):
    """For each distinct sequence, the multiplicity-weighted number of close ones.

    ``onehot_columns[s, i]`` is the one-hot column of site ``i`` of sequence
    ``s``. Only blocks ``(I, J)`` with ``J >= I`` are computed, since the
    agreement matrix is symmetric; a diagonal block ``X_I @ X_I.T`` is a
    symmetric rank-k update in BLAS.
    """
    n_unique = onehot_columns.shape[0]
    width = int(onehot_columns.max()) + 1
    dtype = multiplicity.dtype
    # A block holds two one-hot slices (b x width) and agreements (b x b).
    budget = _working_memory_bytes() / dtype.itemsize
    block = int(math.sqrt(width**2 + budget) - width)
    # Beyond a few thousand rows a block gains no speed, only memory.
    block = min(max(block, 1), n_unique, _MAX_BLOCK_ROWS)
    starts = range(0, n_unique, block)
    counts = np.zeros(n_unique, dtype=np.float64)

    def one_hot(rows):
        out = np.zeros((rows.stop - rows.start, width), dtype=dtype)
        out[np.arange(out.shape[0])[:, None], onehot_columns[rows]] = 1.0
        return out

    for a, start in enumerate(starts):
        rows = slice(start, min(start + block, n_unique))
        x_rows = one_hot(rows)
        for other in starts[a:]:
            cols = slice(other, min(other + block, n_unique))
            x_cols = x_rows if other == start else one_hot(cols)
            close = x_rows @ x_cols.T
            np.greater_equal(close, min_agree, out=close)  # 1.0 where close
            counts[rows] += close @ multiplicity[cols]
            if other != start:
                counts[cols] += multiplicity[rows] @ close
    return counts


# ---------------------------------------------------------------------------
# Contact scores


def _state_frequencies(codes, weights, n_states):
    """Weighted frequency of each state at each site, shape (L * q,).

    With missing sites (code ``-1``), the frequencies of a site are those of
    the sequences that have it, as plmc's ``-g`` counts them (uniform where no
    sequence has it).
    """
    n_sites = codes.shape[1]
    present = codes >= 0
    flat = np.where(present, codes, 0) + n_states * np.arange(n_sites)
    counts = np.bincount(
        flat.ravel(),
        weights=(weights[:, None] * present).ravel(),
        minlength=n_sites * n_states,
    )
    if present.all():
        return counts / weights.sum()
    counts = counts.reshape(n_sites, n_states)
    totals = counts.sum(axis=1, keepdims=True)
    frequencies = np.full(counts.shape, 1.0 / n_states)
    np.divide(counts, totals, out=frequencies, where=totals > 0)
    return frequencies.ravel()


# Rows of the one-hot block of :func:`_site_coverage`: about 16 MB of float64.
_COVERAGE_BLOCK_BYTES = 2**24


def _site_coverage(codes, weights, n_states):
    """Weight of the sequences that have site ``i`` and state ``b`` at site
    ``j``, shape (L, L * q); None when no sequence misses a site.

    ``coverage[i, i q : (i + 1) q].sum()`` is the weight of the sequences that
    have site ``i``. Summed over blocks of rows, as ``P^T W X`` for the mask
    ``P`` of the sites present and the one-hot rows ``X``.
    """
    present = codes >= 0
    if present.all():
        return None
    n, n_sites = codes.shape
    width = n_sites * n_states
    coverage = np.zeros((n_sites, width))
    step = max(1, _COVERAGE_BLOCK_BYTES // (8 * width))
    offsets = n_states * np.arange(n_sites)
    for start in range(0, n, step):
        block = codes[start : start + step]
        mask = present[start : start + step]
        onehot = np.zeros((block.shape[0], width))
        row, site = np.nonzero(mask)
        onehot[row, block[row, site] + offsets[site]] = weights[start + row]
        coverage += mask.T.astype(np.float64) @ onehot
    return coverage
