"""Multiple sequence alignments for Potts models: reading, encoding, weights, scores.

Reading and encoding
    :func:`read_alignment` reads aligned FASTA, A2M and A3M (optionally gzipped);
    :func:`encode_sequences` turns aligned strings into integer codes
    ``(n_sequences, n_columns)`` over an alphabet whose first letter is the gap,
    and :func:`decode_sequences` turns them back.
Preparing an alignment
    :func:`filter_alignment` drops gappy columns and sequences;
    :func:`sequence_weights` gives the usual DCA reweighting
    ``w_s = 1 / #{t : identity(s, t) >= threshold}``.
Contact prediction
    :func:`frobenius_scores` and :func:`apc` turn a coupling tensor into
    contact scores; :func:`read_contact_map` and :func:`contact_precision`
    measure them against a structure.

Everything is NumPy on the host; the long computations (the all-pairs
identities of :func:`sequence_weights`, the blocks of :func:`frobenius_scores`)
run in chunks that fit scikit-learn's ``working_memory``.
"""

from __future__ import annotations

import gzip
import math
import os
import re
import zlib
from numbers import Integral, Real

import numpy as np
from sklearn import get_config
from sklearn.utils import Bunch

from ._text import (
    _check_unknown_letters,
    _encode_codepoints,
    _rows_with_unknown_letters,
    _text_codepoints,
)

__all__ = [
    "ALPHABETS",
    "read_alignment",
    "encode_sequences",
    "decode_sequences",
    "filter_alignment",
    "sequence_weights",
]

#: Named alphabets; the gap comes first, so code 0 is the gap.
ALPHABETS = {"protein": "-ACDEFGHIKLMNPQRSTVWY", "dna": "-ACGT", "rna": "-ACGU"}

_FORMATS = ("auto", "fasta", "a2m", "a3m")
# A2M/A3M insert states: lower-case letters and '.', deleted when reading.
_DROP_INSERTS = str.maketrans("", "", "abcdefghijklmnopqrstuvwxyz.")
_DOT_TO_GAP = str.maketrans(".", "-")
_GZIP_MAGIC = b"\x1f\x8b"


def _working_memory_bytes():
    return get_config()["working_memory"] * 2**20


# ---------------------------------------------------------------------------
# Reading


def _read_text(source, name="source"):
    """Text of a path or an open file (text or binary), gunzipped if needed.

    Line endings are normalised: LF, CRLF and CR-only files read alike, whether
    given as a path (gzipped or not) or as an open file in any newline mode.
    """
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as handle:
            data = handle.read()
    elif hasattr(source, "read"):
        data = source.read()
    else:
        raise TypeError(
            f"{name} must be a path or an open file; "
            f"got an object of type {type(source).__name__}."
        )
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data)
        if data[:2] == _GZIP_MAGIC:
            try:
                data = gzip.decompress(data)
            except (OSError, EOFError, zlib.error) as exc:
                raise ValueError(
                    f"{name} starts like a gzip file but cannot be decompressed "
                    f"({exc}); is the file complete?"
                ) from exc
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"{name} is not UTF-8 text: byte {exc.object[exc.start]:#04x} at "
                f"offset {exc.start} cannot be decoded."
            ) from exc
    elif isinstance(data, str):
        data = data.removeprefix("\ufeff")
    else:
        raise TypeError(
            f"{name}.read() must return str or bytes; got {type(data).__name__}."
        )
    return data.replace("\r\n", "\n").replace("\r", "\n")


def _resolve_format(source, format):
    if format not in _FORMATS:
        raise ValueError(f"format must be one of {_FORMATS}; got {format!r}.")
    if format != "auto":
        return format
    name = os.fspath(source) if isinstance(source, (str, os.PathLike)) else ""
    name = str(getattr(source, "name", name)).lower()
    name = name.removesuffix(".gz")
    for suffix in ("a2m", "a3m"):
        if name.endswith("." + suffix):
            return suffix
    return "fasta"


def read_alignment(
    source,
    *,
    format="auto",
    alphabet=None,
    unknown_letters="drop",
    focus=None,
    return_info=False,
):
    """Read an aligned FASTA, A2M or A3M file.

    Records start with a ``>`` line (the whole line after ``>`` is the name);
    the sequence may span several lines, and blank lines and white space are
    ignored. Gzipped input is recognised by its content, whatever its name,
    and LF, CRLF and CR-only line endings are read alike (from a path, a
    gzipped path or an open file in any newline mode).

    Conventions, as plmc and EVcouplings read alignments:

    * ``"fasta"``: every character is an alignment column; ``.`` is read as
      the gap ``-`` and lower-case letters are upper-cased.
    * ``"a2m"`` / ``"a3m"``: lower-case letters and ``.`` are insert states
      and are dropped; upper-case letters and ``-`` are the match columns
      (``-`` a deletion). For ``"a3m"``, lines starting with ``#`` (HH-suite
      headers) are skipped.
    * ``focus``: only the columns where the focus sequence has an upper-case
      letter are kept (plmc's ``-f``): not its gaps, nor its lower-case
      (insert) letters. Residues are numbered from the ``start`` of a name
      ``ID/start-end`` (else from 1), counting every letter of the focus
      sequence, inserts included.
    * ``alphabet``: sequences with a letter outside it (``X``, ``B``, ``Z``,
      ...) in a kept column are dropped (``unknown_letters="drop"``, plmc's
      behaviour; the focus sequence too, after it has chosen the columns),
      have such letters read as the gap (``"gap"``), or raise (``"error"``).

    Parameters
    ----------
    source : str, path-like or file object
        A path (``.gz`` or not) or an open text or binary file.
    format : {"auto", "fasta", "a2m", "a3m"}, default="auto"
        ``"auto"`` chooses ``"a2m"`` or ``"a3m"`` from the file name's suffix
        (before any ``.gz``) and ``"fasta"`` otherwise.
    alphabet : str or None, default=None
        A name in :data:`ALPHABETS` or a string of distinct characters whose
        first character is the gap; ``None`` checks no letters.
    unknown_letters : {"drop", "gap", "error"}, default="drop"
        What to do with a sequence holding letters outside ``alphabet``
        (ignored without one). Lower-case letters count as their upper-case
        forms.
    focus : str or None, default=None
        Name of the focus sequence: the full name, or a prefix of exactly one
        name (as plmc matches ``-f``, so ``"BPT1_BOVIN"`` finds
        ``"BPT1_BOVIN/36-88"``).
    return_info : bool, default=False
        Also return what was done, as a third value.

    Returns
    -------
    names : list of str
        Record names, in file order (dropped records left out).
    sequences : list of str
        Aligned sequences, all of the same length.
    info : :class:`~sklearn.utils.Bunch`
        Only when ``return_info=True``: ``n_read`` (records in the file),
        ``dropped`` (names of the dropped records), ``columns`` (0-based
        match columns kept), ``positions`` (1-based residue numbers of the
        kept columns: focus numbering, or ``columns + 1``), ``focus`` (the
        focus sequence's full name, or None) and ``residues`` (its letters at
        the kept columns, or None).

    Raises
    ------
    ValueError
        For a file without records, text before the first record, a record
        without sequence, sequences of different aligned lengths, bytes that
        are not UTF-8, a gzip stream that cannot be decompressed, a focus
        that names no record (or several), or unknown letters with
        ``unknown_letters="error"``.
    TypeError
        When ``source`` is neither a path nor an object with a ``read``
        method returning str or bytes.

    See Also
    --------
    encode_sequences : Aligned strings to integer codes.

    Examples
    --------
    >>> import io
    >>> from sklearn_attn.potts import read_alignment
    >>> text = ">query\\nAC-DE\\n>hit/1-7\\nAcCqD.E\\nF\\n"
    >>> read_alignment(io.StringIO(text), format="a2m")
    (['query', 'hit/1-7'], ['AC-DE', 'ACDEF'])
    >>> read_alignment(io.StringIO(">a\\nac.D\\n"))
    (['a'], ['AC-D'])

    Focus mode, and a sequence with an ``X`` dropped:

    >>> text = ">q/10-13\\nAc-DE\\n>h1\\nAC-XE\\n>h2\\nAC-DF\\n"
    >>> names, seqs, info = read_alignment(
    ...     io.StringIO(text), alphabet="protein", focus="q", return_info=True)
    >>> names, seqs
    (['q/10-13', 'h2'], ['ADE', 'ADF'])
    >>> info.dropped, info.positions.tolist(), info.residues
    (['h1'], [10, 12, 13], 'ADE')
    """
    format = _resolve_format(source, format)
    _check_unknown_letters(unknown_letters)
    if alphabet is not None:
        alphabet = _resolve_alphabet(alphabet)
    if focus is not None and not isinstance(focus, str):
        raise TypeError(f"focus must be a sequence name (str) or None; got {focus!r}.")
    names, raw = _read_records(source, format)
    n_read = len(names)
    if format == "fasta":
        aligned = [sequence.translate(_DOT_TO_GAP) for sequence in raw]
    else:
        aligned = [sequence.translate(_DROP_INSERTS) for sequence in raw]
    for number, sequence in enumerate(aligned, start=1):
        if not sequence:
            inserts = "" if format == "fasta" else " once insert states are dropped"
            raise ValueError(
                f"Record {number} ({names[number - 1]!r}) has no sequence{inserts}."
            )
        if len(sequence) != len(aligned[0]):
            raise ValueError(
                f"Record {number} ({names[number - 1]!r}) has aligned length "
                f"{len(sequence)}, but record 1 ({names[0]!r}) has "
                f"{len(aligned[0])}: the sequences are not aligned (read as "
                f"{format!r})."
            )
    length = len(aligned[0])
    columns = np.arange(length)
    positions = columns + 1
    residues = focus_name = None
    focus_index = None
    if focus is not None:
        focus_index = _find_focus(names, focus)
        focus_name = names[focus_index]
        columns, positions = _focus_columns(raw[focus_index], focus_name, format)
    sequences = [sequence.upper() for sequence in aligned]
    if focus is not None:
        take = columns.tolist()
        sequences = ["".join([seq[c] for c in take]) for seq in sequences]
        residues = sequences[focus_index]
    dropped = []
    if alphabet is not None:
        points = _text_codepoints(sequences)
        unknown = _rows_with_unknown_letters(points, alphabet)
        if unknown.any():
            if unknown_letters == "error":
                s = int(np.flatnonzero(unknown)[0])
                bad = sorted({c for c in sequences[s] if c not in alphabet})
                raise ValueError(
                    f"Record {s + 1} ({names[s]!r}) has letters outside the "
                    f"alphabet {alphabet!r}: {''.join(bad)!r}. Use "
                    "unknown_letters='drop' to leave such sequences out, or "
                    "'gap' to read those letters as gaps."
                )
            if unknown_letters == "gap":
                table = {
                    ord(c): alphabet[0]
                    for s in np.flatnonzero(unknown)
                    for c in sequences[s]
                    if c not in alphabet
                }
                sequences = [
                    seq.translate(table) if bad else seq
                    for seq, bad in zip(sequences, unknown, strict=True)
                ]
            else:
                dropped = [
                    name for name, bad in zip(names, unknown, strict=True) if bad
                ]
                names = [
                    name for name, bad in zip(names, unknown, strict=True) if not bad
                ]
                sequences = [
                    seq for seq, bad in zip(sequences, unknown, strict=True) if not bad
                ]
                if not sequences:
                    raise ValueError(
                        f"Every sequence has letters outside the alphabet "
                        f"{alphabet!r}; none is left."
                    )
    if not return_info:
        return names, sequences
    info = Bunch(
        n_read=n_read,
        dropped=dropped,
        columns=columns,
        positions=positions,
        focus=focus_name,
        residues=residues,
    )
    return names, sequences, info


def _read_records(source, format):
    """Names and raw sequences (white space removed) of the records."""
    text = _read_text(source)
    if format == "a3m":
        text = "\n".join(line for line in text.split("\n") if not line.startswith("#"))
    head, *chunks = ("\n" + text).split("\n>")
    if head.strip():
        raise ValueError(
            "source does not start with a FASTA record: text before the first "
            f"'>' line: {head.strip()[:40]!r}."
        )
    if not chunks:
        raise ValueError("source contains no FASTA records (no line starts with '>').")
    names, raw = [], []
    for chunk in chunks:
        header, _, body = chunk.partition("\n")
        names.append(header.strip())
        raw.append("".join(body.split()))
    return names, raw


def _find_focus(names, focus):
    """Index of the focus record: its full name, or the one name it prefixes."""
    if focus in names:
        return names.index(focus)
    matches = [k for k, name in enumerate(names) if name.startswith(focus)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ValueError(
            f"focus={focus!r} names no sequence of the alignment (neither a full "
            f"name nor a prefix of one); the first names are {names[:3]}."
        )
    raise ValueError(
        f"focus={focus!r} is a prefix of {len(matches)} names "
        f"({[names[k] for k in matches[:3]]}...); give the full name."
    )


_RANGE = re.compile(r"/(\d+)-(\d+)$")


def _focus_columns(raw, name, format):
    """Kept columns (upper-case letters of the focus) and their residue numbers.

    A residue's number counts every letter of the focus sequence before it
    (match and insert states alike), from the start of its ``/start-end``.
    """
    match = _RANGE.search(name)
    start = int(match.group(1)) if match else 1
    columns, positions = [], []
    residue = start
    column = 0
    for char in raw:
        is_insert = format != "fasta" and (char.islower() or char == ".")
        if not is_insert:
            if char.isalpha() and char.isupper():
                columns.append(column)
                positions.append(residue)
            column += 1
        if char.isalpha():
            residue += 1
    if not columns:
        raise ValueError(
            f"The focus sequence {name!r} has no upper-case letter: no column "
            "would be kept."
        )
    return np.asarray(columns), np.asarray(positions)


# ---------------------------------------------------------------------------
# Encoding


def _resolve_alphabet(alphabet):
    if isinstance(alphabet, str) and alphabet in ALPHABETS:
        return ALPHABETS[alphabet]
    if not isinstance(alphabet, str) or not alphabet:
        raise ValueError(
            f"alphabet must be one of {sorted(ALPHABETS)} or a non-empty string "
            f"of distinct characters; got {alphabet!r}."
        )
    if len(set(alphabet)) != len(alphabet):
        repeated = sorted({c for c in alphabet if alphabet.count(c) > 1})
        raise ValueError(
            f"alphabet must have distinct characters; {alphabet!r} repeats "
            f"{''.join(repeated)!r}."
        )
    return alphabet


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
    alphabet = _resolve_alphabet(alphabet)
    return _encode_codepoints(_text_codepoints(sequences), alphabet)


def _check_codes(codes, name="codes"):
    try:
        codes = np.asarray(codes)
    except ValueError:  # NumPy refuses ragged nested sequences
        raise ValueError(
            f"{name} must be a 2-D array (n_sequences, n_columns); its rows have "
            "different lengths."
        ) from None
    if codes.ndim != 2:
        raise ValueError(
            f"{name} must be a 2-D array (n_sequences, n_columns); got shape "
            f"{codes.shape}."
        )
    if not np.issubdtype(codes.dtype, np.integer):
        raise TypeError(
            f"{name} must hold integer codes; got dtype {codes.dtype}. Use "
            "encode_sequences to turn aligned strings into codes."
        )
    if codes.size and codes.min() < 0:
        raise ValueError(f"{name} must be non-negative; found {codes.min()}.")
    return codes


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
    alphabet = _resolve_alphabet(alphabet)
    codes = _check_codes(codes)
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
    codes = _check_codes(codes)
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
    codes = _check_codes(codes)
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
